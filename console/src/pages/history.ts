// History: the caller's runs (persisted), filtered by status, tool and text; open one, re-run it,
// compare two.
import { get, post, qs } from '../api';
import { badge, clear, errorBox, field, go, h, into, jsonView, loading, routeParams, when } from '../dom';
import { outcome, short, timeline } from '../timeline';
import type { Ctx } from '../main';

const STATUSES = ['', 'answered', 'partial', 'gave_up', 'needs_input', 'awaiting_approval', 'running', 'interrupted', 'error'];

export async function historyPage(main: HTMLElement, _ctx: Ctx) {
  const params = routeParams();
  const status = h('select', { name: 'status' }, STATUSES.map((s) => h('option', { value: s }, s ? s.replace('_', ' ') : 'any status')));
  status.value = params.get('status') ?? '';
  const tool = h('input', { name: 'tool', placeholder: 'API id (category/tool/api)', value: params.get('tool') ?? '' });
  const text = h('input', { name: 'q', placeholder: 'text in the request', value: params.get('q') ?? '' });
  const table = h('tbody');
  const more = h('button', { type: 'button', class: 'secondary', hidden: true }, 'More');
  const compare = h('button', { type: 'button', disabled: true }, 'Compare the two selected');
  const picked = new Set<string>();
  let next: string | null = null;

  const rowOf = (r: any) => {
    const box = h('input', { type: 'checkbox', 'aria-label': `select run ${r.run_id}`, onchange: () => { if (box.checked) picked.add(r.run_id); else picked.delete(r.run_id); compare.disabled = picked.size !== 2; } });
    return h('tr', { 'data-run': r.run_id }, h('td', null, box), h('td', null, when(r.created_ms)), h('td', null, h('a', { href: '#/history/run?id=' + encodeURIComponent(r.run_id) }, r.request.slice(0, 140))), h('td', null, badge(r.status)), h('td', { class: 'muted' }, (r.tools ?? []).map(short).join(' → ')), h('td', null, r.duration_ms != null ? `${r.duration_ms} ms` : ''));
  };
  let generation = 0; // only the latest load writes the table
  const load = async (append: boolean) => {
    const mine = ++generation;
    if (!append) {
      table.replaceChildren(h('tr', null, h('td', { colspan: 6 }, loading())));
      next = null;
    }
    try {
      const r = await get<any>('/v1/runs' + qs({ status: status.value, tool: tool.value.trim(), q: text.value.trim(), before: append ? next : undefined, limit: 25 }));
      if (mine !== generation) return;
      if (!append) table.replaceChildren();
      for (const run of r.runs) table.append(rowOf(run));
      if (!append && !r.runs.length) table.append(h('tr', null, h('td', { colspan: 6, class: 'muted' }, 'No runs match.')));
      next = r.next ?? null;
      more.hidden = !next;
    } catch (e) {
      if (mine === generation) table.replaceChildren(h('tr', null, h('td', { colspan: 6 }, errorBox(e))));
    }
  };
  more.addEventListener('click', () => load(true));
  compare.addEventListener('click', () => {
    const [a, b] = [...picked];
    go(`#/history/diff?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`);
  });
  const form = h('form', { class: 'row filters', onsubmit: (e: Event) => { e.preventDefault(); load(false); } }, field('Status', status), field('Tool', tool), field('Text', text), h('button', { type: 'submit' }, 'Filter'));
  clear(main, h('h1', null, 'History'), form, h('div', { class: 'row' }, compare), h('div', { class: 'scroll' }, h('table', { class: 'runs' }, h('thead', null, h('tr', null, h('th', null, ''), h('th', null, 'when'), h('th', null, 'request'), h('th', null, 'status'), h('th', null, 'chain'), h('th', null, 'took'))), table)), more);
  await load(false);
}

export async function runPage(main: HTMLElement, _ctx: Ctx) {
  const id = routeParams().get('id') ?? '';
  main.append(loading());
  const run = await get<any>('/v1/runs/' + encodeURIComponent(id));
  const t = timeline(() => id);
  for (const s of run.trace ?? []) t.add(s);
  const rerunOut = h('div', { 'aria-live': 'polite' });
  const rerun = async () => {
    clear(rerunOut, loading('Re-running'));
    try {
      const r = await post<any>(`/v1/runs/${encodeURIComponent(id)}/rerun`);
      clear(rerunOut, h('p', null, 'New run: '), outcome(r));
    } catch (e) {
      clear(rerunOut, errorBox(e));
    }
  };
  clear(
    main,
    h('h1', null, 'Run ', h('code', null, id)),
    h('p', { class: 'request' }, run.request),
    h('p', { class: 'muted' }, when(run.created_ms), run.session_id ? h('span', null, ' · ', h('a', { href: '#/ask?session=' + encodeURIComponent(run.session_id) }, 'continue this conversation')) : null),
    outcome({ ...run, run_id: undefined }),
    h('div', { class: 'row' }, h('button', { type: 'button', onclick: rerun }, 'Re-run'), (run.chain ?? []).length ? h('a', { class: 'button secondary', href: '#/chains?run=' + encodeURIComponent(id) }, 'Edit the chain') : null),
    rerunOut,
    run.needs_input ? h('p', null, 'Needed: ', run.needs_input.missing.join(', '), ' — ', run.needs_input.message) : null,
    h('h2', null, 'Steps'),
    t.el,
    h('details', null, h('summary', null, 'the stored run (JSON)'), jsonView(run, false)),
  );
}

/** Two runs side by side: status, chain step by step (differences marked), answers. */
export async function diffPage(main: HTMLElement, _ctx: Ctx) {
  const p = routeParams();
  const [a, b] = [p.get('a') ?? '', p.get('b') ?? ''];
  await into(main, async () => {
    const [ra, rb] = await Promise.all([get<any>('/v1/runs/' + encodeURIComponent(a)), get<any>('/v1/runs/' + encodeURIComponent(b))]);
    const ca = ra.chain ?? [];
    const cb = rb.chain ?? [];
    const rows: HTMLElement[] = [];
    for (let i = 0; i < Math.max(ca.length, cb.length); i++) {
      const x = ca[i];
      const y = cb[i];
      const same = x && y && x.api === y.api && JSON.stringify(x.sent ?? x.arguments) === JSON.stringify(y.sent ?? y.arguments);
      const cell = (c: any) => (c ? h('td', null, h('strong', null, short(c.api)), h('pre', null, JSON.stringify(c.sent ?? c.arguments, null, 1))) : h('td', { class: 'muted' }, '—'));
      rows.push(h('tr', { class: same ? 'same' : 'differs' }, h('td', null, String(i + 1)), cell(x), cell(y)));
    }
    const head = (r: any, id: string) => h('th', null, h('a', { href: '#/history/run?id=' + encodeURIComponent(id) }, id), ' ', badge(r.status));
    return [
      h('h1', null, 'Compare runs'),
      h('table', { class: 'diff' }, h('thead', null, h('tr', null, h('th', null, ''), head(ra, a), head(rb, b))), h('tbody', null, h('tr', { class: ra.request === rb.request ? 'same' : 'differs' }, h('td', null, 'request'), h('td', null, ra.request), h('td', null, rb.request)), rows, h('tr', { class: ra.answer === rb.answer ? 'same' : 'differs' }, h('td', null, 'answer'), h('td', null, ra.answer), h('td', null, rb.answer)))),
    ];
  }, 'Loading the two runs');
}
