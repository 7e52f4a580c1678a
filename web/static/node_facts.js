// A node's provenance and package deltas, as `agentenv show` prints them:
// what made it (the command and how it ended, the workspace, the
// tournament), and the packages it installed, removed or changed.
import { el } from './api.js';

export function provenanceSection(n) {
  const p = n.provenance;
  if (!p) return null;
  const rows = [];
  const row = (k, v, cls) => rows.push(el('dt', {}, k), el('dd', cls ? { class: cls } : {}, v));
  row('made by', p.kind + (p.who?.origin && p.who.origin !== 'unknown' ? ` (${p.who.origin}${p.who.client ? ' ' + p.who.client : ''})` : ''));
  if (p.command) row('command', p.command);
  if (p.command) {
    const how = p.failed ? `failed: ${p.exit_code !== undefined ? 'exit ' + p.exit_code : p.signal ? 'signal ' + p.signal : 'ended early'}`
                         : p.exit_code !== undefined ? 'exit 0' : 'no exit code';
    row('ended', how + (p.duration_ms ? ` after ${(p.duration_ms / 1000).toFixed(1)} s` : ''), p.failed ? 'error' : null);
  }
  if (p.workspace) row('workspace', p.workspace);
  if (p.tournament) {
    const t = p.tournament;
    row('tournament', `${t.id}: candidate ${t.index + 1} of ${t.count}` + (t.won ? ', the winner' : '') +
                      (t.test_exit_code !== undefined && t.test_exit_code !== null ? `, tests exit ${t.test_exit_code}` : ''));
  }
  if (p.restore) row('restore', (p.restore.target ? 'to ' + p.restore.target.slice(0, 12) : '') +
                                (p.restore.source ? ' paths from ' + p.restore.source.slice(0, 12) : ''));
  if (p.thinned) row('thinned', `${p.thinned.nodes} nodes dropped by retention before it` + (p.thinned.failed ? `, ${p.thinned.failed} failed` : ''));
  return el('section', { class: 'provenance', 'aria-label': 'provenance' }, el('h3', {}, 'What made it'),
            el('dl', { class: 'meta' }, ...rows));
}

export function packagesSection(n) {
  const pk = n.packages || [];
  if (!pk.length) return null;
  const shown = pk.filter(p => !p.dependency).concat(pk.filter(p => p.dependency)).slice(0, 40);
  const text = p => `${p.op} ${p.ecosystem} ${p.name} ` +
    (p.op === '~' ? `${p.old_version} → ${p.new_version}` : p.new_version || p.old_version || '') + (p.dependency ? ' (dependency)' : '');
  return el('details', { class: 'packages', open: '' },
            el('summary', {}, `${pk.length} package change${pk.length === 1 ? '' : 's'}` +
                              (n.packages_omitted ? ` (and ${n.packages_omitted} more)` : '')),
            el('ul', {}, ...shown.map(p => el('li', {}, text(p)))),
            pk.length > shown.length ? el('p', { class: 'hint' }, `… ${pk.length - shown.length} more`) : null);
}

// A comparison's nodes between its two ends, newest first, each with what
// made it and how it ended.
export function nodesBetween(d, open) {
  const nodes = d.nodes || [];
  const items = nodes.map(n => el('li', { class: n.failed ? 'failed' : '' },
    el('a', { href: '#node=' + n.id, onclick: ev => { ev.preventDefault(); open(n.id); } }, n.short), ' ',
    (n.command || n.title) + (n.failed ? ` — ✗ ${n.exit !== undefined ? 'exit ' + n.exit : n.outcome}` : '') +
    (n.workspace ? ` [${n.workspace}]` : '') + (n.packages ? ` (${n.packages} package change${n.packages === 1 ? '' : 's'})` : '')));
  if (d.more) items.push(el('li', { class: 'hint' }, `… and ${d.more} more`));
  return el('details', { class: 'between', open: '' },
            el('summary', {}, `${nodes.length + (d.more || 0)} node${nodes.length === 1 ? '' : 's'} between them` +
                              (d.related ? '' : ' (on the newer one\'s line; the older is not its ancestor)')),
            el('ol', { id: 'compare-nodes' }, ...items));
}
