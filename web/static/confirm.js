// The confirmation of an action: its dry run's summary (counts per top
// directory, package deltas), then its paths, collapsed; the real call
// only when the user confirms.
import { el, post, token, askToken, setToken } from './api.js';

const OPS = { '+': 'added', '-': 'removed', 'M': 'changed' };

// A dry run's reply as: a table of counts per directory, the package
// deltas, then the paths (collapsed when many).
export function renderSummary(rep) {
  const out = [];
  if (rep.dirs && rep.dirs.length) {
    out.push(el('table', { class: 'summary-table', 'aria-label': 'changes per directory' },
      el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, 'directory'), el('th', { scope: 'col' }, 'added'),
                             el('th', { scope: 'col' }, 'changed'), el('th', { scope: 'col' }, 'removed'))),
      el('tbody', {}, ...rep.dirs.map(d => el('tr', { class: 'dir-count' }, el('td', {}, d.dir),
        el('td', { class: 'a' }, String(d.added)), el('td', { class: 'm' }, String(d.modified)),
        el('td', { class: 'd' }, String(d.deleted)))))));
  }
  const pk = rep.packages || [];
  if (pk.length || rep.packages_omitted) {
    const text = p => `${p.op} ${p.ecosystem} ${p.name} ` + (p.op === '~' ? `${p.old_version} → ${p.new_version}` : p.new_version || p.old_version || '');
    out.push(el('div', { class: 'packages' }, el('strong', {}, `${pk.length} package change${pk.length === 1 ? '' : 's'}`),
                el('ul', {}, ...pk.slice(0, 30).map(p => el('li', {}, text(p)))),
                rep.packages_omitted ? el('p', { class: 'hint' }, 'and ' + rep.packages_omitted) : null));
  } else if (rep.packages) out.push(el('p', { class: 'hint packages' }, 'no package changes'));
  const changes = rep.changes || [];
  if (changes.length) {
    const items = changes.map(c => el('li', {}, `${c.op} ${c.path}${c.dir ? '/' : ''}`));
    if (rep.truncated) items.push(el('li', {}, `… ${rep.total} in all`));
    out.push(el('details', changes.length <= 20 ? { open: '', class: 'paths' } : { class: 'paths' },
                el('summary', {}, `${rep.total ?? changes.length} path${(rep.total ?? changes.length) === 1 ? '' : 's'} (` +
                   Object.entries(OPS).map(([op, w]) => `${changes.filter(c => c.op === op).length} ${w}`).join(', ') +
                   (rep.truncated ? ' among the first shown' : '') + ')'),
                el('ul', {}, ...items)));
  }
  return out;
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
      $('confirm-paths').replaceChildren(...renderSummary(rep));
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

