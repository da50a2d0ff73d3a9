// Tools: browse category → tool → API, search, an API's page (schema, graph neighbourhood, runs
// that used it), register an API with its test call shown before admission, import OpenAPI.
import { api, get, post, qs } from '../api';
import { badge, clear, errorBox, field, h, into, jsonView, loading, routeParams, toast, when } from '../dom';
import { short } from '../timeline';
import type { Ctx } from '../main';

const apiHref = (id: string) => '#/tools/api?id=' + encodeURIComponent(id);

/** What the argument filler learned from remembered runs, per parameter: how often it took a
 * mention of each kind from the request, the words that pick that mention (and those that pass
 * it over), and a constant it is always sent with. */
function learnedView(l: any): HTMLElement {
  const cue = (c: any) => `${c.word} ${c.weight >= 0 ? '+' : ''}${c.weight}`;
  if (!l) return h('p', { class: 'muted learned' }, 'Nothing learned yet: no remembered run calls it with values from its request.');
  return h('table', { class: 'args learned' },
    h('thead', null, h('tr', null, h('th', null, 'parameter'), h('th', null, 'runs'), h('th', null, 'taken from the request'), h('th', null, 'constant'))),
    h('tbody', null, Object.entries(l).map(([name, s]: [string, any]) => h('tr', null,
      h('td', null, h('code', null, name)),
      h('td', null, String(s.support)),
      h('td', null, Object.entries(s.kinds ?? {}).map(([kind, k]: [string, any]) => h('div', null, `${kind} ×${k.times}`,
        k.decided ? h('span', { class: 'muted' }, ` · chose among several ${k.decided}× · words for: ${(k.cues_for ?? []).map(cue).join(', ') || '—'} · against: ${(k.cues_against ?? []).map(cue).join(', ') || '—'}`) : ''))),
      h('td', null, s.constant === null || s.constant === undefined ? '' : h('code', null, JSON.stringify(s.constant)))))));
}
const apiPath = (id: string) => '/v1/tools/' + id.split('/').map(encodeURIComponent).join('/');

function pct(x: number) {
  return `${Math.round((x ?? 0) * 100)}%`;
}

export async function toolsPage(main: HTMLElement, ctx: Ctx) {
  const p = routeParams();
  const category = p.get('category');
  const tool = p.get('tool');
  const offset = Number(p.get('offset') ?? 0);
  const q = h('input', { name: 'q', placeholder: 'search every API (hybrid retrieval)', 'aria-label': 'search APIs', value: p.get('q') ?? '' });
  const results = h('div');
  const search = async () => {
    const text = q.value.trim();
    if (!text) return;
    await into(results, async () => {
      const r = await get<any>('/v1/tools/search' + qs({ q: text, k: 20 }));
      return h('ol', { class: 'hits' }, r.results.map((x: any) => h('li', null, h('a', { href: apiHref(x.id) }, x.name ?? short(x.id)), h('span', { class: 'muted' }, ` ${x.id} · ${(+x.score).toFixed(3)}`))));
    }, 'Searching');
  };
  const crumbs = h('p', { class: 'crumbs' }, h('a', { href: '#/tools' }, 'categories'), category ? [' / ', h('a', { href: '#/tools?category=' + encodeURIComponent(category) }, category)] : null, tool ? [' / ', tool] : null);
  const body = h('div');
  clear(
    main,
    h('h1', null, 'Tools'),
    h('form', { class: 'row', onsubmit: (e: Event) => { e.preventDefault(); search(); } }, q, h('button', { type: 'submit' }, 'Search'), ctx.me.role === 'admin' ? [h('a', { class: 'button secondary', href: '#/tools/register' }, 'Register an API'), h('a', { class: 'button secondary', href: '#/tools/import' }, 'Import OpenAPI')] : null),
    results,
    crumbs,
    body,
  );
  if (q.value) search();
  if (!category) {
    await into(body, async () => {
      const r = await get<any>('/v1/categories');
      return h('ul', { class: 'grid' }, r.categories.map((c: any) => h('li', { class: 'card' }, h('a', { href: '#/tools?category=' + encodeURIComponent(c.id) }, c.name), h('p', { class: 'muted' }, `${c.tools} tools, ${c.apis} APIs`))));
    });
  } else if (!tool) {
    await into(body, async () => {
      const r = await get<any>('/v1/tools' + qs({ category, limit: 1 }));
      return h('ul', { class: 'grid' }, (r.tools ?? []).map((t: any) => h('li', { class: 'card' }, h('a', { href: `#/tools?category=${encodeURIComponent(category)}&tool=${encodeURIComponent(t.id)}` }, t.name), h('p', { class: 'muted' }, `${t.apis} APIs`))));
    });
  } else {
    await into(body, async () => {
      const r = await get<any>('/v1/tools' + qs({ category, tool, offset, limit: 50 }));
      const page = (o: number) => `#/tools?category=${encodeURIComponent(category)}&tool=${encodeURIComponent(tool)}&offset=${o}`;
      return [
        h('table', { class: 'apis' }, h('thead', null, h('tr', null, h('th', null, 'API'), h('th', null, 'method'), h('th', null, 'status'), h('th', null, 'availability'), h('th', null, 'calls'))), h('tbody', null, r.apis.map((a: any) => h('tr', null, h('td', null, h('a', { href: apiHref(a.id) }, a.name), h('div', { class: 'muted' }, a.description.slice(0, 120))), h('td', null, a.method), h('td', null, badge(a.status)), h('td', null, pct(a.availability)), h('td', null, String(a.calls)))))),
        h('p', { class: 'row' }, `${r.offset + 1}–${Math.min(r.offset + r.limit, r.total)} of ${r.total}`, r.offset > 0 ? h('a', { href: page(Math.max(0, r.offset - r.limit)) }, 'previous') : null, r.offset + r.limit < r.total ? h('a', { href: page(r.offset + r.limit) }, 'next') : null),
      ];
    });
  }
}

export async function apiPage(main: HTMLElement, ctx: Ctx) {
  const id = routeParams().get('id') ?? '';
  main.append(loading());
  const a = await get<any>(apiPath(id));
  const neighbours = h('div');
  const runs = h('div');
  const admin = h('div', { class: 'row' });
  if (ctx.me.role === 'admin') {
    const setStatus = (status: string) => async () => {
      const reason = prompt(`Why is ${a.name} ${status}?`, status === 'invalid' ? 'invalidated in the console' : 'restored in the console');
      if (reason === null) return;
      try {
        await api('PATCH', apiPath(id), { status, reason });
        toast(`${a.name} is ${status}`);
        apiPage(clear(main), ctx);
      } catch (e) {
        toast((e as Error).message, 'error');
      }
    };
    admin.append(a.status === 'invalid' ? h('button', { type: 'button', onclick: setStatus('active') }, 'Restore') : h('button', { type: 'button', class: 'danger', onclick: setStatus('invalid') }, 'Invalidate'));
    const approval = h('input', { type: 'checkbox', checked: !!a.requires_approval, onchange: async () => { try { await api('PATCH', apiPath(id), { requires_approval: approval.checked }); toast('saved'); } catch (e) { toast((e as Error).message, 'error'); approval.checked = !approval.checked; } } });
    admin.append(h('label', { class: 'check' }, approval, ' calls wait for an administrator’s approval'));
  }
  clear(
    main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/tools' }, 'categories'), ' / ', h('a', { href: '#/tools?category=' + encodeURIComponent(a.category) }, a.category), ' / ', h('a', { href: `#/tools?category=${encodeURIComponent(a.category)}&tool=${encodeURIComponent(a.tool)}` }, a.tool)),
    h('h1', null, a.name, ' ', badge(a.degraded_now ? 'degraded' : a.status)),
    h('p', null, h('code', null, a.method), ' ', h('code', null, a.url)),
    h('p', null, a.description),
    h('p', { class: 'muted' }, `availability ${pct(a.availability)} (${a.successes}/${a.calls} calls)`, a.status_reason ? ` · ${a.status_reason} (${a.status_since})` : ''),
    admin,
    h('h2', null, 'Parameters'),
    a.parameters.length ? h('table', { class: 'args' }, h('thead', null, h('tr', null, h('th', null, 'name'), h('th', null, 'type'), h('th', null, 'required'), h('th', null, 'default'), h('th', null, 'description'))), h('tbody', null, a.parameters.map((p: any) => h('tr', null, h('td', null, h('code', null, p.name)), h('td', null, p.type), h('td', null, p.required ? 'yes' : ''), h('td', null, p.default === undefined || p.default === null ? '' : JSON.stringify(p.default)), h('td', null, p.description ?? ''))))) : h('p', { class: 'muted' }, 'none'),
    h('h2', null, 'Where its arguments come from'),
    learnedView(a.learned_arguments),
    h('h2', null, 'Output fields'),
    h('p', null, (a.output_fields ?? []).join(', ') || '—'),
    h('h2', null, 'Graph neighbourhood ', h('a', { href: '#/graph?id=' + encodeURIComponent(id), class: 'small' }, 'open in the graph view')),
    neighbours,
    h('h2', null, 'Runs that used it'),
    runs,
  );
  into(neighbours, async () => {
    const n = await get<any>('/v1/graph/neighborhood' + qs({ id, k: 8 }));
    const next = n.edges.filter((e: any) => e.kind === 'NEXT');
    const li = (e: any, other: string) => h('li', null, other === 'START' || other === 'END' ? other : h('a', { href: apiHref(other) }, short(other)), h('span', { class: 'muted' }, ` static ${(+e.static_weight).toFixed(2)}, dynamic ${(+e.dynamic_weight).toFixed(2)}, ${e.count}×`));
    return h('div', { class: 'split' }, h('div', null, h('h3', null, `before it (${n.predecessors_total})`), h('ul', null, next.filter((e: any) => e.to === id).map((e: any) => li(e, e.from)))), h('div', null, h('h3', null, `after it (${n.successors_total})`), h('ul', null, next.filter((e: any) => e.from === id).map((e: any) => li(e, e.to)))));
  });
  into(runs, async () => {
    const r = await get<any>('/v1/runs' + qs({ tool: id, limit: 10 }));
    if (!r.runs.length) return h('p', { class: 'muted' }, 'None of your runs used it.');
    return h('ul', null, r.runs.map((x: any) => h('li', null, h('a', { href: '#/history/run?id=' + encodeURIComponent(x.run_id) }, x.request.slice(0, 120)), ' ', badge(x.status), h('span', { class: 'muted' }, ' ' + when(x.created_ms)))));
  });
}

const TYPES = ['string', 'integer', 'number', 'boolean', 'array', 'object'];

export async function registerPage(main: HTMLElement, _ctx: Ctx) {
  const name = h('input', { name: 'name', required: true, maxlength: 200 });
  const tool = h('input', { name: 'tool', placeholder: 'defaults to the API’s name' });
  const category = h('input', { name: 'category', placeholder: 'Registered' });
  const description = h('textarea', { name: 'description', rows: 2 });
  const method = h('select', { name: 'method' }, ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].map((m) => h('option', { value: m }, m)));
  const url = h('input', { name: 'url', type: 'url', required: true, placeholder: 'https://api.example.com/v1/things/{id}' });
  const example = h('textarea', { name: 'example', rows: 2, placeholder: '{"q": "Paris"} — the test call’s arguments (required parameters without a default need one)' });
  const params = h('tbody');
  const addParam = (p: any = {}) => {
    const row = h('tr', { class: 'param' }, h('td', null, h('input', { name: 'p-name', value: p.name ?? '', 'aria-label': 'parameter name' })), h('td', null, h('select', { name: 'p-type', 'aria-label': 'parameter type' }, TYPES.map((t) => h('option', { value: t }, t)))), h('td', null, h('input', { type: 'checkbox', name: 'p-required', 'aria-label': 'required' })), h('td', null, h('input', { name: 'p-default', 'aria-label': 'default value' })), h('td', null, h('input', { name: 'p-description', 'aria-label': 'parameter description' })), h('td', null, h('button', { type: 'button', class: 'link danger', onclick: () => row.remove() }, 'remove')));
    params.append(row);
  };
  const out = h('div', { 'aria-live': 'polite' });
  const admit = h('button', { type: 'button', disabled: true }, 'Admit');
  const body = () => {
    const parameters = [...params.querySelectorAll('tr.param')].map((r) => {
      const v = (n: string) => (r.querySelector(`[name=${n}]`) as HTMLInputElement).value.trim();
      const def = v('p-default');
      let dv: unknown = undefined;
      if (def) {
        try {
          dv = JSON.parse(def);
        } catch {
          dv = def;
        }
      }
      return { name: v('p-name'), type: v('p-type'), required: (r.querySelector('[name=p-required]') as HTMLInputElement).checked, default: dv, description: v('p-description') };
    }).filter((p) => p.name);
    let ex: unknown = undefined;
    if (example.value.trim()) ex = JSON.parse(example.value);
    return { name: name.value.trim(), tool: tool.value.trim() || undefined, category: category.value.trim() || undefined, description: description.value, method: method.value, url: url.value.trim(), parameters, example: ex };
  };
  const test = async () => {
    admit.disabled = true;
    clear(out, loading('Calling it'));
    try {
      const r = await post<any>('/v1/tools?dry_run=true', body());
      clear(out, h('div', { class: 'card test-call', 'data-ok': 'true' }, h('h3', null, `Test call: HTTP ${r.test_call.status} in ${Math.round(r.test_call.elapsed_ms)} ms`), h('p', null, 'It would be admitted as ', h('code', null, r.id), '; output fields: ', r.output_fields.join(', ') || '—'), jsonView(r.test_call.response)));
      admit.disabled = false;
    } catch (e) {
      clear(out, errorBox(e));
    }
  };
  admit.addEventListener('click', async () => {
    admit.disabled = true;
    try {
      const r = await post<any>('/v1/tools', body());
      clear(out, h('p', { class: 'ok' }, 'Admitted: ', h('a', { href: apiHref(r.id) }, r.id)));
    } catch (e) {
      clear(out, errorBox(e));
    }
  });
  clear(
    main,
    h('h1', null, 'Register an API'),
    h('p', { class: 'muted' }, 'The API is validated and called once with the example’s arguments; you see that test call before you admit it.'),
    h('form', { class: 'card', onsubmit: (e: Event) => { e.preventDefault(); test(); } },
      h('div', { class: 'row' }, field('Name', name), field('Tool', tool), field('Category', category)),
      field('Description', description),
      h('div', { class: 'row' }, field('Method', method), field('URL', url)),
      h('h3', null, 'Parameters'),
      h('table', { class: 'args' }, h('thead', null, h('tr', null, h('th', null, 'name'), h('th', null, 'type'), h('th', null, 'required'), h('th', null, 'default'), h('th', null, 'description'), h('th', null, ''))), params),
      h('button', { type: 'button', class: 'secondary', onclick: () => addParam() }, 'Add a parameter'),
      field('Example arguments (JSON)', example),
      h('div', { class: 'row' }, h('button', { type: 'submit' }, 'Test call'), admit),
    ),
    out,
  );
}

export async function importPage(main: HTMLElement, _ctx: Ctx) {
  const doc = h('textarea', { name: 'document', rows: 12, placeholder: 'paste an OpenAPI 3 document (JSON or YAML), or choose a file' });
  const file = h('input', { type: 'file', accept: '.json,.yaml,.yml', onchange: async () => { const f = file.files?.[0]; if (f) doc.value = await f.text(); } });
  const category = h('input', { name: 'category', placeholder: 'Imported' });
  const out = h('div', { 'aria-live': 'polite' });
  const raw = () => {
    const text = doc.value.trim();
    return { text, type: text.startsWith('{') ? 'application/json' : 'application/yaml' };
  };
  const preview = async () => {
    clear(out, loading('Reading the document'));
    try {
      const r = await api<any>('POST', '/v1/tools/import-openapi' + qs({ dry_run: true, category: category.value.trim() }), undefined, raw());
      const boxes = r.operations.map((o: any) => [o.operation, h('input', { type: 'checkbox', checked: true, 'aria-label': o.operation })] as const);
      const go = h('button', { type: 'button' }, 'Import the selected operations');
      go.addEventListener('click', async () => {
        const only = boxes.filter(([, b]: any) => b.checked).map(([o]: any) => o).join(',');
        go.disabled = true;
        try {
          const res = await api<any>('POST', '/v1/tools/import-openapi' + qs({ category: category.value.trim(), only }), undefined, raw());
          clear(out, h('h3', null, `Admitted ${res.admitted.length}`), h('ul', null, res.admitted.map((a: any) => h('li', null, h('a', { href: apiHref(a.id) }, a.id)))), h('h3', null, `Skipped ${res.skipped.length}`), h('ul', null, res.skipped.map((s: any) => h('li', null, `${s.operation}: ${s.reason}`))));
        } catch (e) {
          clear(out, errorBox(e));
        }
      });
      clear(out, h('table', { class: 'args' }, h('thead', null, h('tr', null, h('th', null, 'admit'), h('th', null, 'operation'), h('th', null, 'name'), h('th', null, 'parameters'), h('th', null, ''))), h('tbody', null, r.operations.map((o: any, i: number) => h('tr', null, h('td', null, boxes[i][1]), h('td', null, h('code', null, o.operation)), h('td', null, o.name), h('td', null, o.parameters.map((p: any) => p.name + (p.required ? '*' : '')).join(', ')), h('td', { class: 'muted' }, o.needs_example ? 'needs example values: its test call may fail' : ''))))), r.skipped.length ? h('p', { class: 'muted' }, `${r.skipped.length} operations cannot be imported: `, r.skipped.map((s: any) => `${s.operation} (${s.reason})`).join('; ')) : null, go);
    } catch (e) {
      clear(out, errorBox(e));
    }
  };
  clear(main, h('h1', null, 'Import an OpenAPI document'), h('form', { class: 'card', onsubmit: (e: Event) => { e.preventDefault(); preview(); } }, field('Document', doc), file, field('Category', category), h('button', { type: 'submit' }, 'Preview the operations')), out);
}
