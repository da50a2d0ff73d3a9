// The chain editor (developer mode): open a run's chain or a saved one, add / delete / reorder
// steps, edit arguments (references offered from earlier steps' outputs), validate, execute,
// save as a template.
import { api, get, post, qs, stream } from '../api';
import { clear, errorBox, field, h, into, routeParams, toast } from '../dom';
import { outcome, short, timeline } from '../timeline';
import type { Ctx } from '../main';

interface Step {
  api: string;
  arguments: Record<string, unknown>;
}

interface ApiDoc {
  id: string;
  name: string;
  parameters: { name: string; type: string; required: boolean; description?: string; default?: unknown }[];
  output_fields: string[];
}

const docs = new Map<string, Promise<ApiDoc | null>>();
function doc(id: string): Promise<ApiDoc | null> {
  if (!docs.has(id)) docs.set(id, get<ApiDoc>('/v1/tools/' + id.split('/').map(encodeURIComponent).join('/')).catch(() => null));
  return docs.get(id)!;
}

/** A run's chain as steps: its labels become var1…varN in chain order, references rewritten. */
export function stepsOfRun(chain: any[]): Step[] {
  const rename = new Map<string, string>();
  chain.forEach((c, i) => rename.set(c.label, `var${i + 1}`));
  const fix = (v: unknown): unknown => {
    if (typeof v === 'string') return v.replace(/\$([A-Za-z_][\w]*)\./g, (m, l) => (rename.has(l) ? `$${rename.get(l)}.` : m));
    if (Array.isArray(v)) return v.map(fix);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, fix(x)]));
    return v;
  };
  return chain.map((c) => ({ api: c.api, arguments: fix(c.arguments ?? {}) as Record<string, unknown> }));
}

function valueText(v: unknown): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function parseValue(text: string, type: string): unknown {
  const t = text.trim();
  if (t === '') return undefined;
  if (t.includes('$var')) return t;
  if (['integer', 'number', 'boolean', 'array', 'object'].includes(type) || /^[[{]/.test(t)) {
    try {
      return JSON.parse(t);
    } catch {
      return t;
    }
  }
  return text;
}

export async function chainsPage(main: HTMLElement, _ctx: Ctx) {
  const params = routeParams();
  let steps: Step[] = [];
  let chainId: string | null = null;
  const request = h('input', { name: 'request', placeholder: 'what the chain is for (the run’s request)', maxlength: 4000 });
  const name = h('input', { name: 'name', placeholder: 'template name', maxlength: 200 });
  const description = h('input', { name: 'description', placeholder: 'description', maxlength: 2000 });
  const list = h('ol', { class: 'chain-steps' });
  const feedback = h('div', { 'aria-live': 'polite' });
  const results = h('div', { class: 'results' });

  // Step editors need the APIs' docs (fetched): build them all, then swap the list in one go, and
  // only for the latest render, so overlapping renders (a click while docs load) never interleave.
  let generation = 0;
  const render = async () => {
    const mine = ++generation;
    const snapshot = steps.slice();
    const items: HTMLElement[] = [];
    for (let i = 0; i < snapshot.length; i++) {
      const item = await stepEditor(i, snapshot);
      if (mine !== generation) return;
      items.push(item);
    }
    if (!snapshot.length) items.push(h('li', { class: 'muted' }, 'No steps yet: add one below.'));
    if (mine === generation) list.replaceChildren(...items);
  };

  const stepEditor = async (i: number, snapshot: Step[]): Promise<HTMLElement> => {
    const s = snapshot[i];
    const d = await doc(s.api);
    const earlier: string[] = [];
    for (let j = 0; j < i; j++) {
      const dj = await doc(snapshot[j].api);
      for (const f of dj?.output_fields ?? []) earlier.push(`$var${j + 1}.${f}$`);
    }
    const refs = `refs-${i}`;
    const rows: HTMLElement[] = [];
    const known = new Set<string>();
    for (const p of d?.parameters ?? []) {
      known.add(p.name);
      const input = h('input', { name: `arg-${i}-${p.name}`, value: s.arguments[p.name] === undefined ? '' : valueText(s.arguments[p.name]), list: refs, placeholder: p.type + (p.required ? ' (required)' : ''), 'aria-label': `${p.name} of step ${i + 1}` });
      input.addEventListener('change', () => {
        const v = parseValue(input.value, p.type);
        if (v === undefined) delete s.arguments[p.name];
        else s.arguments[p.name] = v;
      });
      rows.push(h('tr', null, h('td', null, h('code', null, p.name), p.required ? h('span', { class: 'req', title: 'required' }, ' *') : null), h('td', null, input), h('td', { class: 'muted' }, (p.description ?? '').slice(0, 120))));
    }
    for (const [k, v] of Object.entries(s.arguments)) {
      if (known.has(k)) continue;
      rows.push(h('tr', { class: 'unknown' }, h('td', null, h('code', null, k)), h('td', null, h('code', null, valueText(v))), h('td', null, 'not a parameter of this API ', h('button', { type: 'button', class: 'link', onclick: () => { delete s.arguments[k]; render(); } }, 'remove'))));
    }
    const move = (delta: number) => () => {
      const j = i + delta;
      if (j < 0 || j >= steps.length) return;
      [steps[i], steps[j]] = [steps[j], steps[i]];
      render();
    };
    return h(
      'li',
      { class: 'card chain-step', 'data-api': s.api },
      h('div', { class: 'row' }, h('strong', null, `$var${i + 1}`), ' ', h('a', { href: '#/tools/api?id=' + encodeURIComponent(s.api) }, d?.name ?? s.api), d ? null : h('span', { class: 'error-text' }, ' unknown API'), h('span', { class: 'spacer' }), h('button', { type: 'button', class: 'secondary', onclick: move(-1), 'aria-label': `move step ${i + 1} up` }, '↑'), h('button', { type: 'button', class: 'secondary', onclick: move(1), 'aria-label': `move step ${i + 1} down` }, '↓'), h('button', { type: 'button', class: 'danger', onclick: () => { steps.splice(i, 1); render(); }, 'aria-label': `delete step ${i + 1}` }, 'Delete')),
      h('p', { class: 'muted' }, s.api),
      h('datalist', { id: refs }, earlier.map((r) => h('option', { value: r }))),
      rows.length ? h('table', { class: 'args' }, h('tbody', null, rows)) : h('p', { class: 'muted' }, 'no parameters'),
      earlier.length ? h('p', { class: 'muted' }, 'references to earlier outputs: ', earlier.slice(0, 8).join(', '), earlier.length > 8 ? ' …' : '') : null,
    );
  };

  // Add a step: search the APIs.
  const search = h('input', { name: 'add-api', placeholder: 'search APIs to add a step', 'aria-label': 'search APIs to add a step' });
  const hits = h('ul', { class: 'hits' });
  const doSearch = async () => {
    const q = search.value.trim();
    if (!q) return;
    await into(hits, async () => {
      const r = await get<any>('/v1/tools/search' + qs({ q, k: 8 }));
      return r.results.map((x: any) => h('li', null, h('button', { type: 'button', class: 'link add-step', 'data-api': x.id, onclick: () => { steps.push({ api: x.id, arguments: {} }); hits.replaceChildren(); search.value = ''; render(); } }, short(x.id)), h('span', { class: 'muted' }, ' ' + x.id)));
    }, 'Searching');
  };
  search.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') {
      e.preventDefault();
      doSearch();
    }
  });

  const validate = async (): Promise<boolean> => {
    try {
      const r = await post<any>('/v1/chains/check', { steps, request: request.value || undefined });
      clear(feedback, h('p', { class: 'ok', 'data-valid': 'true' }, `Valid: ${r.steps} steps, checked against their schemas.`));
      return true;
    } catch (e) {
      clear(feedback, errorBox(e));
      return false;
    }
  };
  const execute = async () => {
    if (!(await validate())) return;
    let runId: string | undefined;
    const t = timeline(() => runId);
    const end = h('div');
    clear(results, h('h2', null, 'Execution'), t.el, end);
    try {
      await stream('/v1/chains/execute', { steps, request: request.value || undefined, stream: true }, (ev, data) => {
        if (ev === 'run') runId = data.run_id;
        else if (ev === 'step') t.add(data);
        else if (ev === 'result') end.append(outcome(data));
        else if (ev === 'error') end.append(errorBox(data));
      });
    } catch (e) {
      end.append(errorBox(e));
    }
  };
  const saveTemplate = async () => {
    if (!name.value.trim()) {
      clear(feedback, errorBox(new Error('give the template a name')));
      name.focus();
      return;
    }
    try {
      const r = await post<any>('/v1/chains', { name: name.value.trim(), description: description.value, steps, chain_id: chainId ?? undefined });
      chainId = r.chain_id ?? r.chain?.chain_id ?? chainId;
      toast('Saved');
      clear(feedback, h('p', { class: 'ok' }, `Saved as “${name.value.trim()}”.`));
      loadSaved();
    } catch (e) {
      clear(feedback, errorBox(e));
    }
  };

  // Saved chains (templates): search, open, run, delete.
  const savedQ = h('input', { name: 'saved-q', placeholder: 'search templates', 'aria-label': 'search templates' });
  const saved = h('ul', { class: 'saved' });
  const loadSaved = () =>
    into(saved, async () => {
      const r = await get<any>('/v1/chains' + qs({ q: savedQ.value.trim() }));
      const chains = r.chains ?? [];
      if (!chains.length) return h('li', { class: 'muted' }, 'No saved chains.');
      return chains.map((c: any) =>
        h('li', null, h('button', { type: 'button', class: 'link', onclick: () => openSaved(c) }, c.name), h('span', { class: 'muted' }, ` ${(c.steps ?? []).length} steps `), h('button', { type: 'button', class: 'link danger', onclick: async () => { if (!confirm(`Delete “${c.name}”?`)) return; try { await api('DELETE', '/v1/chains/' + encodeURIComponent(c.chain_id)); loadSaved(); } catch (e) { toast((e as Error).message, 'error'); } } }, 'delete')),
      );
    });
  savedQ.addEventListener('input', () => loadSaved());
  const openSaved = (c: any) => {
    chainId = c.chain_id;
    steps = (c.steps ?? []).map((s: any) => ({ api: s.api, arguments: s.arguments ?? {} }));
    name.value = c.name;
    description.value = c.description ?? '';
    request.value = c.name;
    feedback.replaceChildren();
    render();
  };

  clear(
    main,
    h('h1', null, 'Chain editor'),
    h('div', { class: 'split' },
      h('section', { class: 'grow' },
        field('Request', request),
        list,
        h('div', { class: 'row' }, search, h('button', { type: 'button', class: 'secondary', onclick: doSearch }, 'Search')),
        hits,
        h('div', { class: 'row' }, h('button', { type: 'button', onclick: validate }, 'Validate'), h('button', { type: 'button', onclick: execute }, 'Execute'), h('button', { type: 'button', class: 'secondary', onclick: () => { steps = []; chainId = null; render(); } }, 'Clear')),
        feedback,
        h('details', { class: 'card' }, h('summary', null, 'Save as a template'), field('Name', name), field('Description', description), h('button', { type: 'button', onclick: saveTemplate }, 'Save')),
        results,
      ),
      h('aside', null, h('h2', null, 'Saved chains'), savedQ, saved),
    ),
  );
  loadSaved();
  const runId = params.get('run');
  const savedId = params.get('chain');
  if (runId) {
    try {
      const run = await get<any>('/v1/runs/' + encodeURIComponent(runId));
      steps = stepsOfRun(run.chain ?? []);
      request.value = run.request ?? '';
      feedback.replaceChildren(h('p', { class: 'muted' }, `Opened the chain of run ${runId}.`));
    } catch (e) {
      feedback.replaceChildren(errorBox(e));
    }
  } else if (savedId) {
    try {
      openSaved(await get<any>('/v1/chains/' + encodeURIComponent(savedId)));
    } catch (e) {
      feedback.replaceChildren(errorBox(e));
    }
  }
  await render();
}
