// Settings (administrators): models and run defaults, users and their keys.
import { api, get, post } from '../api';
import { clear, errorBox, field, h, into, jsonView, toast, when } from '../dom';
import { prefs } from './ask';
import type { Ctx } from '../main';

export async function settingsPage(main: HTMLElement, _ctx: Ctx) {
  const daemon = h('div');
  const users = h('div');
  const p = prefs();
  clear(
    main,
    h('h1', null, 'Settings'),
    h('h2', null, 'Daemon'),
    daemon,
    h('h2', null, 'This browser'),
    h('p', { class: 'muted' }, `Ask starts with planner “${p.planner || 'daemon default'}”, model “${p.model || 'default'}”, mode “${p.mode || 'daemon default'}”${p.backward ? ', target first' : ''} (chosen on the Ask page, kept in this browser).`),
    h('h2', null, 'Users and keys'),
    users,
  );
  into(daemon, async () => {
    const s = await get<any>('/v1/settings');
    return [
      h('p', null, `graph store: ${s.graph} · vectors: ${s.vectors} · state: ${s.state}`),
      h('h3', null, 'Models'),
      s.models.list.length ? h('table', { class: 'args' }, h('thead', null, h('tr', null, h('th', null, 'name'), h('th', null, 'model'), h('th', null, 'endpoint'))), h('tbody', null, s.models.list.map((m: any) => h('tr', null, h('td', null, m.name + (m.name === s.models.default ? ' (default)' : '')), h('td', null, m.model ?? ''), h('td', null, m.base_url ?? m.url ?? ''))))) : h('p', { class: 'muted' }, 'No LLM configured: the deterministic planner decides (configure [llm] models in the daemon’s settings).'),
      h('h3', null, 'Run defaults'),
      h('details', null, h('summary', null, `mode ${s.run.mode}, top-k ${s.run.top_k}, seeds ${s.run.seeds}`), jsonView(s.run)),
      h('p', { class: 'muted' }, 'These come from the daemon’s configuration file and TOOLGRAPH__RUN__* variables; each request may choose its planner, model and mode.'),
    ];
  });
  const loadUsers = () =>
    into(users, async () => {
      const r = await get<any>('/v1/users');
      const name = h('input', { name: 'new-name', required: true, 'aria-label': 'new user name' });
      const role = h('select', { name: 'new-role', 'aria-label': 'role' }, h('option', { value: 'user' }, 'user'), h('option', { value: 'admin' }, 'admin'));
      const password = h('input', { name: 'new-password', type: 'password', autocomplete: 'new-password', 'aria-label': 'password (for the console)' });
      const shown = h('div', { 'aria-live': 'polite' });
      const add = h('form', { class: 'row card', onsubmit: async (e: Event) => {
        e.preventDefault();
        try {
          const res = await post<any>('/v1/users', { name: name.value.trim(), role: role.value, password: password.value || undefined, with_key: true });
          loadUsers().then(() => users.prepend(keyShown(res.key?.key)));
        } catch (err) {
          clear(shown, errorBox(err));
        }
      } }, field('Name', name), field('Role', role), field('Password', password, 'optional: for this console'), h('button', { type: 'submit' }, 'Add user with a key'));
      return [
        h('table', { class: 'args users' }, h('thead', null, h('tr', null, h('th', null, 'name'), h('th', null, 'role'), h('th', null, 'since'), h('th', null, 'keys'))), h('tbody', null, r.users.map((u: any) => {
          const keys = h('td');
          into(keys, async () => {
            const k = await get<any>(`/v1/users/${encodeURIComponent(u.id)}/keys`);
            const live = k.keys.filter((x: any) => !x.revoked_ms);
            return [h('ul', null, live.map((x: any) => h('li', null, h('code', null, x.prefix + '…'), ` ${x.label} `, x.expires_ms ? h('span', { class: 'muted' }, `expires ${when(x.expires_ms)} `) : null, h('button', { type: 'button', class: 'link danger', onclick: async () => { if (!confirm('Revoke this key?')) return; try { await api('DELETE', '/v1/keys/' + encodeURIComponent(x.id)); toast('revoked'); loadUsers(); } catch (e) { toast((e as Error).message, 'error'); } } }, 'revoke')))), h('button', { type: 'button', class: 'link', onclick: async () => { try { const n = await post<any>(`/v1/users/${encodeURIComponent(u.id)}/keys`, { label: 'console' }); users.prepend(keyShown(n.key)); loadUsers().then(() => users.prepend(keyShown(n.key))); } catch (e) { toast((e as Error).message, 'error'); } } }, 'new key')];
          });
          return h('tr', null, h('td', null, u.name), h('td', null, u.role), h('td', null, when(u.created_ms)), keys);
        }))),
        h('h3', null, 'Add a user'),
        add,
        shown,
      ];
    });
  await loadUsers();
}

function keyShown(key?: string): HTMLElement {
  if (!key) return h('span');
  return h('div', { class: 'card key-shown', role: 'status' }, h('p', null, 'The new key (shown once: store it now):'), h('code', { class: 'secret' }, key));
}
