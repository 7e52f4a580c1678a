// The timeline: every node on a time axis, lanes for branches, zoomable
// from the whole history down to milliseconds. The server sends the
// nodes of the visible range when they are few, else buckets that
// summarize them (/api/timeline); the page never holds the whole history.
import { get, el, fmtTime } from './api.js';

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
    this.bind();
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
    for (let l = 0; l < lanes; ++l) {
      g.fillStyle = l % 2 ? '#f9fafb' : '#ffffff';
      g.fillRect(0, TOP + l * LANE_H, W, LANE_H);
      g.fillStyle = '#9ca3af';
      g.fillText(l === 0 ? 'HEAD line' : (l === MAX_LANES - 1 && d.lanes > MAX_LANES ? `lanes ${l}+` : `lane ${l}`), 4, TOP + l * LANE_H + 11);
    }
    this.drawAxis(g, W, axisY);
    for (const t of d.tags || []) {
      const x = this.x(t.time_ns);
      if (x < -50 || x > W + 50) continue;
      g.strokeStyle = '#0e7490'; g.beginPath(); g.moveTo(x, 14); g.lineTo(x, axisY); g.stroke();
      g.fillStyle = '#0e7490'; g.fillText('⚑ ' + t.names, x + 2, 12);
    }
    if (d.nodes) this.drawNodes(g, d.nodes, W);
    else this.drawBuckets(g, d, W, lanes);
    const n = d.in_range ?? 0;
    this.h.range(`${fmtTime(this.view.from)} — ${fmtTime(this.view.to)} · ${n} node${n === 1 ? '' : 's'} in view` +
                 (d.buckets ? ' (summarized)' : ''));
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
    let lastLabelX = -1e9, lastLabelY = -1;
    for (const n of nodes) {
      const [x, y] = pos.get(n.id);
      if (n.thinned) {  // nodes retention dropped before this one
        g.fillStyle = '#e5e7eb'; g.fillRect(x - 14, y - 9, 10, 18);
        g.fillStyle = '#6b7280'; g.fillText('⋯' + n.thinned, x - 26, y - 11);
      }
      const r = Math.min(9, 3 + Math.log2(1 + n.changes));
      g.beginPath(); g.arc(x, y, r, 0, 2 * Math.PI);
      g.fillStyle = n.damaged ? '#dc2626' : this.fresh.has(n.id) ? '#f59e0b' : n.tags ? '#0e7490' : '#2563eb';
      g.fill();
      if (n.head) { g.lineWidth = 3; g.strokeStyle = '#7c3aed'; g.stroke(); g.lineWidth = 1; }
      if (this.picked.includes(n.id) || this.selected === n.id) {
        g.lineWidth = 2; g.strokeStyle = '#111827';
        g.beginPath(); g.arc(x, y, r + 4, 0, 2 * Math.PI); g.stroke(); g.lineWidth = 1;
      }
      g.strokeStyle = '#9ca3af';
      const label = (n.head ? 'HEAD ' : '') + (n.title || n.short).slice(0, 24) + ` (${n.changes})`;
      if (x + r + 2 > lastLabelX + 6 || lastLabelY !== y) {  // labels never overlap on a lane
        g.fillStyle = '#111827';
        g.fillText(label, x + r + 2, y - 4);
        lastLabelX = x + r + 2 + g.measureText(label).width;
        lastLabelY = y;
      }
      this.hits.push({ x, y, r: r + 3, node: n });
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
      if (x1 - x0 > 26) { g.fillStyle = '#111827'; g.fillText(String(b.count), x0 + 2, TOP - 6); }
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
      tip.textContent = h.node
        ? `${h.node.short}  ${h.node.title}\n${fmtTime(h.node.time_ns)} · ${h.node.changes} change(s)` +
          (h.node.tags ? `\ntags: ${h.node.tags}` : '') + (h.node.head ? '\nHEAD' : '') +
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
    if (ev.shiftKey) this.h.pick(h.node.id); else this.h.open(h.node.id);
  }
}

// The nodes in view as buttons (keyboard, screen readers, tests).
export function listVisible(ol, d, timeline, open) {
  const items = (d.nodes || []).slice(-300).reverse().map(n => el('li', {},
    el('button', { type: 'button', class: (n.head ? 'head ' : '') + (timeline.picked.includes(n.id) ? 'picked' : ''),
                   data: { node: n.id }, title: fmtTime(n.time_ns) + '\n' + n.title,
                   onclick: ev => ev.shiftKey ? timeline.h.pick(n.id) : open(n.id) },
       `${n.short} ${n.title.slice(0, 60)} (${n.changes})` + (n.tags ? ` ⚑${n.tags}` : ''))));
  if (d.buckets) items.unshift(el('li', { class: 'hint' }, `${d.in_range} nodes in ${d.buckets.length} buckets: zoom in to list them`));
  ol.replaceChildren(...items);
}
