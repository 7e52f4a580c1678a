// Requests to the server, the token and the confirmation dialog.
// The token is kept in sessionStorage (this tab only) and sent by fetch()
// in an Authorization header: never in a cookie or a URL the server sees.

const TOKEN_KEY = 'agentenv-dvr-token';

export function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }
export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t.trim()); else sessionStorage.removeItem(TOKEN_KEY);
  document.getElementById('token-button').textContent = token() ? 'Token ✓' : 'Token…';
}

// `agentenv serve` prints http://HOST:PORT/#token=...: the fragment stays in
// the browser; it is read once and removed from the address bar.
export function takeTokenFromFragment() {
  const m = /(?:^#|&)token=([0-9a-fA-F]+)/.exec(location.hash);
  if (m) {
    setToken(m[1]);
    const rest = location.hash.replace(/(^#|&)token=[0-9a-fA-F]+/, '$1').replace(/^#&/, '#');
    history.replaceState(null, '', location.pathname + (rest === '#' ? '' : rest));
  }
  setToken(token());
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
  return new Promise(resolve => {
    d.onclose = () => {
      if (d.returnValue === 'ok' && input.value.trim()) setToken(input.value);
      if (d.returnValue === 'forget') setToken('');
      resolve(token());
    };
    d.showModal();
  });
}

// An action: a dry run first, whose summary and paths the dialog shows,
// then the real one when the user confirms. `fields` are extra inputs
// (name: label) whose values go into the request. Resolves to the reply,
// or null when cancelled.
export async function confirmAction(title, path, request, fields = {}) {
  if (!token() && !(await askToken())) return null;
  const d = document.getElementById('confirm');
  const $ = id => document.getElementById(id);
  $('confirm-title').textContent = title;
  $('confirm-error').textContent = '';
  $('confirm-paths').replaceChildren();
  $('confirm-fields').replaceChildren(...Object.entries(fields).map(([name, label]) => {
    const l = document.createElement('label');
    l.textContent = label + ' ';
    const i = document.createElement('input');
    i.name = name; i.id = 'field-' + name; i.value = request[name] || '';
    i.oninput = () => dry();
    l.append(i);
    return l;
  }));
  const values = () => {
    const r = { ...request };
    for (const name of Object.keys(fields)) r[name] = $('field-' + name).value;
    return r;
  };
  let seq = 0;
  async function dry() {
    const mine = ++seq;
    try {
      const rep = await post(path, { ...values(), dry_run: true });
      if (mine !== seq) return;
      $('confirm-summary').textContent = rep.summary;
      $('confirm-error').textContent = '';
      const paths = (rep.changes || []).map(c => {
        const li = document.createElement('li');
        li.textContent = c.op + ' ' + c.path + (c.dir ? '/' : '');
        return li;
      });
      if (rep.truncated) paths.push(Object.assign(document.createElement('li'), { textContent: `… ${rep.total} in all` }));
      $('confirm-paths').replaceChildren(...paths);
      $('confirm-ok').disabled = false;
    } catch (e) {
      if (mine !== seq) return;
      $('confirm-summary').textContent = '';
      $('confirm-error').textContent = e.message;
      $('confirm-ok').disabled = e.status === 401;
      if (e.status === 401) setToken('');
    }
  }
  $('confirm-ok').disabled = true;
  await dry();
  const answer = await new Promise(resolve => { d.onclose = () => resolve(d.returnValue); d.showModal(); });
  if (answer !== 'ok') return null;
  return post(path, values());
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
