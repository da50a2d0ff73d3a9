// Memory: the long-term memory's (request → chain) entries; search, delete.
import { api, get, qs } from '../api';
import { clear, errorBox, h, into, toast } from '../dom';
import { short } from '../timeline';
import type { Ctx } from '../main';

export async function memoryPage(main: HTMLElement, _ctx: Ctx) {
  const q = h('input', { name: 'q', placeholder: 'text in the request or an API id', 'aria-label': 'search memories' });
  const list = h('div');
  const load = () =>
    into(list, async () => {
      const r = await get<any>('/v1/memory' + qs({ q: q.value.trim(), limit: 100 }));
      if (!r.entries.length) return h('p', { class: 'muted' }, 'No stored plans match. Runs judged complete are remembered here.');
      return [
        h('p', { class: 'muted' }, `${r.total} stored plans`),
        h('ul', { class: 'memories' }, r.entries.map((m: any) =>
          h('li', { class: 'card', 'data-memory': m.id },
            h('p', null, h('strong', null, m.request)),
            h('ol', null, m.chain.map((s: any) => h('li', null, h('a', { href: '#/tools/api?id=' + encodeURIComponent(s.api) }, short(s.api)), h('code', { class: 'muted' }, ' ' + JSON.stringify(s.arguments))))),
            h('button', { type: 'button', class: 'danger', onclick: async () => {
              if (!confirm('Delete this stored plan?')) return;
              try {
                await api('DELETE', '/v1/memory/' + encodeURIComponent(m.id));
                toast('deleted');
                load();
              } catch (e) {
                list.prepend(errorBox(e));
              }
            } }, 'Delete'),
          ),
        )),
      ];
    });
  q.addEventListener('input', () => load());
  clear(main, h('h1', null, 'Memory'), h('p', { class: 'muted' }, 'Plans judged good, recalled for similar requests (a close one is replayed without planning).'), q, list);
  await load();
}
