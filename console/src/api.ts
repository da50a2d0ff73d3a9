// Every request of the console goes through the documented HTTP API (GET /openapi.json), with
// the login's cookie and, on state-changing requests, its CSRF token.

export class ApiError extends Error {
  constructor(public status: number, public code: string, message: string, public retryAfter?: number) {
    super(message);
  }
}

let csrf: string | null = null;
export function setCsrf(token: string | null) {
  csrf = token;
}

type Listener = () => void;
const unauthorized: Listener[] = [];
export function onUnauthorized(f: Listener) {
  unauthorized.push(f);
}

function headers(method: string, extra: Record<string, string> = {}): Record<string, string> {
  const h: Record<string, string> = { accept: 'application/json', ...extra };
  if (method !== 'GET' && csrf) h['x-csrf-token'] = csrf;
  return h;
}

async function failure(r: Response): Promise<ApiError> {
  let code = 'http_' + r.status;
  let message = `${r.status} ${r.statusText}`;
  try {
    const b = await r.json();
    if (b && typeof b.message === 'string') {
      message = b.message;
      code = b.code ?? code;
    }
  } catch {
    /* not JSON */
  }
  if (r.status === 401 && code !== 'invalid_login') unauthorized.forEach((f) => f());
  const after = Number.parseInt(r.headers.get('retry-after') ?? '', 10);
  return new ApiError(r.status, code, message, Number.isFinite(after) ? after : undefined);
}

/** A JSON request; resolves to the body (null for 204), rejects with an ApiError. */
export async function api<T = any>(method: string, path: string, body?: unknown, raw?: { text: string; type: string }): Promise<T> {
  const init: RequestInit = { method, credentials: 'same-origin', headers: headers(method) };
  if (raw) {
    init.body = raw.text;
    (init.headers as Record<string, string>)['content-type'] = raw.type;
  } else if (body !== undefined) {
    init.body = JSON.stringify(body);
    (init.headers as Record<string, string>)['content-type'] = 'application/json';
  }
  let r: Response;
  try {
    r = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, 'network', `the daemon did not answer (${(e as Error).message})`);
  }
  if (!r.ok) throw await failure(r);
  if (r.status === 204) return null as T;
  return (await r.json()) as T;
}

/** A status worth asking again for a read: no answer, busy (429) or a gateway's / the daemon's 502–504. */
const transient = (e: unknown) => e instanceof ApiError && (e.status === 0 || e.status === 429 || (e.status >= 502 && e.status <= 504));
const GET_TRIES = 4;

/**
 * A read: asked again, up to 4 times in all, where the daemon did not answer or said it is busy
 * (it answers 429 / 503 with Retry-After under load); waits Retry-After (1–5 s), else 0.5, 1, 2 s.
 * Writes are never repeated: a second POST could act twice.
 */
export async function get<T = any>(path: string): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await api<T>('GET', path);
    } catch (e) {
      if (attempt >= GET_TRIES || !transient(e)) throw e;
      const after = (e as ApiError).retryAfter;
      const wait = after !== undefined ? Math.min(Math.max(after, 1), 5) * 1000 : 500 * 2 ** (attempt - 1);
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}
export const post = <T = any>(path: string, body?: unknown) => api<T>('POST', path, body ?? {});

/** A query string from the defined values. */
export function qs(params: Record<string, string | number | boolean | undefined | null>): string {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') u.set(k, String(v));
  const s = u.toString();
  return s ? '?' + s : '';
}

/**
 * POST with a Server-Sent Events answer: every event is handed to `on` as it arrives. Resolves
 * when the stream ends; a non-stream answer (a 202 for a paused run, or an error) is handed over
 * as a `result` or rejected.
 */
export async function stream(path: string, body: unknown, on: (event: string, data: any) => void, signal?: AbortSignal): Promise<void> {
  let r: Response;
  try {
    r = await fetch(path, { method: 'POST', credentials: 'same-origin', signal, headers: headers('POST', { 'content-type': 'application/json', accept: 'text/event-stream' }), body: JSON.stringify(body) });
  } catch (e) {
    throw new ApiError(0, 'network', `the daemon did not answer (${(e as Error).message})`);
  }
  if (!r.ok) throw await failure(r);
  if (!(r.headers.get('content-type') ?? '').includes('text/event-stream')) {
    on('result', await r.json());
    return;
  }
  const reader = r.body!.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let cut: number;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      let ev = 'message';
      let data = '';
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) ev = line.slice(6).trim();
        else if (line.startsWith('data:')) data += line.slice(5).replace(/^ /, '');
      }
      if (!data) continue;
      let parsed: any = data;
      try {
        parsed = JSON.parse(data);
      } catch {
        /* plain text */
      }
      on(ev, parsed);
    }
  }
}

export interface Me {
  user_id: string;
  name: string;
  role: 'admin' | 'user';
  csrf_token?: string;
}
