// The page: timeline on top, a node / its files / a comparison below,
// live updates from /api/events, actions behind a confirmation.
import { get, el, fmtTime, fmtBytes, takeTokenFromFragment, askToken, setToken, token, fragment, startSession } from './api.js';
import { confirmAction } from './confirm.js';
import { provenanceSection, packagesSection, nodesBetween } from './node_facts.js';
import { Timeline, listVisible } from './timeline.js';
import { renderChanges } from './changes.js';
import { renderFiles } from './files.js';
import { renderEnvs } from './envs.js';

const $ = id => document.getElementById(id);
let timeline;

function tab(name) {
  for (const b of document.querySelectorAll('#tabs button')) b.classList.toggle('active', b.dataset.tab === name);
  for (const s of document.querySelectorAll('main .tab')) s.hidden = s.id !== 'tab-' + name;
}

// The view in the address bar: back and forward work, a link can be shared.
let shown = null;
function route(hash) {
  shown = hash;
  if (location.hash !== hash) history.pushState(null, '', hash);
}

async function openNode(ref, focus = true) {
  tab('node');
  route('#node=' + encodeURIComponent(ref));
  const t = $('tab-node');
  t.replaceChildren(el('p', { class: 'hint' }, 'loading…'));
  let r;
  try { r = await get('/api/node', { ref }); } catch (e) { return t.replaceChildren(el('p', { class: 'error' }, e.message)); }
  const n = r.show.node, det = n, counts = n.changes || {}, idx = r.node || {};
  timeline.selected = n.id; timeline.draw();
  const parent = n.parent ? el('a', { href: '#node=' + n.parent, onclick: ev => { ev.preventDefault(); openNode(n.parent); } }, n.parent.slice(0, 12)) : 'none (first node)';
  const badges = [idx.head ? el('span', { class: 'badge head' }, 'HEAD') : null,
                  ...(idx.tags ? idx.tags.split(', ') : []).map(x => el('span', { class: 'badge tag' }, '⚑ ' + x))];
  const act = (label, fn, cls = '') => el('button', { type: 'button', class: cls, onclick: fn }, label);
  // One sentence per action, from its reply (the same reply the CLI prints).
  const say = {
    restored: r => `restored to ${r.node?.short ?? n.short}: ${r.files_written ?? 0} files written, ` +
      `${r.created ?? 0} created, ${r.removed ?? 0} removed` + (r.saved ? `; unsaved changes kept as ${r.saved.slice(0, 12)}` : ''),
    tagged: r => `tagged ${n.short}` + (r.name ? ` as ${r.name}` : ''),
    forked: r => `forked ${n.short} into workspace ${r.workspace?.name ?? ''} (agentenv exec --workspace ${r.workspace?.name ?? ''} -- …)`,
    exported: r => `exporting ${n.short} as ${r.name}: the download streams as it is written`,
  };
  const done = (what, rep) => { $('action-result').textContent = (say[what] ?? (r => what + ': ' + JSON.stringify(r)))(rep); };
  // The export streams: the download starts at once; the bytes sent so far
  // are shown against the node's size until it is done.
  const download = async rep => {
    done('exported', rep);
    const bar = el('progress', { id: 'export-progress', max: String(Math.max(1, rep.expected_bytes)), value: '0',
                                 'aria-label': 'export progress' });
    const text = el('span', { id: 'export-status', role: 'status' }, ' starting…');
    $('action-result').append(el('br'), bar, text);
    el('a', { href: rep.download, download: rep.name }).click();
    for (;;) {
      await new Promise(r => setTimeout(r, 300));
      let p;
      try { p = await get(rep.progress); } catch { break; }
      bar.value = Math.min(p.sent, Number(bar.max));
      text.textContent = ` ${fmtBytes(p.sent)} of about ${fmtBytes(rep.expected_bytes)} sent` +
        (p.done ? ' · done' : p.failed ? ' · cut short' : '');
      if (p.done || p.failed) break;
    }
  };
  const fail = e => { $('action-result').textContent = e.message; if (e.status === 401) setToken(''); };
  // The first node's title is its package list: its heading says what it is.
  const prov = n.provenance;
  const title = prov?.kind === 'init' ? 'initial tree' + (prov.source ? ' from ' + prov.source : '') : n.title || n.short;
  const heading = el('h2', { tabindex: '-1' }, ...badges, title.length > 120 ? title.slice(0, 119) + '…' : title);
  t.replaceChildren(
    heading,
    el('dl', { class: 'meta' },
       el('dt', {}, 'node'), el('dd', { id: 'node-id' }, n.id),
       el('dt', {}, 'time'), el('dd', {}, fmtTime(n.time_ns)),
       el('dt', {}, 'parent'), el('dd', {}, parent),
       el('dt', {}, 'message'), el('dd', {}, det.message || '—'),
       el('dt', {}, 'changes'), el('dd', { class: 'counts' }, el('span', { class: 'a' }, `+${counts.added ?? 0} `),
                                  el('span', { class: 'm' }, `~${counts.modified ?? 0} `), el('span', { class: 'd' }, `-${counts.deleted ?? 0}`)),
       el('dt', {}, 'tree'), el('dd', {}, `${det.files ?? '?'} files, ${fmtBytes(det.logical_bytes ?? 0)}`),
       n.damaged ? el('dt', {}, 'damaged') : null, n.damaged ? el('dd', { class: 'error' }, n.damage) : null),
    el('div', { class: 'actions' },
       act('Browse files', () => openFiles(n.id, '')),
       act('Compare with HEAD', () => openCompare(n.id, 'HEAD')),
       act('Restore to this node…', () => confirmAction(`Restore the live tree to ${n.short}`, '/api/restore', { ref: n.id })
         .then(rep => rep && done('restored', rep), fail), 'danger'),
       act('Tag…', () => confirmAction(`Tag node ${n.short}`, '/api/tag', { ref: n.id, name: '' }, { name: 'tag name' })
         .then(rep => rep && done('tagged', rep), fail)),
       act('Fork into a workspace…', () => confirmAction(`Fork node ${n.short}`, '/api/fork', { ref: n.id, name: '' }, { name: 'workspace name (optional)' })
         .then(rep => rep && done('forked', rep), fail)),
       act('Export tarball…', () => confirmAction(`Export node ${n.short}`, '/api/export', { ref: n.id })
         .then(rep => rep && download(rep), fail))),
    el('p', { id: 'action-result', class: 'hint', role: 'status' }),
    ...[provenanceSection(n), packagesSection(n)].filter(Boolean),
    r.diff ? renderChanges(r.diff, n.parent, n.id) : el('p', { class: 'hint' }, 'The first node: everything in it is new.'));
  if (focus) heading.focus();
}

async function openFiles(ref, path) {
  tab('files');
  route('#files=' + encodeURIComponent(ref) + ':' + encodeURIComponent(path));
  await renderFiles($('tab-files'), ref, path, openFiles);
  $('tab-files').querySelector('h2')?.focus();  // the keyboard goes on from the listing
}

async function openCompare(a, b) {
  tab('compare');
  route('#compare=' + encodeURIComponent(a) + '..' + encodeURIComponent(b));
  const t = $('tab-compare');
  t.replaceChildren(el('p', { class: 'hint' }, 'loading…'));
  try {
    const d = await get('/api/compare', { from: a, to: b });
    t.replaceChildren(el('h2', { tabindex: '-1' }, `From ${a.slice(0, 12)} to ${b.slice(0, 12)}`),
                      ...[nodesBetween(d, openNode), packagesSection(d), renderChanges(d.diff, a, b)].filter(Boolean));
  } catch (e) { t.replaceChildren(el('p', { class: 'error' }, e.message)); }
}

async function openEnvs() {
  tab('envs');
  route('#envs');
  await renderEnvs($('tab-envs'), openNode);
  $('tab-envs').querySelector('h2')?.focus();
}

function pick(id) {
  const p = timeline.picked;
  if (p.includes(id)) p.splice(p.indexOf(id), 1); else p.push(id);
  if (p.length > 2) p.shift();
  timeline.draw();
  $('pick').textContent = p.length === 1 ? `Picked ${id.slice(0, 12)}: shift-click another node to compare.` : '';
  if (p.length === 2) openCompare(p[0], p[1]);
  if (timeline.data) listVisible($('visible-nodes'), timeline.data, timeline, openNode);
}

function summary(d) {
  const h = d.head_node;
  $('summary').textContent = `${d.total} node${d.total === 1 ? '' : 's'}` +
    (h ? ` · HEAD ${h.short} ${h.title} (${fmtTime(h.time_ns)})` : '') + (d.lanes > 1 ? ` · ${d.lanes} lanes` : '');
}

// Live: a bounded stream; after a resync or a reconnect the view reloads.
function listen() {
  const es = new EventSource('/api/events');
  es.addEventListener('hello', () => { $('live').className = 'dot on'; timeline.load(); });
  es.addEventListener('nodes', ev => timeline.onNodes(JSON.parse(ev.data).nodes));
  es.addEventListener('refs', () => timeline.load());
  es.addEventListener('resync', () => timeline.load());
  es.onerror = () => { $('live').className = 'dot off'; };
}

function dispatch() {
  if (location.hash === shown) return;
  shown = location.hash;
  const f = fragment();
  if (f.has('node')) return openNode(f.get('node'));
  if (f.has('files')) { const [ref, ...p] = f.get('files').split(':'); return openFiles(ref, p.join(':')); }
  if (f.has('compare')) { const [a, b] = f.get('compare').split('..'); return openCompare(a, b); }
  if (f.has('envs')) return openEnvs();
}

async function main() {
  takeTokenFromFragment();
  await startSession().catch(() => false);
  $('token-button').onclick = () => askToken();
  timeline = new Timeline($('timeline'), {
    open: openNode, pick,
    range: text => { $('range').textContent = text; },
    loaded: d => { summary(d); listVisible($('visible-nodes'), d, timeline, openNode); },
  });
  for (const b of document.querySelectorAll('[data-zoom]'))
    b.onclick = () => { timeline.follow = false; timeline.zoom(b.dataset.zoom === 'in' ? 0.5 : 2); };
  for (const b of document.querySelectorAll('[data-span]'))
    b.onclick = () => { timeline.follow = true; $('follow').checked = true; timeline.fit(b.dataset.span === 'all' ? 0 : Number(b.dataset.span)); };
  $('follow').onchange = ev => { timeline.follow = ev.target.checked; };
  for (const b of document.querySelectorAll('#tabs button')) b.onclick = () => (b.dataset.tab === 'envs' ? openEnvs() : tab(b.dataset.tab));
  window.addEventListener('popstate', dispatch);
  window.addEventListener('hashchange', dispatch);
  window.dvrTimeline = timeline;  // read by the browser test
  // Escape, from anywhere but a dialog, goes back to the timeline.
  window.addEventListener('keydown', ev => {
    if (ev.key === 'Escape' && !document.querySelector('dialog[open]') && document.activeElement !== $('timeline')) $('timeline').focus();
  });
  let d;
  try { d = await timeline.load(); } catch (e) {
    if (e.status !== 401) throw e;
    // A bind that is not loopback, and no session yet: the token, once.
    if (await askToken()) await startSession();
    d = await timeline.load();
  }
  window.dvrFirstPaint = performance.now();  // the timeline is drawn (read by the browser test)
  document.body.dataset.ready = '1';
  if (d) summary(d);
  listen();
  dispatch();
}

main();
