// The environments (as `agentenv env ls` lists them): the live tree and
// each workspace, each an agent's, with its MCP endpoint, last node,
// running commands, disk use and the scoped tokens that reach it. The
// operator's view: a scoped token gets none of the page's data.
import { get, el, fmtBytes } from './api.js';

const name = e => (e.name ? 'workspace ' + e.name : 'live tree');
const tokens = e => (e.tokens.length
  ? e.tokens.map(k => k.id + (k.read_only ? ' (read-only)' : '') + (k.expires ? ', until ' + k.expires : '')).join('; ')
  : 'the operator’s only');

export async function renderEnvs(t, openNode) {
  t.replaceChildren(el('p', { class: 'hint' }, 'loading…'));
  let d;
  try { d = await get('/api/envs'); } catch (e) { return t.replaceChildren(el('p', { class: 'error' }, e.message)); }
  const link = id => el('a', { href: '#node=' + id, onclick: ev => { ev.preventDefault(); openNode(id); } }, id.slice(0, 12));
  const rows = d.environments.map(e => el('tr', {},
    el('th', { scope: 'row' }, name(e)),
    el('td', {}, el('code', {}, e.endpoint)),
    el('td', {}, e.last ? link(e.last) : 'none yet'),
    el('td', {}, String(e.running) + (e.busy ? ' (busy)' : '')),
    el('td', {}, e.disk_bytes == null ? 'shared' : fmtBytes(e.disk_bytes)),
    el('td', {}, tokens(e))));
  const n = d.environments.length;
  t.replaceChildren(el('h2', { tabindex: '-1' }, `${n} environment${n === 1 ? '' : 's'}`),
    el('table', { class: 'envs' },
      el('thead', {}, el('tr', {}, ...['Environment', 'MCP endpoint', 'Last node', 'Running', 'Disk (upper)', 'Scoped tokens']
        .map(h => el('th', { scope: 'col' }, h)))),
      el('tbody', {}, ...rows)));
}
