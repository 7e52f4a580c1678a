// The changed paths of a node (or between two nodes) as a tree,
// collapsible by directory, with counts per top directory (diff --stat)
// and, on a file, its unified diff (the `diff -p` engine) or why there is
// none (binary, with both sizes).
import { get, el, fmtBytes } from './api.js';

// A diff of at most this many paths opens whole: its files are a Tab away.
const kOpenAll = 40;
const OPS = { '+': ['op-add', 'added'], '-': ['op-del', 'deleted'], 'M': ['op-mod', 'modified'] };

function insert(root, change) {
  const parts = change.path.split('/');
  let dir = root;
  for (const p of parts.slice(0, -1)) {
    dir.dirs[p] ??= { dirs: {}, files: [], count: { '+': 0, '-': 0, 'M': 0 }, name: p };
    dir = dir.dirs[p];
    dir.count[change.op]++;
  }
  const name = parts[parts.length - 1];
  if (change.dir) {
    dir.dirs[name] ??= { dirs: {}, files: [], count: { '+': 0, '-': 0, 'M': 0 }, name };
    dir.dirs[name].self = change.op;
    dir.dirs[name].count[change.op]++;
  } else {
    dir.files.push({ name, change });
  }
}

function counts(c) {
  return el('span', { class: 'stat counts' },
            c['+'] ? el('span', { class: 'a' }, `+${c['+']} `) : null,
            c['M'] ? el('span', { class: 'm' }, `~${c['M']} `) : null,
            c['-'] ? el('span', { class: 'd' }, `-${c['-']}`) : null);
}

export function renderDiffText(text) {
  const pre = el('pre', { class: 'diff' });
  for (const line of text.split('\n')) {
    const cls = line.startsWith('@@') ? 'hunk' : line.startsWith('+') && !line.startsWith('+++') ? 'add'
              : line.startsWith('-') && !line.startsWith('---') ? 'del' : null;
    pre.append(cls ? el('span', { class: cls }, line) : line + '\n');
  }
  return pre;
}

async function size(ref, path) {
  try { return (await get('/api/ls', { ref, path })).entries[0]; } catch { return null; }
}

// Opens the diff of one file under its entry.
async function showPatch(holder, from, to, change) {
  if (holder.dataset.open) { holder.replaceChildren(); delete holder.dataset.open; return; }
  holder.dataset.open = '1';
  holder.replaceChildren(el('span', { class: 'hint' }, 'loading diff…'));
  try {
    const d = await get('/api/diff', { from, to, path: change.path, patch: 1, limit: 50 });
    const p = (d.patches || []).find(x => x.path === change.path) || (d.patches || [])[0];
    if (p && p.diff) return holder.replaceChildren(renderDiffText(p.diff));
    const [a, b] = await Promise.all([change.op === '+' ? null : size(from, change.path),
                                      change.op === '-' ? null : size(to, change.path)]);
    const sizes = `${a ? fmtBytes(a.size) : '—'} → ${b ? fmtBytes(b.size) : '—'}`;
    const note = p && p.note ? p.note : change.op === 'M' ? 'metadata only, or no text diff' : OPS[change.op][1];
    holder.replaceChildren(el('div', { class: 'hint diff-note' }, `${note} file, ${sizes}`));
  } catch (e) {
    holder.replaceChildren(el('div', { class: 'error' }, e.message));
  }
}

function renderDir(dir, from, to, depth, open) {
  const out = [];
  for (const name of Object.keys(dir.dirs).sort()) {
    const d = dir.dirs[name];
    const det = el('details', depth < 1 || open ? { open: '' } : {},
                   el('summary', {}, d.self ? el('span', { class: 'op ' + OPS[d.self][0] }, d.self) : null,
                      name + '/', counts(d.count)));
    det.append(...renderDir(d, from, to, depth + 1, open));
    out.push(det);
  }
  for (const f of dir.files.sort((a, b) => a.name.localeCompare(b.name))) {
    const holder = el('div', { class: 'patch' });
    const row = el('div', { class: 'file', data: { path: f.change.path }, role: 'button', tabindex: '0',
                            onclick: () => showPatch(holder, from, to, f.change),
                            onkeydown: ev => ev.key === 'Enter' && showPatch(holder, from, to, f.change) },
                   el('span', { class: 'op ' + OPS[f.change.op][0] }, f.change.op), f.name);
    out.push(row, holder);
  }
  return out;
}

// The tree of `diff` (a diff reply: changes, total, truncated) between
// nodes `from` and `to`.
export function renderChanges(diff, from, to) {
  const root = { dirs: {}, files: [], count: { '+': 0, '-': 0, 'M': 0 } };
  for (const c of diff.changes) insert(root, c);
  const stat = el('table', { class: 'ls dirstat' },
                  ...Object.values(root.dirs).sort((a, b) => a.name.localeCompare(b.name))
                    .map(d => el('tr', {}, el('td', {}, d.name + '/'), el('td', {}, counts(d.count)))));
  const wrap = el('div', { class: 'changes' },
                  el('h3', {}, `${diff.total} changed path${diff.total === 1 ? '' : 's'}` +
                               (diff.truncated ? ` (first ${diff.changes.length} shown)` : '')),
                  Object.keys(root.dirs).length ? stat : null,
                  el('div', { class: 'tree' }, ...renderDir(root, from, to, 0, diff.changes.length <= kOpenAll)));
  return wrap;
}
