// A node's files, read from the store without restoring it (ls and cat).
import { get, el, fmtBytes } from './api.js';

const VIEW_MAX = 256 * 1024;
// A real link (focusable, opens in a new tab) to the same view.
const link = (ref, path) => '#files=' + encodeURIComponent(ref) + ':' + encodeURIComponent(path);

export async function renderFiles(target, ref, path, go) {
  target.replaceChildren(el('p', { class: 'hint' }, 'loading…'));
  let ls;
  try { ls = await get('/api/ls', { ref, path }); } catch (e) {
    return target.replaceChildren(el('p', { class: 'error' }, e.message));
  }
  const parts = path ? path.split('/') : [];
  const crumbs = el('div', { class: 'crumbs' }, 'node ', el('a', { href: link(ref, ''), onclick: ev => { ev.preventDefault(); go(ref, ''); } }, ref.slice(0, 12)), ' : /',
                    ...parts.flatMap((p, i) => [el('a', { href: link(ref, parts.slice(0, i + 1).join('/')), onclick: ev => { ev.preventDefault(); go(ref, parts.slice(0, i + 1).join('/')); } }, p), '/']));
  const single = ls.entries.length === 1 && ls.entries[0].kind !== 'dir' && path.endsWith(ls.entries[0].name);
  if (single) return target.replaceChildren(el('h2', { tabindex: '-1' }, `Files at node ${ref.slice(0, 12)}`), crumbs, await viewFile(ref, path, ls.entries[0]));
  const rows = ls.entries.map(e => {
    const p = path ? path + '/' + e.name : e.name;
    const name = e.kind === 'dir' || e.kind === 'file' || e.kind === 'hardlink'
      ? el('a', { data: { path: p }, href: link(ref, p), onclick: ev => { ev.preventDefault(); go(ref, p); } }, e.name + (e.kind === 'dir' ? '/' : ''))
      : el('span', {}, e.name + (e.target ? ' → ' + e.target : ''));
    return el('tr', {}, el('td', {}, (e.mode & 0o7777).toString(8).padStart(4, '0')), el('td', {}, e.kind),
              el('td', { class: 'size' }, e.kind === 'dir' ? '' : fmtBytes(e.size)), el('td', {}, name));
  });
  target.replaceChildren(el('h2', { tabindex: '-1' }, `Files at node ${ref.slice(0, 12)}`), crumbs,
                         el('table', { class: 'ls' }, ...rows));
}

async function viewFile(ref, path, entry) {
  const q = new URLSearchParams({ ref, path });
  const download = el('a', { href: '/api/cat?' + q + '&download=1', download: entry.name }, 'download');
  const head = el('p', {}, `${entry.kind}, ${fmtBytes(entry.size)}, mode ${(entry.mode & 0o7777).toString(8)} · `, download);
  const res = await fetch('/api/cat?' + q + '&max=' + VIEW_MAX, { cache: 'no-store' });
  if (!res.ok) return el('div', {}, head, el('p', { class: 'error' }, (await res.json().catch(() => ({}))).error || res.statusText));
  const bytes = new Uint8Array(await res.arrayBuffer());
  if (bytes.subarray(0, 8192).includes(0)) return el('div', {}, head, el('p', { class: 'hint' }, `binary file (${fmtBytes(entry.size)}): download it to read it`));
  const text = new TextDecoder('utf-8', { fatal: false }).decode(bytes);
  return el('div', {}, head, el('pre', { class: 'content', id: 'file-content' }, text),
            entry.size > VIEW_MAX ? el('p', { class: 'hint' }, `first ${fmtBytes(VIEW_MAX)} shown`) : null);
}
