// Ask: a chat with sessions; the answer streams in as the run's steps arrive.
import { get, stream } from '../api';
import { badge, clear, errorBox, field, h, into, routeParams, when } from '../dom';
import { outcome, timeline } from '../timeline';
import type { Ctx } from '../main';

interface Turn {
  request: string;
  given?: Record<string, unknown>;
}

const PREF = 'toolgraph.ask';

export function prefs(): { planner: string; model: string; mode: string; backward: boolean; dry: boolean } {
  const none = { planner: '', model: '', mode: '', backward: false, dry: false };
  try {
    return { ...none, ...JSON.parse(localStorage.getItem(PREF) ?? '{}') };
  } catch {
    return none;
  }
}

export async function askPage(main: HTMLElement, _ctx: Ctx) {
  const params = routeParams();
  let sessionId: string | null = params.get('session');
  const p = prefs();
  const models = await get<any>('/v1/models').catch(() => ({ planners: ['deterministic', 'llm'], models: [], default: null }));
  const planner = h('select', { name: 'planner' }, h('option', { value: '' }, 'daemon default'), (models.planners ?? []).map((x: string) => h('option', { value: x }, x)));
  planner.value = p.planner;
  const model = h('select', { name: 'model' }, h('option', { value: '' }, models.default ? `default (${models.default})` : 'default'), (models.models ?? []).map((m: any) => h('option', { value: m.name }, m.name)));
  model.value = p.model;
  const mode = h('select', { name: 'mode' }, ['', 'graph', 'plan', 'dfs-no-graph', 'retrieve-greedy'].map((m) => h('option', { value: m }, m || 'daemon default')));
  mode.value = p.mode;
  const backward = h('input', { type: 'checkbox', name: 'backward', checked: p.backward });
  // Plan only: the chain is planned with its data flow, nothing is sent, learned or remembered.
  const dry = h('input', { type: 'checkbox', name: 'dry_run', checked: p.dry });
  const save = () => localStorage.setItem(PREF, JSON.stringify({ planner: planner.value, model: model.value, mode: mode.value, backward: backward.checked, dry: dry.checked }));
  const showDry = () => {
    send.textContent = dry.checked ? 'Plan' : 'Ask';
  };
  [planner, model, mode, backward, dry].forEach((el) => el.addEventListener('change', save));
  dry.addEventListener('change', showDry);

  const sessionLabel = h('span', { class: 'muted', 'data-session': '' });
  const showSession = () => {
    sessionLabel.textContent = sessionId ? `session ${sessionId}` : 'new session';
    sessionLabel.dataset.session = sessionId ?? '';
  };
  showSession();
  const transcript = h('div', { class: 'transcript', 'aria-live': 'polite' });
  const input = h('textarea', { name: 'request', rows: 3, placeholder: 'What should the tools do? e.g. “Find flights from Paris to Rome tomorrow and a hotel near the airport”', required: true, maxlength: 4000 });
  const send = h('button', { type: 'submit' }, 'Ask');
  showDry();
  const newSession = h('button', { type: 'button', class: 'secondary', onclick: () => { sessionId = null; showSession(); transcript.replaceChildren(); input.focus(); } }, 'New session');

  let loadConversations: () => Promise<void> = async () => {};
  let running = false;
  const run = async (turn: Turn) => {
    if (running) return;
    running = true;
    send.disabled = true;
    const block = h('section', { class: 'turn' });
    block.append(h('div', { class: 'bubble user' }, turn.request, turn.given ? h('div', { class: 'muted' }, 'with: ' + Object.entries(turn.given).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(', ')) : null));
    const status = h('p', { class: 'loading', role: 'status' }, dry.checked ? 'Planning (nothing is sent)…' : 'Running…');
    let runId: string | undefined;
    const steps = timeline(() => runId);
    const tl = h('details', { class: 'bubble steps', open: true }, h('summary', null, 'steps'), steps.el);
    const end = h('div', { class: 'end' });
    block.append(tl, status, end);
    transcript.append(block);
    block.scrollIntoView({ block: 'end' });
    const body: any = { request: turn.request, session_id: sessionId ?? undefined, given: turn.given ?? {}, stream: true };
    if (planner.value) body.planner = planner.value;
    if (model.value) body.model = model.value;
    if (mode.value) body.mode = mode.value;
    if (backward.checked) body.backward = true;
    if (dry.checked) body.dry_run = true;
    try {
      await stream('/v1/orchestrate', body, (ev, data) => {
        if (ev === 'run') {
          runId = data.run_id;
          sessionId = data.session_id;
          showSession();
          status.textContent = `Running ${runId}…`;
        } else if (ev === 'step') {
          steps.add(data);
        } else if (ev === 'result') {
          runId = data.run_id ?? runId;
          if (data.session_id) {
            sessionId = data.session_id;
            showSession();
          }
          status.remove();
          // A long trace folds once the run has ended (the outcome says what happened).
          if (steps.el.children.length > 12) tl.open = false;
          (tl.firstElementChild as HTMLElement).textContent = `steps (${steps.el.children.length})`;
          end.append(outcome(data));
          if (data.status === 'awaiting_approval') end.append(h('p', null, 'This run waits for an administrator to approve a call (see the step above, or History).'));
          if (data.status === 'needs_input' && data.needs_input) end.append(needsInputForm(data.needs_input, turn, run));
        } else if (ev === 'error') {
          status.remove();
          end.append(errorBox(data));
        }
      });
    } catch (e) {
      status.remove();
      end.append(errorBox(e));
    } finally {
      if (status.isConnected) status.remove();
      running = false;
      send.disabled = false;
      loadConversations();
      block.scrollIntoView({ block: 'end' });
    }
  };

  const form = h(
    'form',
    {
      class: 'ask',
      onsubmit: (e: Event) => {
        e.preventDefault();
        const text = input.value.trim();
        if (!text) return;
        input.value = '';
        run({ request: text });
      },
    },
    input,
    h('div', { class: 'row' }, send, newSession, sessionLabel),
    h('details', { class: 'options' }, h('summary', null, 'planner and mode'), h('div', { class: 'row' }, field('Planner', planner), field('Model', model), field('Mode', mode), h('label', { class: 'check' }, backward, ' target first (Reverse Chain)'), h('label', { class: 'check' }, dry, ' plan only (dry run: nothing is sent)'))),
  );
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) form.requestSubmit();
  });
  // Earlier conversations: open one to see its turns and continue it.
  const conversations = h('ul', { class: 'conversations' });
  loadConversations = () =>
    into(conversations, async () => {
      const r = await get<any>('/v1/sessions?limit=15');
      if (!r.sessions.length) return h('li', { class: 'muted' }, 'none yet');
      return r.sessions.map((c: any) => h('li', null, h('a', { href: '#/ask?session=' + encodeURIComponent(c.session_id), 'aria-current': c.session_id === sessionId ? 'true' : null }, String(c.title ?? c.session_id).slice(0, 60)), ' ', c.last_status ? badge(c.last_status) : null, h('div', { class: 'muted small' }, `${c.turns} turn${c.turns === 1 ? '' : 's'} · ${when(c.updated_ms)}`)));
    });
  const openSession = async (id: string) => {
    try {
      const s = await get<any>('/v1/sessions/' + encodeURIComponent(id));
      transcript.append(h('p', { class: 'muted' }, `Continuing session ${id}: the next request sees its earlier turns${Object.keys(s.given ?? {}).length ? ' and the values given so far' : ''}.`));
      for (const t of s.turns ?? []) {
        transcript.append(h('section', { class: 'turn earlier' }, h('div', { class: 'bubble user' }, t.request), h('div', { class: 'outcome', 'data-status': t.status }, h('div', { class: 'row' }, badge(t.status), t.run_id ? h('a', { href: '#/history/run?id=' + encodeURIComponent(t.run_id) }, 'run ' + t.run_id) : null), t.answer ? h('p', { class: 'answer' }, t.answer) : null)));
      }
    } catch (e) {
      transcript.append(errorBox(e));
    }
  };
  clear(main, h('h1', null, 'Ask'), h('div', { class: 'split' }, h('section', { class: 'grow' }, transcript, form), h('aside', { class: 'side' }, h('h2', null, 'Conversations'), h('a', { href: '#/ask' }, 'new conversation'), conversations)));
  loadConversations();
  if (sessionId) await openSession(sessionId);
  input.focus();
}

/** A form for exactly the parameters the run could not fill; answering continues the run. */
function needsInputForm(n: any, turn: Turn, run: (t: Turn) => void): HTMLElement {
  const inputs = (n.missing as string[]).map((m) => [m, h('input', { name: m, required: true, 'aria-label': m })] as const);
  const form = h(
    'form',
    {
      class: 'card needs-input',
      onsubmit: (e: Event) => {
        e.preventDefault();
        const given: Record<string, unknown> = { ...(turn.given ?? {}) };
        for (const [k, el] of inputs) {
          const v = el.value.trim();
          let parsed: unknown = v;
          if (/^-?\d+(\.\d+)?$/.test(v)) parsed = Number(v);
          else if (v === 'true' || v === 'false') parsed = v === 'true';
          given[k] = parsed;
        }
        form.querySelectorAll('button,input').forEach((el) => ((el as HTMLInputElement).disabled = true));
        run({ request: turn.request, given });
      },
    },
    h('h3', null, 'The run needs input'),
    h('p', null, n.message),
    inputs.map(([k, el]) => field(k, el)),
    h('button', { type: 'submit' }, 'Continue'),
  );
  return form;
}
