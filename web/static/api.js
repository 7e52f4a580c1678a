// Requests to the server, the token and the session. The token is kept in
// sessionStorage (this tab only) and sent by fetch() in an Authorization
// header, never in a URL the server sees; it is traded once for a session
// cookie (HttpOnly: no script reads it) that carries the page's reads.

const TOKEN_KEY = 'agentenv-dvr-token';

export function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }
export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t.trim()); else sessionStorage.removeItem(TOKEN_KEY);
  document.getElementById('token-button').textContent = token() ? 'Token ✓' : 'Token…';
}

// The fragment's parameters, in any order: "#node=green&token=T" and
// "#token=T&node=green" both give { node: 'green', token: 'T' }.
export function fragment(hash = location.hash) {
  const out = new Map();
  for (const part of hash.replace(/^#/, '').split('&')) {
    if (!part) continue;
    const eq = part.indexOf('=');
    const key = eq < 0 ? part : part.slice(0, eq), value = eq < 0 ? '' : part.slice(eq + 1);
    try { out.set(decodeURIComponent(key), decodeURIComponent(value)); } catch { out.set(key, value); }
  }
  return out;
}

// `agentenv serve` prints http://HOST:PORT/#token=...: the fragment stays in
// the browser; it is read once and removed from the address bar, the rest
// of the fragment (a view) kept.
export function takeTokenFromFragment() {
  const f = fragment();
  if (f.has('token')) {
    setToken(/^[0-9a-fA-F]+$/.test(f.get('token')) ? f.get('token') : '');
    const rest = location.hash.replace(/^#/, '').split('&').filter(p => p && !p.startsWith('token=')).join('&');
    history.replaceState(null, '', location.pathname + (rest ? '#' + rest : ''));
  }
  setToken(token());
}

// Trades the token, once, for a session cookie (HttpOnly, SameSite=Strict,
// for this listener) that page loads, reads and the event stream carry on
// a bind that is not loopback. Actions still send the token. Resolves to
// whether a session was made.
export async function startSession() {
  if (!token()) return false;
  const res = await fetch('/api/session', { method: 'POST', cache: 'no-store',
    headers: { 'Content-Type': 'application/json', 'Authorization': 'Bearer ' + token() }, body: '{}' });
  if (res.status === 401) setToken('');
  return res.ok;
}

export class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function parse(res) {
  const body = await res.json().catch(() => ({ error: res.statusText }));
  if (!res.ok) throw new ApiError(res.status, body.error || (body.error && body.error.message) || res.statusText);
  return body;
}

export async function get(path, params = {}) {
  const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null));
  return parse(await fetch(path + (q.toString() ? '?' + q : ''), { cache: 'no-store' }));
}

export async function post(path, body) {
  return parse(await fetch(path, {
    method: 'POST', cache: 'no-store',
    headers: { 'Content-Type': 'application/json', 'Authorization': 'Bearer ' + token() },
    body: JSON.stringify(body),
  }));
}

export function askToken() {
  const d = document.getElementById('token-dialog');
  const input = document.getElementById('token-input');
  input.value = '';
  // Enter saves (the form's first button is Cancel).
  input.onkeydown = ev => { if (ev.key === 'Enter') { ev.preventDefault(); d.close('ok'); } };
  return new Promise(resolve => {
    d.onclose = () => {
      if (d.returnValue === 'ok' && input.value.trim()) setToken(input.value);
      if (d.returnValue === 'forget') setToken('');
      resolve(token());
    };
    d.showModal();
  });
}

export function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'data') Object.assign(e.dataset, v);
    else e.setAttribute(k, v);
  }
  e.append(...children.filter(c => c !== null && c !== undefined));
  return e;
}

export function fmtTime(ns) {
  const d = new Date(Number(ns) / 1e6);
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
         `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

export function fmtBytes(n) {
  if (n < 1024) return n + ' B';
  const u = ['KiB', 'MiB', 'GiB', 'TiB'];
  let i = -1;
  do { n /= 1024; ++i; } while (n >= 1024 && i < u.length - 1);
  return n.toFixed(n < 10 ? 1 : 0) + ' ' + u[i];
}
