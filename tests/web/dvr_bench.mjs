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
