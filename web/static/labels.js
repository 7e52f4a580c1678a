// Labels on the timeline's canvas, laid out so that none overlaps another
// at any zoom: each label is tried at a few places beside its point and
// drawn at the first one free of every label already drawn (not only the
// last), else in a shorter form, else not at all (its node keeps its
// tooltip and its row in the list below). The boxes drawn are kept, for
// the keyboard's live region and the browser test.
const H = 11;  // the font's line height in CSS pixels

export class LabelLayout {
  constructor(g, width) { this.g = g; this.width = width; this.boxes = []; }

  free(b) {
    if (b.x0 < 0 || b.x1 > this.width) return false;
    return !this.boxes.some(o => b.x0 < o.x1 && o.x0 < b.x1 && b.y0 < o.y1 && o.y0 < b.y1);
  }

  // Reserves a box drawn by someone else (lane names, the axis).
  reserve(x0, y0, x1, y1, text = '') { this.boxes.push({ x0, y0, x1, y1, text }); }

  // Draws `texts[0]`, else a shorter `texts[i]`, at the first free place of
  // `places` ([x, baseline] pairs, the text starting at x, or ending at x
  // when `right` is set on the pair). Returns the box, or null.
  place(texts, places, color = '#111827') {
    for (const text of texts) {
      if (!text) continue;
      const w = this.g.measureText(text).width;
      for (const [px, base, right] of places) {
        const x0 = right ? px - w : px;
        const b = { x0, y0: base - H + 1, x1: x0 + w, y1: base + 2, text };
        if (!this.free(b)) continue;
        this.g.fillStyle = color;
        this.g.fillText(text, x0, base);
        this.boxes.push(b);
        return b;
      }
    }
    return null;
  }
}

// What a node's label says, most telling first: a failure's exit code, a
// tournament candidate's place and result, then its command or title.
export function nodeLabels(n) {
  const marks = [];
  if (n.head) marks.push('HEAD');
  if (n.failed) marks.push('✗ ' + (n.exit !== undefined ? 'exit ' + n.exit : n.outcome || 'failed'));
  if (n.tournament) {
    const t = n.tournament;
    marks.push(`#${t.index + 1}/${t.count || '?'}` + (t.won ? ' ★ won' : '') +
               (t.test_exit !== undefined && t.test_exit !== 0 ? ` test exit ${t.test_exit}` : ''));
  }
  const what = (n.command || n.title || n.short).slice(0, 28);
  const mark = marks.join(' ');
  return [mark ? `${mark} · ${what}` : `${what} (${n.changes})`, mark || null];
}
