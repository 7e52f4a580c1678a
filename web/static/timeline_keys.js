// The timeline by keyboard: the canvas takes focus (Tab), the arrows move
// a cursor between nodes (left and right in time, up and down to the
// nearest node of the next lane), Enter opens the node (shift+Enter picks
// it for a comparison), + and − zoom about it, Home and End go to the
// first and last node of the history. In a summarized (bucket) view left
// and right move between buckets and Enter zooms into one. What the
// cursor is on is said in a live region for screen readers.
import { fmtTime } from './api.js';

function describe(n) {
  return `${n.short} ${fmtTime(n.time_ns)} ${n.title}` + (n.failed ? `, failed: ${n.outcome}` : '') +
         (n.tournament ? `, tournament candidate ${n.tournament.index + 1} of ${n.tournament.count}` +
                         (n.tournament.won ? ', the winner' : '') : '') +
         (n.head ? ', HEAD' : '') + (n.tags ? `, tags ${n.tags}` : '');
}

export function bindKeys(t) {
  const c = t.canvas, say = text => { const s = document.getElementById('timeline-status'); if (s) s.textContent = text; };
  const nodes = () => (t.data && t.data.nodes) || [];
  // Keeps the cursor's node in view, panning by half a view when it left.
  const show = n => {
    t.cursor = n.id;
    const s = t.span();
    if (n.time_ns < t.view.from || n.time_ns > t.view.to) {
      t.follow = false;
      t.view = { from: n.time_ns - s / 2, to: n.time_ns + s / 2 };
      t.schedule();
    } else t.draw();
    say(describe(n));
  };
  const at = () => nodes().findIndex(n => n.id === t.cursor);
  // After a jump to an edge of the history: the cursor on its first or last node.
  const edge = async last => {
    const d = t.data;
    if (!d || d.first_ns === undefined) return;
    const target = last ? d.last_ns : d.first_ns, s = t.span();
    t.follow = last;
    t.view = last ? { from: target - s * 0.9, to: target + s * 0.1 } : { from: target - s * 0.1, to: target + s * 0.9 };
    const r = await t.load();
    const list = (r && r.nodes) || [];
    if (list.length) show(last ? list[list.length - 1] : list[0]);
    else say(`${r ? r.in_range : 0} nodes summarized here: zoom in (+) to reach them`);
  };
  let bucket = -1;
  c.addEventListener('keydown', ev => {
    if (!t.view) return;
    const list = nodes(), i = at();
    let handled = true;
    switch (ev.key) {
      case 'ArrowRight': case 'ArrowLeft': {
        const step = ev.key === 'ArrowRight' ? 1 : -1;
        if (t.data.buckets) {
          const bs = t.data.buckets;
          bucket = Math.max(0, Math.min(bs.length - 1, bucket < 0 ? (step > 0 ? 0 : bs.length - 1) : bucket + step));
          const b = bs[bucket];
          t.cursorBucket = b;
          say(`${b.count} nodes, ${fmtTime(b.first_ns)} to ${fmtTime(b.last_ns)}: Enter zooms in`);
          break;
        }
        if (!list.length) { say('no node in view'); break; }
        show(list[i < 0 ? (step > 0 ? 0 : list.length - 1) : Math.max(0, Math.min(list.length - 1, i + step))]);
        break;
      }
      case 'ArrowUp': case 'ArrowDown': {
        if (i < 0) { if (list.length) show(list[list.length - 1]); break; }
        const cur = list[i], dir = ev.key === 'ArrowDown' ? 1 : -1;
        const lanes = [...new Set(list.map(n => n.lane))].sort((a, b) => a - b);
        const lane = lanes[lanes.indexOf(cur.lane) + dir];
        if (lane === undefined) { say('no lane ' + (dir > 0 ? 'below' : 'above')); break; }
        let best = null;
        for (const n of list) if (n.lane === lane && (!best || Math.abs(n.time_ns - cur.time_ns) < Math.abs(best.time_ns - cur.time_ns))) best = n;
        show(best);
        break;
      }
      case 'Enter': case ' ':
        if (t.data.buckets && t.cursorBucket) {
          const b = t.cursorBucket, pad = (b.last_ns - b.first_ns) * 0.1 + 1e6;
          t.follow = false; bucket = -1; t.cursorBucket = null;
          t.view = { from: b.first_ns - pad, to: b.last_ns + pad };
          t.load();
        } else if (i >= 0) ev.shiftKey ? t.h.pick(list[i].id) : t.h.open(list[i].id);
        break;
      case '+': case '=': case '-': case '−': {
        t.follow = false;
        const n = list[i], pos = n ? Math.max(0, Math.min(1, (n.time_ns - t.view.from) / t.span())) : 0.5;
        t.zoom(ev.key === '-' || ev.key === '−' ? 2 : 0.5, pos);
        bucket = -1;
        break;
      }
      case 'Home': edge(false); break;
      case 'End': edge(true); break;
      default: handled = false;
    }
    if (handled) ev.preventDefault();
  });
  c.addEventListener('focus', () => {
    if (!t.cursor && nodes().length) show(nodes()[nodes().length - 1]);
  });
}
