import './style.css';
import { ApiError, get, Me, onUnauthorized, post, setCsrf } from './api';
import { clear, errorBox, field, h, loading } from './dom';
import { askPage } from './pages/ask';
import { chainsPage } from './pages/chains';
import { historyPage, runPage, diffPage } from './pages/history';
import { toolsPage, apiPage, registerPage, importPage } from './pages/tools';
import { graphPage } from './pages/graph';
import { memoryPage } from './pages/memory';
import { settingsPage } from './pages/settings';

export interface Ctx {
  me: Me;
}

type Page = (main: HTMLElement, ctx: Ctx) => void | Promise<void>;

const routes: Record<string, { page: Page; title: string; admin?: boolean; nav?: boolean }> = {
  ask: { page: askPage, title: 'Ask', nav: true },
  chains: { page: chainsPage, title: 'Chains', nav: true },
  history: { page: historyPage, title: 'History', nav: true },
  'history/run': { page: runPage, title: 'Run' },
  'history/diff': { page: diffPage, title: 'Compare runs' },
  tools: { page: toolsPage, title: 'Tools', nav: true },
  'tools/api': { page: apiPage, title: 'API' },
  'tools/register': { page: registerPage, title: 'Register an API', admin: true },
  'tools/import': { page: importPage, title: 'Import OpenAPI', admin: true },
  graph: { page: graphPage, title: 'Graph', nav: true },
  memory: { page: memoryPage, title: 'Memory', admin: true, nav: true },
  settings: { page: settingsPage, title: 'Settings', admin: true, nav: true },
};

const app = document.getElementById('app')!;
let me: Me | null = null;

function routeName(): string {
  const hash = location.hash.replace(/^#\/?/, '');
  const path = hash.split('?')[0];
  return routes[path] ? path : 'ask';
}

async function logout() {
  try {
    await post('/v1/logout');
  } finally {
    me = null;
    setCsrf(null);
    showLogin();
  }
}

function layout(current: string): HTMLElement {
  const main = h('main', { id: 'main', tabindex: '-1' });
  const top = current.split('/')[0];
  const nav = h(
    'nav',
    { 'aria-label': 'pages' },
    Object.entries(routes)
      .filter(([, r]) => r.nav && (!r.admin || me?.role === 'admin'))
      .map(([k, r]) => h('a', { href: '#/' + k, class: k === top ? 'active' : '', 'aria-current': k === top ? 'page' : null }, r.title)),
  );
  const user = h('div', { class: 'user' }, h('span', { title: me?.user_id }, `${me?.name} (${me?.role})`), me?.user_id !== 'local' ? h('button', { type: 'button', class: 'link', onclick: logout }, 'Log out') : null);
  const header = h('header', null, h('a', { class: 'brand', href: '#/ask' }, 'toolgraph'), nav, user);
  clear(app, h('a', { class: 'skip', href: '#main', onclick: (e: Event) => { e.preventDefault(); main.focus(); } }, 'Skip to content'), header, main);
  return main;
}

async function render() {
  if (!me) return;
  const name = routeName();
  const r = routes[name];
  document.title = `${r.title} · toolgraph`;
  const main = layout(name);
  if (r.admin && me.role !== 'admin') {
    main.append(errorBox(new ApiError(403, 'forbidden', `${r.title} is for administrators`)));
    return;
  }
  main.append(loading());
  try {
    main.replaceChildren();
    await r.page(main, { me });
  } catch (e) {
    main.replaceChildren(errorBox(e));
  }
}

function showLogin(message?: string) {
  document.title = 'Log in · toolgraph';
  const name = h('input', { name: 'name', autocomplete: 'username', required: true });
  const password = h('input', { name: 'password', type: 'password', autocomplete: 'current-password', required: true });
  const key = h('input', { name: 'api_key', type: 'password', autocomplete: 'off', placeholder: 'tgk_…' });
  const status = h('div', { 'aria-live': 'assertive' }, message ? errorBox(new Error(message)) : null);
  const submit = async (body: Record<string, string>, button: HTMLButtonElement) => {
    button.disabled = true;
    clear(status, loading('Logging in'));
    try {
      const r = await post<any>('/v1/login', body);
      setCsrf(r.csrf_token ?? null);
      me = { ...r.user, csrf_token: r.csrf_token };
      if (!location.hash || location.hash === '#/login') location.hash = '#/ask';
      render();
    } catch (e) {
      clear(status, errorBox(e));
    } finally {
      button.disabled = false;
    }
  };
  const b1 = h('button', { type: 'submit' }, 'Log in');
  const b2 = h('button', { type: 'submit', class: 'secondary' }, 'Log in with the key');
  const pwForm = h('form', { class: 'card', onsubmit: (e: Event) => { e.preventDefault(); submit({ name: name.value, password: password.value }, b1); } }, h('h2', null, 'Name and password'), field('Name', name), field('Password', password), b1);
  const keyForm = h('form', { class: 'card', onsubmit: (e: Event) => { e.preventDefault(); submit({ api_key: key.value.trim() }, b2); } }, h('h2', null, 'API key'), field('Key', key, 'a key of yours (toolgraph users add-key), or a bootstrap key'), b2);
  clear(app, h('main', { class: 'login' }, h('h1', null, 'toolgraph'), h('p', { class: 'muted' }, 'Log in to plan and run tool chains.'), status, h('div', { class: 'login-forms' }, pwForm, keyForm)));
  name.focus();
}

onUnauthorized(() => {
  if (me) {
    me = null;
    setCsrf(null);
    showLogin('Your login has ended: log in again.');
  }
});

async function start() {
  try {
    me = await get<Me>('/v1/me');
    setCsrf(me.csrf_token ?? null);
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return showLogin();
    clear(app, h('main', null, errorBox(e)));
    return;
  }
  render();
}

window.addEventListener('hashchange', () => render());
start();
