// The timeline: every node on a time axis, lanes for branches, zoomable
// from the whole history down to milliseconds. The server sends the
// nodes of the visible range when they are few, else buckets that
// summarize them (/api/timeline); the page never holds the whole history.
import { get, el, fmtTime } from './api.js';
import { LabelLayout, nodeLabels } from './labels.js';
import { bindKeys } from './timeline_keys.js';

const LANE_H = 26, TOP = 34, AXIS_H = 22, MAX_LANES = 6, MIN_SPAN = 1e6;  // 1 ms

export class Timeline {
  constructor(canvas, handlers) {
    this.canvas = canvas;
    this.h = handlers;          // { open(id), pick(id), range(text) }
    this.view = null;           // { from, to } in ns (numbers)
    this.data = null;           // the last /api/timeline reply
    this.picked = [];
    this.selected = null;
    this.fresh = new Set();     // ids that arrived live, drawn highlighted for a while
    this.seq = 0;
    this.hits = [];             // [{x, y, r, node | bucket}] of the last draw
    this.follow = true;
    this.cursor = null;        // the node the keyboard is on
    this.bind();
    bindKeys(this);
    new ResizeObserver(() => this.draw()).observe(canvas);
  }

  span() { return this.view.to - this.view.from; }

  // The whole history with a margin, or `seconds` back from its newest node.
  fit(seconds) {
    const d = this.data;
    if (!d || d.first_ns === undefined) { this.view = null; return this.load(); }
    const last = d.last_ns, first = d.first_ns;
    if (seconds) this.view = { from: last - seconds * 1e9 * 0.95, to: last + seconds * 1e9 * 0.05 };
    else {
      const pad = Math.max((last - first) * 0.03, 5e8);
      this.view = { from: first - pad, to: last + pad };
    }
    return this.load();
  }

  zoom(factor, at = 0.5) {
    if (!this.view) return;
    const s = Math.max(this.span() * factor, MIN_SPAN);
    const center = this.view.from + this.span() * at;
    this.view = { from: center - s * at, to: center + s * (1 - at) };
    this.schedule();
  }

  pan(dx) {
    const ns = dx / this.canvas.clientWidth * this.span();
    this.view = { from: this.view.from - ns, to: this.view.to - ns };
    this.schedule();
  }

  schedule() {
    this.draw();
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.load(), 80);
  }

  async load() {
    const mine = ++this.seq;
    const width = Math.max(200, this.canvas.clientWidth);
    const params = { buckets: Math.floor(width / 6), max_nodes: Math.floor(width / 3) };
    if (this.view) Object.assign(params, { from: Math.floor(this.view.from), to: Math.ceil(this.view.to) });
    const d = await get('/api/timeline', params);
    if (mine !== this.seq) return;
    this.data = d;
    if (!this.view) {
      if (d.first_ns === undefined) { this.draw(); return d; }
      return this.fit(0);
    }
    this.draw();
    this.h.loaded(d);
    return d;
  }

  // New nodes arrived: keep them in view when following, then reload.
  onNodes(nodes) {
    for (const n of nodes) this.fresh.add(n.id);
    setTimeout(() => { for (const n of nodes) this.fresh.delete(n.id); this.draw(); }, 4000);
    const newest = Math.max(...nodes.map(n => n.time_ns));
    if (this.follow && this.view && newest > this.view.to - this.span() * 0.02) {
      const s = this.span();
      this.view = { from: newest + s * 0.05 - s, to: newest + s * 0.05 };
    }
    return this.load();
  }

  x(t) { return (t - this.view.from) / this.span() * this.canvas.clientWidth; }
  laneY(lane) { return TOP + Math.min(lane, MAX_LANES - 1) * LANE_H + LANE_H / 2; }

  draw() {
    const c = this.canvas, d = this.data;
    const lanes = Math.min(Math.max(d ? d.lanes : 1, 1), MAX_LANES);
    const cssH = TOP + lanes * LANE_H + AXIS_H + 6;
    const dpr = window.devicePixelRatio || 1;
    c.style.height = cssH + 'px';
    c.width = c.clientWidth * dpr; c.height = cssH * dpr;
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, c.clientWidth, cssH);
    this.hits = [];
    if (!d || !this.view) { g.fillStyle = '#6b7280'; g.fillText('no history yet', 10, 20); return; }
    const W = c.clientWidth, axisY = TOP + lanes * LANE_H;
    g.font = '11px system-ui, sans-serif';
    this.layout = new LabelLayout(g, W);
    for (let l = 0; l < lanes; ++l) {
      g.fillStyle = l % 2 ? '#f9fafb' : '#ffffff';
      g.fillRect(0, TOP + l * LANE_H, W, LANE_H);
      this.layout.place([this.laneName(l)], [[4, TOP + l * LANE_H + 11]], '#4b5563');
    }
    this.drawAxis(g, W, axisY);
    for (const t of d.tags || []) {
      const x = this.x(t.time_ns);
      if (x < -50 || x > W + 50) continue;
      g.strokeStyle = '#0e7490'; g.beginPath(); g.moveTo(x, 14); g.lineTo(x, axisY); g.stroke();
      this.layout.place(['⚑ ' + t.names, '⚑'], [[x + 2, 12], [x - 2, 12, true], [x + 2, 24]], '#0e7490');
    }
    this.drawJumps(g, d.jumps || [], W);  // under the nodes; their labels first
    if (d.nodes) this.drawNodes(g, d.nodes, W);
    else this.drawBuckets(g, d, W, lanes);
    const n = d.in_range ?? 0;
    this.h.range(`${fmtTime(this.view.from)} — ${fmtTime(this.view.to)} · ${n} node${n === 1 ? '' : 's'} in view` +
                 (d.buckets ? ' (summarized)' : ''));
  }

  // A lane is named after the workspace or tournament of its nodes in view.
  laneName(l) {
    const d = this.data, names = d.lane_names || {};
    if (l === MAX_LANES - 1 && d.lanes > MAX_LANES) return `lanes ${l}+`;
    return names[l] || (l === 0 ? 'HEAD line' : `lane ${l}`);
  }

  drawAxis(g, W, y) {
    g.strokeStyle = '#d1d5db'; g.beginPath(); g.moveTo(0, y); g.lineTo(W, y); g.stroke();
    const steps = [1e6, 1e7, 1e8, 1e9, 5e9, 1e10, 3e10, 6e10, 3e11, 6e11, 1.8e12, 3.6e12, 2.16e13, 8.64e13, 6.048e14, 2.592e15, 3.1536e16];
    const step = steps.find(s => s / this.span() * W >= 90) || steps[steps.length - 1];
    const tzOffset = new Date().getTimezoneOffset() * 6e10;
    let t = Math.ceil((this.view.from - tzOffset) / step) * step + tzOffset;
    g.fillStyle = '#4b5563';
    for (; t <= this.view.to; t += step) {
      const x = this.x(t);
      g.beginPath(); g.moveTo(x, y); g.lineTo(x, y + 4); g.stroke();
      const s = fmtTime(t);
      const label = step >= 8.64e13 ? s.slice(0, 10) : step >= 6e10 ? s.slice(11, 16) : step >= 1e9 ? s.slice(11, 19) : s.slice(17, 23);
      g.fillText(label, x + 2, y + 15);
    }
  }

  drawNodes(g, nodes, W) {
    const pos = new Map(nodes.map(n => [n.id, [this.x(n.time_ns), this.laneY(n.lane)]]));
    g.strokeStyle = '#9ca3af';
    for (const n of nodes) {
      const p = pos.get(n.parent), q = pos.get(n.id);
      if (!p) continue;
      g.beginPath(); g.moveTo(p[0], p[1]);
      if (p[1] !== q[1]) g.lineTo(q[0] - 6, q[1] === p[1] ? p[1] : p[1] + Math.sign(q[1] - p[1]) * 2);
      g.lineTo(q[0], q[1]); g.stroke();
    }
    // Points first, labels after: a label avoids every label drawn before
    // it; the telling ones (failures, tournaments, HEAD, tags) go first.
    const rank = n => (n.failed || n.tournament ? 0 : n.head || n.tags ? 1 : 2);
    for (const n of nodes) {
      const [x, y] = pos.get(n.id);
      if (n.thinned) {  // nodes retention dropped before this one
        g.fillStyle = '#e5e7eb'; g.fillRect(x - 14, y - 9, 10, 18);
        this.layout.place(['⋯' + n.thinned], [[x - 4, y - 11, true]], '#6b7280');
      }
      const r = Math.min(9, 3 + Math.log2(1 + n.changes));
      g.beginPath(); g.arc(x, y, r, 0, 2 * Math.PI);
      g.fillStyle = n.failed ? '#dc2626' : n.damaged ? '#7f1d1d' : this.fresh.has(n.id) ? '#f59e0b' : n.tags ? '#0e7490' : '#2563eb';
      g.fill();
      if (n.tournament?.won) { g.lineWidth = 2; g.strokeStyle = '#ca8a04'; g.stroke(); g.lineWidth = 1; }
      if (n.head) { g.lineWidth = 3; g.strokeStyle = '#7c3aed'; g.stroke(); g.lineWidth = 1; }
      if (this.picked.includes(n.id) || this.selected === n.id || this.cursor === n.id) {
        g.lineWidth = 2; g.strokeStyle = this.cursor === n.id ? '#ea580c' : '#111827';
        g.beginPath(); g.arc(x, y, r + 4, 0, 2 * Math.PI); g.stroke(); g.lineWidth = 1;
      }
      this.hits.push({ x, y, r: r + 3, node: n });
    }
    const order = nodes.map((n, i) => [rank(n), i]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    for (const [, i] of order) {
      const n = nodes[i], [x, y] = pos.get(n.id);
      const r = Math.min(9, 3 + Math.log2(1 + n.changes)) + 2;
      const [full, short] = nodeLabels(n);
      const color = n.failed ? '#b91c1c' : n.tournament?.won ? '#854d0e' : '#111827';
      this.layout.place([full, short], [[x + r, y - 3], [x + r, y + 11], [x - r, y - 3, true], [x - r, y + 11, true]], color);
    }
  }

  // HEAD moves (rollbacks, restores, a winner applied) as arcs from the
  // node HEAD was at to the node it went to, over the lanes.
  drawJumps(g, jumps, W) {
    for (const j of jumps) {
      if (j.from_ns === undefined || j.to_ns === undefined) continue;
      const x0 = this.x(j.from_ns), y0 = this.laneY(j.from_lane), x1 = this.x(j.to_ns), y1 = this.laneY(j.to_lane);
      if (Math.max(x0, x1) < 0 || Math.min(x0, x1) > W) continue;
      const top = Math.max(16, Math.min(y0, y1) - 20 - Math.min(30, Math.abs(x1 - x0) / 8));
      g.strokeStyle = j.kind === 'tournament_apply' ? '#ca8a04' : '#c026d3';
      g.setLineDash([4, 3]); g.lineWidth = 1.5;
      g.beginPath(); g.moveTo(x0, y0); g.bezierCurveTo(x0, top, x1, top, x1, y1); g.stroke();
      g.setLineDash([]); g.lineWidth = 1;
      g.beginPath(); g.moveTo(x1, y1 - 1); g.lineTo(x1 - 4, y1 - 8); g.lineTo(x1 + 4, y1 - 8); g.closePath();
      g.fillStyle = g.strokeStyle; g.fill();
      const what = j.kind === 'tournament_apply' ? '★ winner applied' : j.kind === 'restore' ? '↶ rollback' : '↶ ' + j.kind.replace('_', ' ');
      const undid = j.undid ? ` undid ${j.undid.length + (j.undid_more || 0)}` : '';
      const mx = (x0 + x1) / 2, my = top + 6;
      this.layout.place([what + undid, what], [[mx, my], [mx, my - 11], [mx, my + 11]], g.strokeStyle);
      this.hits.push({ x: mx, y: my, r: 10, jump: j });
    }
  }

  drawBuckets(g, d, W, lanes) {
    const max = Math.max(1, ...d.buckets.map(b => b.count));
    for (const b of d.buckets) {
      const x0 = this.x(b.t0), x1 = Math.max(x0 + 2, this.x(b.t1) - 1);
      for (let l = 0; l < Math.min(lanes, 32); ++l) {
        if (!(b.lanes & (1 << l))) continue;
        const y = this.laneY(l);
        const h = 4 + (LANE_H - 8) * Math.log1p(b.count) / Math.log1p(max);
        g.fillStyle = b.head && l === 0 ? '#7c3aed' : '#60a5fa';
        g.fillRect(x0, y - h / 2, x1 - x0, h);
      }
      if (b.thinned) { g.fillStyle = '#9ca3af'; g.fillRect(x0, TOP - 4, x1 - x0, 3); }
      if (x1 - x0 > 26) this.layout.place([String(b.count)], [[x0 + 2, TOP - 6]]);
      this.hits.push({ x: (x0 + x1) / 2, y: TOP + lanes * LANE_H / 2, r: Math.max(4, (x1 - x0) / 2), bucket: b, wide: true });
    }
  }

  hit(ev) {
    const rect = this.canvas.getBoundingClientRect();
    const x = ev.clientX - rect.left, y = ev.clientY - rect.top;
    let best = null, bestD = 1e9;
    for (const h of this.hits) {
      const dd = h.wide ? Math.abs(h.x - x) - h.r : Math.hypot(h.x - x, h.y - y) - h.r;
      if (dd < bestD && dd <= 2) { best = h; bestD = dd; }
    }
    return best;
  }

  bind() {
    const c = this.canvas;
    let drag = null;
    c.addEventListener('wheel', ev => {
      ev.preventDefault();
      const rect = c.getBoundingClientRect();
      this.follow = false;
      this.zoom(ev.deltaY > 0 ? 1.25 : 0.8, (ev.clientX - rect.left) / rect.width);
    }, { passive: false });
    c.addEventListener('mousedown', ev => { drag = { x: ev.clientX, moved: false }; });
    window.addEventListener('mouseup', ev => {
      if (drag && !drag.moved) this.click(ev);
      drag = null;
    });
    c.addEventListener('mousemove', ev => {
      if (drag && Math.abs(ev.clientX - drag.x) > 2) {
        drag.moved = true; this.follow = false;
        this.pan(ev.clientX - drag.x); drag.x = ev.clientX;
      }
      const h = this.hit(ev), tip = document.getElementById('tooltip');
      if (!h) { tip.hidden = true; return; }
      tip.hidden = false;
      tip.style.left = (ev.clientX - c.getBoundingClientRect().left + 20) + 'px';
      tip.style.top = (c.offsetTop + 10) + 'px';
      tip.textContent = h.jump
        ? `${h.jump.kind === 'tournament_apply' ? 'tournament winner applied' : 'HEAD moved (' + h.jump.kind + ')'} at ${fmtTime(h.jump.time_ns)}\n` +
          `from ${(h.jump.from || '').slice(0, 12)} to ${h.jump.to.slice(0, 12)} ${h.jump.to_title || ''}` +
          (h.jump.undid ? '\nundid: ' + h.jump.undid.join('; ') + (h.jump.undid_more ? ` and ${h.jump.undid_more} more` : '') : '')
        : h.node
        ? `${h.node.short}  ${h.node.title}\n${fmtTime(h.node.time_ns)} · ${h.node.changes} change(s)` +
          (h.node.tags ? `\ntags: ${h.node.tags}` : '') + (h.node.head ? '\nHEAD' : '') +
          (h.node.failed ? `\nfailed: ${h.node.outcome}` : '') +
          (h.node.tournament ? `\ntournament ${h.node.tournament.id} candidate ${h.node.tournament.index + 1}/${h.node.tournament.count}` +
            (h.node.tournament.won ? ', the winner' : '') : '') +
          (h.node.workspace ? `\nworkspace ${h.node.workspace}` : '') +
          (h.node.thinned ? `\n${h.node.thinned} node(s) before it dropped by retention` : '')
        : `${h.bucket.count} nodes, ${h.bucket.changes} changes\n${fmtTime(h.bucket.first_ns)} — ${fmtTime(h.bucket.last_ns)}` +
          (h.bucket.tags ? `\ntags: ${h.bucket.tags}` : '') + (h.bucket.thinned ? `\n${h.bucket.thinned} dropped by retention` : '') +
          '\nclick to zoom in';
    });
    c.addEventListener('mouseleave', () => { document.getElementById('tooltip').hidden = true; });
  }

  click(ev) {
    if (ev.target !== this.canvas) return;
    const h = this.hit(ev);
    if (!h) return;
    if (h.bucket) {
      const pad = (h.bucket.last_ns - h.bucket.first_ns) * 0.1 + 1e6;
      this.follow = false;
      this.view = { from: h.bucket.first_ns - pad, to: h.bucket.last_ns + pad };
      return this.load();
    }
    if (h.jump) return this.h.open(h.jump.to);
    if (ev.shiftKey) this.h.pick(h.node.id); else this.h.open(h.node.id);
  }
}

// The nodes in view as buttons (keyboard, screen readers, tests).
export function listVisible(ol, d, timeline, open) {
  const mark = n => (n.failed ? ` ✗ ${n.exit !== undefined ? 'exit ' + n.exit : n.outcome}` : '') +
    (n.tournament ? ` #${n.tournament.index + 1}/${n.tournament.count}${n.tournament.won ? ' ★ won' : ''}` : '');
  const items = (d.nodes || []).slice(-300).reverse().map(n => el('li', {},
    el('button', { type: 'button', class: [n.head ? 'head' : '', timeline.picked.includes(n.id) ? 'picked' : '',
                                           n.failed ? 'failed' : '', n.tournament?.won ? 'won' : ''].join(' ').trim(),
                   data: { node: n.id }, title: fmtTime(n.time_ns) + '\n' + n.title,
                   onclick: ev => ev.shiftKey ? timeline.h.pick(n.id) : open(n.id) },
       `${n.short} ${n.title.slice(0, 60)} (${n.changes})` + mark(n) + (n.tags ? ` ⚑${n.tags}` : ''))));
  if (d.buckets) items.unshift(el('li', { class: 'hint' }, `${d.in_range} nodes in ${d.buckets.length} buckets: zoom in to list them`));
  ol.replaceChildren(...items);
  // The lanes in view by name, and the HEAD moves, as text.
  const lanes = Object.entries(d.lane_names || {}).map(([l, name]) => `lane ${l}: ${name}`);
  const jumps = (d.jumps || []).filter(j => j.from).map(j =>
    `${j.kind === 'tournament_apply' ? 'winner applied' : 'rollback'} ${j.from.slice(0, 12)} → ${j.to.slice(0, 12)}` +
    (j.undid ? ` (undid ${j.undid.join('; ')})` : ''));
  document.getElementById('lanes').textContent = [...lanes, ...jumps].join(' · ');
}
