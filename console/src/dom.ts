// A few DOM helpers: elements, JSON viewers, loading and error states.
import { ApiError } from './api';

type Child = Node | string | number | null | undefined | false | Child[];
type Attrs = Record<string, any>;

/** `h('button', {onclick, class}, 'text', child…)`. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs | null = null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'value' && 'value' in el) (el as any).value = v;
    else if (k === 'checked' && 'checked' in el) (el as any).checked = !!v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

export function append(el: Node, children: Child[]) {
  for (const c of children.flat(Infinity as 1) as Child[]) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear<E extends Element>(el: E, ...children: Child[]): E {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function loading(what = 'Loading'): HTMLElement {
  return h('p', { class: 'loading', role: 'status' }, `${what}…`);
}

export function errorBox(e: unknown): HTMLElement {
  const err = e as ApiError;
  const code = err?.code ? ` (${err.code})` : '';
  return h('div', { class: 'error', role: 'alert' }, h('strong', null, 'Error' + code + ': '), String(err?.message ?? e));
}

/** Run `load` into `target`, with a loading state and an error state. */
export async function into(target: Element, load: () => Promise<Child>, what?: string) {
  clear(target, loading(what));
  try {
    clear(target, await load());
  } catch (e) {
    clear(target, errorBox(e));
  }
}

/** A collapsible JSON tree (objects and arrays fold; long ones start folded). */
export function jsonView(v: unknown, open = true, depth = 0): HTMLElement {
  if (v === null || typeof v !== 'object') {
    const cls = v === null ? 'null' : typeof v;
    return h('span', { class: 'j-' + cls }, JSON.stringify(v));
  }
  const entries = Array.isArray(v) ? v.map((x, i) => [String(i), x] as const) : Object.entries(v as object);
  const label = Array.isArray(v) ? `[${entries.length}]` : `{${entries.length}}`;
  if (entries.length === 0) return h('span', { class: 'j-empty' }, Array.isArray(v) ? '[]' : '{}');
  const d = h('details', { class: 'json', open: open && (depth < 2 && entries.length <= 30) });
  d.append(h('summary', null, label));
  const list = h('ul');
  for (const [k, x] of entries.slice(0, 500)) list.append(h('li', null, h('span', { class: 'j-key' }, k + ': '), jsonView(x, open, depth + 1)));
  if (entries.length > 500) list.append(h('li', { class: 'muted' }, `… ${entries.length - 500} more`));
  d.append(list);
  return d;
}

export function badge(status: string): HTMLElement {
  const text: Record<string, string> = { answered: 'answered', partial: 'partial', gave_up: 'gave up', needs_input: 'needs input', running: 'running', awaiting_approval: 'awaiting approval', interrupted: 'interrupted', error: 'error', active: 'active', invalid: 'invalid', degraded: 'degraded' };
  return h('span', { class: 'badge b-' + status, 'data-status': status }, text[status] ?? status);
}

export function when(ms: number | null | undefined): string {
  if (!ms) return '';
  return new Date(ms).toLocaleString();
}

export function toast(msg: string, kind: 'ok' | 'error' = 'ok') {
  const t = h('div', { class: 'toast t-' + kind, role: 'status' }, msg);
  document.body.append(t);
  setTimeout(() => t.remove(), 4000);
}

/** A labelled form field. */
export function field(label: string, input: HTMLElement, hint?: string): HTMLElement {
  return h('label', { class: 'field' }, h('span', null, label), input, hint ? h('small', { class: 'muted' }, hint) : null);
}

/** The route's query parameters (`#/page?x=1`). */
export function routeParams(): URLSearchParams {
  const hash = location.hash.slice(1);
  const i = hash.indexOf('?');
  return new URLSearchParams(i >= 0 ? hash.slice(i + 1) : '');
}

export function go(hash: string) {
  location.hash = hash;
}
