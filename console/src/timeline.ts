// The steps of a run as a timeline: retrieve / choose / call / response / backtrack / reflect /
// recall …, each call with its arguments and where each came from, each response collapsible.
import { post } from './api';
import { badge, h, jsonView, toast } from './dom';

function source(s: any): HTMLElement {
  if (!s) return h('span', { class: 'src' }, '—');
  switch (s.from) {
    case 'output':
      return h('span', { class: 'src src-output', title: 'an earlier output' }, `$${s.label}.${s.path}`);
    case 'request':
      return h('span', { class: 'src src-request', title: 'found in the request' }, `request (${s.kind})`);
    case 'default':
      return h('span', { class: 'src src-default' }, 'default');
    case 'given':
      return h('span', { class: 'src src-given' }, 'user');
    case 'earlier':
      return h('span', { class: 'src src-earlier', title: s.api }, `turn ${s.turn}: ${s.path}`);
    default:
      return h('span', { class: 'src' }, String(s.from));
  }
}

function short(id: string): string {
  const parts = String(id).split('/');
  return parts[parts.length - 1] || id;
}

function args(a: Record<string, unknown>, sources: Record<string, any> | null = {}): HTMLElement {
  const keys = Object.keys(a ?? {});
  if (keys.length === 0) return h('p', { class: 'muted' }, 'no arguments');
  const from = sources !== null;
  return h('table', { class: 'args' }, h('thead', null, h('tr', null, h('th', null, 'argument'), h('th', null, 'value'), from ? h('th', null, 'from') : null)), h('tbody', null, keys.map((k) => h('tr', null, h('td', null, k), h('td', null, h('code', null, JSON.stringify(a[k]))), from ? h('td', null, source((sources ?? {})[k])) : null))));
}

export interface Timeline {
  el: HTMLElement;
  add(step: any): void;
}

/** A timeline to which steps are added as they stream in. */
export function timeline(runId?: () => string | undefined): Timeline {
  const list = h('ol', { class: 'timeline', 'aria-label': 'steps' });
  const calls = new Map<string, HTMLElement>();
  const add = (s: any) => {
    const item = step(s, runId, calls);
    if (item) list.append(item);
  };
  return { el: list, add };
}

function item(kind: string, title: Node | string, ...body: (Node | string | null)[]): HTMLElement {
  return h('li', { class: 'step s-' + kind, 'data-step': kind }, h('div', { class: 'step-title' }, h('span', { class: 'step-kind' }, kind.replace(/_/g, ' ')), ' ', title), ...body);
}

function step(s: any, runId: (() => string | undefined) | undefined, calls: Map<string, HTMLElement>): HTMLElement | null {
  switch (s.type) {
    case 'respelled':
      return item('respelled', 'typing slips read as', h('p', { class: 'muted' }, (s.words ?? []).map((w: any) => `${w.said} → ${w.read}`).join(', ')));
    case 'retrieve':
      return item('retrieve', `seeds for “${s.subtask}”`, h('ul', { class: 'seeds' }, (s.seeds ?? []).slice(0, 10).map(([id, score]: [string, number]) => h('li', null, h('a', { href: '#/tools/api?id=' + encodeURIComponent(id) }, short(id)), h('span', { class: 'muted' }, ` ${score.toFixed(3)}`)))));
    case 'subtask':
      return item('subtask', `${s.index + 1}. ${s.name}`, h('p', { class: 'muted' }, s.request));
    case 'plan':
      return item('plan', `${s.steps.length} steps (${s.source})`, h('p', null, s.steps.map(short).join(' → ')));
    case 'plan_skipped':
      return item('plan_skipped', `step ${s.step}: ${short(s.api)}`, h('p', { class: 'muted' }, s.reason));
    case 'plan_failed':
      return item('plan_failed', `at step ${s.step}`, h('p', { class: 'muted' }, s.reason));
    case 'recall':
      return item('recall', `memory ${s.score.toFixed(3)}${s.replayed ? ' (replayed)' : ''}`, h('p', null, `“${s.request}”`), h('p', { class: 'muted' }, s.chain.map(short).join(' → ')),
        ...(s.left_out?.length ? [h('p', { class: 'muted' }, `left out of the replay: ${s.left_out.map(short).join(', ')}`)] : []));
    case 'recall_failed':
      return item('recall_failed', 'the replayed memory failed', h('p', { class: 'muted' }, s.reason));
    case 'unsure':
      return item('unsure', s.about === 'memory' ? 'which memory: the planner was asked' : 'which mention plays which role: the planner was asked', h('p', { class: 'muted' }, s.answer));
    case 'choose': {
      const d = s.decision ?? {};
      const picked = d.action === 'call' ? s.offered?.[d.index]?.id : null;
      const offered = h('details', { class: 'offered' }, h('summary', null, `${s.offered?.length ?? 0} offered`), h('ol', null, (s.offered ?? []).map((o: any) => h('li', null, short(o.id), h('span', { class: 'muted' }, ` ${o.source} w=${(+o.weight).toFixed(2)} sim=${(+o.similarity).toFixed(2)}`)))));
      return item('choose', picked ? `call ${short(picked)}` : d.action, h('p', { class: 'muted' }, d.reason), offered);
    }
    case 'call': {
      const el = item('call', h('span', null, h('code', null, s.label), ' ', h('a', { href: '#/tools/api?id=' + encodeURIComponent(s.api) }, short(s.api))), args(s.arguments, s.sources));
      calls.set(s.label, el);
      return el;
    }
    case 'response': {
      if (s.status === 0 && s.attempts === 0) {
        // A dry run's planned call: its documented output fields, each holding its own reference.
        const fields = h('details', { class: 'response' }, h('summary', null, 'output fields'), jsonView(s.response, true));
        return item('response', h('span', null, h('code', null, s.label), ' planned', h('span', { class: 'muted' }, ' not sent')), fields);
      }
      const ok = s.status >= 200 && s.status < 300;
      const body = h('details', { class: 'response' }, h('summary', null, 'response'), jsonView(s.response, true));
      return item('response', h('span', null, h('code', null, s.label), ` HTTP ${s.status}`, h('span', { class: 'muted' }, ` ${Math.round(s.elapsed_ms)} ms, ${s.attempts} attempt${s.attempts === 1 ? '' : 's'}`), ok ? null : h('span', { class: 'badge b-error' }, 'error')), body);
    }
    case 'call_failed':
      return item('call_failed', short(s.api), h('p', { class: 'error-text' }, errorText(s.error)), args(s.arguments));
    case 'insert':
      return item('insert', `${short(s.provider)} first, for ${short(s.api)}.${s.argument}`);
    case 'backtrack':
      return item('backtrack', short(s.api), h('p', { class: 'muted' }, s.reason));
    case 'reflect':
      return item('reflect', `round ${s.round}: ${s.mode}`, h('p', { class: 'muted' }, s.reason), s.excluded_tools?.length ? h('p', null, 'without: ' + s.excluded_tools.join(', ')) : null);
    case 'judge': {
      const j = s.judgement ?? {};
      return item('judge', `${j.pass ? 'pass' : 'fail'} (grade ${(+j.grade || 0).toFixed(2)})`, h('p', { class: 'muted' }, j.reason ?? ''));
    }
    case 'needs_input':
      return item('needs_input', short(s.api), h('p', null, 'missing: ' + s.missing.join(', ')));
    case 'finish':
      return item('finish', 'answer', h('p', null, s.answer));
    case 'give_up':
      return item('give_up', 'gave up', h('p', { class: 'muted' }, s.reason));
    case 'awaiting_approval': {
      const buttons = h('div', { class: 'row' });
      const decide = (ok: boolean) => async () => {
        const id = runId?.();
        if (!id) return;
        try {
          await post(`/v1/runs/${encodeURIComponent(id)}/${ok ? 'approve' : 'reject'}`, { reason: ok ? 'approved in the console' : 'rejected in the console' });
          buttons.replaceChildren(h('span', null, ok ? 'approved' : 'rejected'));
        } catch (e) {
          toast((e as Error).message, 'error');
        }
      };
      buttons.append(h('button', { type: 'button', onclick: decide(true) }, 'Approve'), h('button', { type: 'button', class: 'secondary', onclick: decide(false) }, 'Reject'));
      return item('awaiting_approval', short(s.call?.api ?? s.label), args(s.call?.arguments ?? {}), buttons);
    }
    case 'approval':
      return item('approval', `${short(s.api)}: ${s.decision?.approved ? 'approved' : 'rejected'}`, h('p', { class: 'muted' }, s.decision?.reason ?? ''));
    default:
      return item(s.type ?? 'step', '', jsonView(s, false));
  }
}

/** The end of a run: honest status, the answer, the chain. */
export function outcome(r: any): HTMLElement {
  const chain = (r.chain ?? []) as any[];
  if (r.stats?.dry_run) return planned(r, chain);
  return h(
    'div',
    { class: 'outcome', 'data-status': r.status },
    h('div', { class: 'row' }, badge(r.status), r.run_id ? h('a', { href: '#/history/run?id=' + encodeURIComponent(r.run_id) }, 'run ' + r.run_id) : null, r.run_id && chain.length ? h('a', { href: '#/chains?run=' + encodeURIComponent(r.run_id) }, 'open in the chain editor') : null),
    r.answer ? h('p', { class: 'answer' }, r.answer) : null,
    chain.length ? h('p', { class: 'chain' }, 'chain: ', chain.map((c) => short(c.api)).join(' → ')) : null,
    r.judgement?.reason ? h('p', { class: 'muted' }, 'judge: ' + r.judgement.reason) : null,
  );
}

/** A dry run's end: the planned chain, each step with its arguments (`$varN.field$`: what an
 * earlier step will provide). Nothing was sent. */
function planned(r: any, chain: any[]): HTMLElement {
  return h(
    'div',
    { class: 'outcome planned', 'data-status': r.status, 'data-dry-run': 'true' },
    h('div', { class: 'row' }, badge(r.status), h('span', { class: 'badge' }, 'plan only'), r.run_id ? h('a', { href: '#/history/run?id=' + encodeURIComponent(r.run_id) }, 'run ' + r.run_id) : null, r.run_id && chain.length ? h('a', { href: '#/chains?run=' + encodeURIComponent(r.run_id) }, 'open in the chain editor') : null),
    h('p', { class: 'muted' }, chain.length ? `Planned ${chain.length} call${chain.length === 1 ? '' : 's'}; nothing was sent, learned or remembered.` : 'No chain could be planned; nothing was sent.'),
    chain.length ? h('ol', { class: 'planned-steps' }, chain.map((c) => h('li', null, h('code', null, c.label), ' ', h('a', { href: '#/tools/api?id=' + encodeURIComponent(c.api) }, short(c.api)), args(c.arguments ?? {}, null)))) : null,
    r.status !== 'answered' && r.answer ? h('p', { class: 'muted' }, r.answer) : null,
  );
}

export { short };

function errorText(e: any): string {
  if (!e || typeof e !== 'object') return String(e);
  if (e.kind === 'invalid_arguments') return 'invalid arguments: ' + (e.problems ?? []).map((p: any) => `${p.argument}: ${p.problem}`).join('; ');
  if (e.kind === 'repeated') return `not sent again: the same call failed earlier in this run (${e.earlier})`;
  const { kind, ...rest } = e;
  return `${String(kind).replace(/_/g, ' ')}: ${Object.values(rest).map((v) => (typeof v === 'string' ? v : JSON.stringify(v))).join(' ')}`;
}
