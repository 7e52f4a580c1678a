// The web DVR in a real browser (Debian's headless chromium through
// puppeteer-core) against `agentenv serve --listen` on a repository made
// from a real rootfs: the timeline loads, a node an exec makes appears
// live, its diff opens, a file of an older node is read, a restore to a
// tag is refused without the token and done with it, and the server's
// memory stays bounded while the page watches live captures.
//   node dvr_test.mjs <agentenv>   (exit 77: no chromium; DVR_SCREENSHOTS=<dir>
//   writes dvr-timeline.png and dvr-node.png there; DVR_SOAK_S: seconds of
//   live captures, default 60)
import { existsSync, mkdirSync, readFileSync, writeFileSync, cpSync, symlinkSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { browser, check, cleanup, fail, openPage, rssKiB, run, serve, skip, tempDir } from './harness.mjs';

const bin = process.argv[2] || skip('usage: dvr_test.mjs <agentenv>');
const shots = process.env.DVR_SCREENSHOTS;
// 30 s of live captures by default; DVR_SOAK_S=600 soaks longer.
const soakS = Number(process.env.DVR_SOAK_S || 30);
const b = await browser();
const dir = tempDir();
const root = join(dir, 'repo'), live = join(root, 'work/current');
let server;

// The debootstrap rootfs the benchmarks cache, else a small tree with a
// static busybox as its shell.
function rootfs() {
  const cached = process.env.AGENTENV_BENCH_ROOTFS || '/var/tmp/agentenv-bench/rootfs';
  if (existsSync(join(cached, '.agentenv-bench-complete'))) return cached;
  if (!existsSync('/bin/busybox')) skip('no rootfs at ' + cached + ' and no /bin/busybox for a small one');
  const src = join(dir, 'src');
  for (const d of ['bin', 'etc', 'root', 'tmp', 'var']) mkdirSync(join(src, d), { recursive: true });
  cpSync('/bin/busybox', join(src, 'bin/busybox'));
  symlinkSync('busybox', join(src, 'bin/sh'));
  writeFileSync(join(src, 'etc/hostname'), 'dvr\n');
  return src;
}

async function waitText(page, selector, text, timeout = 10000) {
  await page.waitForFunction((s, t) => [...document.querySelectorAll(s)].some(e => e.textContent.includes(t)),
                             { timeout }, selector, text);
}

async function clickText(page, selector, text) {
  await waitText(page, selector, text);
  await page.evaluate((s, t) => [...document.querySelectorAll(s)].find(e => e.textContent.includes(t)).click(), selector, text);
}

try {
  const from = rootfs();
  console.log('rootfs: ' + from);
  run(bin, ['init', '--root', root, '--from', from]);
  server = await serve(bin, root);
  console.log('serving ' + server.base);
  run(bin, ['tag', '--root', root, 'base']);

  // 1. The timeline loads without a token (loopback reads).
  const { page, paint, errors } = await openPage(b, server.base);
  console.log(`first paint ${paint.toFixed(0)} ms`);
  await waitText(page, '#summary', 'node');
  await page.waitForSelector('#live.on', { timeout: 10000 });

  // 2. A node an exec makes appears live.
  run(bin, ['exec', '--root', root, '--', '/bin/sh', '-c', 'echo hello-dvr > /etc/dvr-test.txt']);
  const made = Date.now();
  await waitText(page, '#visible-nodes button', 'echo hello-dvr', 5000);
  const latency = Date.now() - made;
  console.log(`exec node shown ${latency} ms after the exec returned`);
  check(latency <= 1500, `the exec's node appeared live within 1.5 s (${latency} ms)`);

  // 3. Open it: the changed path, then its text diff.
  await clickText(page, '#visible-nodes button', 'echo hello-dvr');
  await page.waitForSelector('.file[data-path="etc/dvr-test.txt"]', { timeout: 10000 });
  await page.click('.file[data-path="etc/dvr-test.txt"]');
  await waitText(page, 'pre.diff', '+hello-dvr');
  check(true, 'the node view shows the diff of etc/dvr-test.txt');
  const first = await page.$eval('#node-id', e => e.textContent);
  if (shots) {
    await page.click('[data-span="60"]');
    await new Promise(r => setTimeout(r, 800));
    await page.screenshot({ path: join(shots, 'dvr-node.png'), fullPage: false });
  }

  // 4. Change the file again; read it as it was at the older node.
  run(bin, ['exec', '--root', root, '--', '/bin/sh', '-c', 'echo second > /etc/dvr-test.txt']);
  await waitText(page, '#visible-nodes button', 'echo second', 5000);
  await page.evaluate(id => { location.hash = '#node=' + id; }, first);  // a link to the older node
  await waitText(page, '#node-id', first);
  await clickText(page, '.actions button', 'Browse files');
  await page.waitForSelector('a[data-path="etc"]');
  await page.click('a[data-path="etc"]');
  await page.waitForSelector('a[data-path="etc/dvr-test.txt"]');
  await page.click('a[data-path="etc/dvr-test.txt"]');
  await waitText(page, '#file-content', 'hello-dvr');
  check(readFileSync(join(live, 'etc/dvr-test.txt'), 'utf8') === 'second\n', 'the older content was read from the store, the live tree is untouched');

  // 5. A restore without the token is refused and changes nothing.
  check(errors.length === 0, 'no script errors in the page so far' + (errors.length ? ': ' + errors.join('; ') : ''));
  const refused = await page.evaluate(async () => (await fetch('/api/restore', {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ref: 'base' }) })).status);
  check(refused === 401, `a restore without the token is refused (${refused})`);
  errors.length = 0;  // the console's line about that 401
  check(existsSync(join(live, 'etc/dvr-test.txt')), 'the refused restore changed nothing');

  // 6. With the token (from the URL's fragment, as serve prints it):
  // the confirmation lists what changes, then the restore is done.
  await page.goto('about:blank');
  await page.goto(`${server.base}/#token=${server.token}`);
  await page.waitForFunction(() => document.body.dataset.ready === '1');
  check(!(await page.evaluate(() => location.hash.includes('token'))), 'the token left the address bar');
  await page.evaluate(() => { location.hash = '#node=base'; });
  await clickText(page, '.actions button', 'Restore to this node');
  await waitText(page, '#confirm-summary', 'path(s) change');
  await waitText(page, '#confirm-paths li', 'etc/dvr-test.txt');
  await page.click('#confirm-ok');
  await waitText(page, '#action-result', 'restored', 30000);
  check(!existsSync(join(live, 'etc/dvr-test.txt')), 'the live tree is back at tag base (etc/dvr-test.txt gone)');

  // 7. Live captures for a while with the page open (and one stalled
  // event stream that never reads): the server's memory stays bounded.
  const stalled = request(`${server.base}/api/events`, res => res.pause());
  stalled.end();
  await page.evaluate(() => { location.hash = ''; });
  await page.click('[data-span="60"]');
  const rss0 = rssKiB(server.child.pid);
  let rssMax = rss0, n = 0;
  mkdirSync(join(live, 'var/dvr-soak'), { recursive: true });
  const until = Date.now() + soakS * 1000;
  while (Date.now() < until) {
    writeFileSync(join(live, 'var/dvr-soak', `f${n % 50}.txt`), `write ${n}\n`);
    ++n;
    await new Promise(r => setTimeout(r, 400));
    rssMax = Math.max(rssMax, rssKiB(server.child.pid));
  }
  await new Promise(r => setTimeout(r, 1500));
  const rss1 = rssKiB(server.child.pid);
  const total = await page.$eval('#summary', e => e.textContent);
  console.log(`soak: ${soakS} s, ${n} writes; ${total}; serve RSS ${rss0} KiB -> ${rss1} KiB (max ${rssMax} KiB)`);
  check(await page.$('#live.on') !== null, 'the page is still live after the soak');
  // Under ASan the allocator's quarantine and stack depot hold memory by
  // design; there LeakSanitizer checks the server's leaks at exit instead.
  if (process.env.AGENTENV_SANITIZER === 'address')
    console.log(`not checked under ASan: serve's RSS grew by less than 64 MiB (${rssMax - rss0} KiB)`);
  else
    check(rssMax - rss0 < 64 * 1024, `serve's RSS grew by less than 64 MiB during live captures (${rssMax - rss0} KiB)`);
  stalled.destroy();
  if (shots) {
    await page.click('[data-span="60"]');
    await new Promise(r => setTimeout(r, 800));
    await page.screenshot({ path: join(shots, 'dvr-timeline.png'), fullPage: false });
  }
  check(errors.length === 0, 'no script errors in the page' + (errors.length ? ': ' + errors.join('; ') : ''));
  console.log('PASS');
} catch (e) {
  console.error(e.stack || e.message);
  if (server) console.error('--- serve log ---\n' + server.log().slice(-4000));
  process.exitCode = 1;
} finally {
  await b.close();
  if (server) await server.stop();
  cleanup(dir);
}
