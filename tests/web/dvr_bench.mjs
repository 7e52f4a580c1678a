// Timeline first paint of the web DVR on a long history, in headless
// chromium (the harness of dvr_test.mjs): the page loads, asks for the
// timeline of the whole history and draws it; milliseconds from
// navigation start to the drawn timeline, over several fresh loads.
//   node dvr_bench.mjs <agentenv> <repository root> [loads]
import { browser, openPage, rssKiB, serve, skip } from './harness.mjs';

const [bin, root, loads = '5'] = process.argv.slice(2);
if (!bin || !root) skip('usage: dvr_bench.mjs <agentenv> <root> [loads]');
const b = await browser();
const server = await serve(bin, root, ['--no-capture']);
try {
  const paints = [];
  for (let i = 0; i < Number(loads); ++i) {
    const { page, paint, errors } = await openPage(b, server.base);
    if (errors.length) throw new Error('page errors: ' + errors.join('; '));
    paints.push(paint);
    if (i === 0) {
      const total = await page.$eval('#summary', e => e.textContent);
      console.log('page: ' + total);
      // A zoom into the middle: the server answers with nodes or buckets of that range.
      const t0 = Date.now();
      await page.click('[data-zoom="in"]');
      await page.click('[data-zoom="in"]');
      await page.click('[data-zoom="in"]');
      await new Promise(r => setTimeout(r, 50));
      await page.waitForNetworkIdle({ idleTime: 100, timeout: 10000 });
      console.log(`zoom x8 redrawn in ${Date.now() - t0} ms (including 150 ms idle wait)`);
      // Drill down by keyboard from the whole history: the busiest bucket,
      // Enter, until the nodes themselves are listed.
      await page.click('[data-span="all"]');
      await page.waitForNetworkIdle({ idleTime: 100, timeout: 10000 });
      await page.focus('#timeline');
      for (let step = 1; step <= 12; ++step) {
        const d = await page.evaluate(() => {
          const d = dvrTimeline.data;
          return { buckets: d.buckets ? d.buckets.length : 0, nodes: d.nodes ? d.nodes.length : 0, in_range: d.in_range };
        });
        if (!d.buckets) { console.log(`drill-down: nodes listed after ${step - 1} step(s): ${d.nodes} nodes`); break; }
        // To the busiest bucket by keyboard (Right from the first).
        const busiest = await page.evaluate(() => {
          const bs = dvrTimeline.data.buckets;
          return bs.reduce((m, b, i) => (b.count > bs[m].count ? i : m), 0);
        });
        for (let i = 0; i <= busiest; ++i) await page.keyboard.press('ArrowRight');
        const t1 = performance.now();
        await page.keyboard.press('Enter');
        await new Promise(r => setTimeout(r, 20));
        await page.waitForNetworkIdle({ idleTime: 50, timeout: 10000 });
        console.log(`drill-down step ${step}: ${d.in_range} nodes in ${d.buckets} buckets -> ` +
                    `redrawn in ${(performance.now() - t1).toFixed(0)} ms (including 50 ms idle wait)`);
      }
    }
    await page.close();
  }
  paints.sort((a, b) => a - b);
  console.log(`first paint over ${paints.length} loads: median ${paints[paints.length >> 1].toFixed(0)} ms, ` +
              `max ${paints[paints.length - 1].toFixed(0)} ms; serve RSS ${rssKiB(server.child.pid)} KiB`);
} finally {
  await b.close();
  await server.stop();
}
