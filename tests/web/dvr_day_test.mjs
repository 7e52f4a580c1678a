// The web DVR on a scripted agent day (bench/history_gen day: edits,
// failing tests and a failing build, package installs, a rollback, a fork
// in a workspace, a tournament of three) in Debian's headless chromium,
// served on a listener that wants the token on every request, as a bind
// that is not loopback does. Checks on the page: the token asked once and
// traded for an HttpOnly session cookie that carries reads and the event
// stream; failed commands with their exit code, the rollback jump, the
// tournament's winner and named lanes on the timeline, with no two label
// boxes overlapping at any zoom; fragment parameters in any order; a
// keyboard-only walk from the timeline to a file's diff and back, and to
// the file browser; axe-core finding no serious or critical violation on
// every view.
//   node dvr_day_test.mjs <agentenv> <history_gen>   (exit 77: no chromium;
//   DVR_SCREENSHOTS=<dir> writes the screenshots docs/img holds)
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { browser, check, cleanup, run, serve, skip, tempDir } from './harness.mjs';

const [bin, gen] = process.argv.slice(2);
if (!bin || !gen) skip('usage: dvr_day_test.mjs <agentenv> <history_gen>');
const shots = process.env.DVR_SCREENSHOTS;
let axePath;
try {
  axePath = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
} catch {
  skip('axe-core missing in tests/web/node_modules (scripts/install-deps.sh runs npm ci there)');
}
const axeSource = readFileSync(axePath, 'utf8');
const b = await browser();
const dir = tempDir();
const root = join(dir, 'repo'), tokenFile = join(dir, 'token');
const token = 'c0ffee'.repeat(10) + 'abcd';
let server;

const sleep = ms => new Promise(r => setTimeout(r, ms));
async function waitText(page, selector, text, timeout = 10000) {
  await page.waitForFunction((s, t) => [...document.querySelectorAll(s)].some(e => e.textContent.includes(t)),
                             { timeout }, selector, text);
}
// The label boxes drawn on the canvas, and any two that overlap.
async function labels(page) {
  return page.evaluate(() => dvrTimeline.layout.boxes.map(({ x0, y0, x1, y1, text }) => ({ x0, y0, x1, y1, text })));
}
function overlapping(boxes) {
  for (let i = 0; i < boxes.length; ++i)
    for (let j = i + 1; j < boxes.length; ++j) {
      const a = boxes[i], c = boxes[j];
      if (a.x0 < c.x1 && c.x0 < a.x1 && a.y0 < c.y1 && c.y0 < a.y1) return [a.text, c.text];
    }
  return null;
}
async function settle(page) {
  await sleep(300);
  await page.waitForFunction(() => !dvrTimeline.timer || dvrTimeline.data, { timeout: 10000 });
  await sleep(300);
}
async function axe(page, view) {
  const has = await page.evaluate(() => typeof window.axe !== 'undefined');
  if (!has) await page.evaluate(axeSource);
  const r = await page.evaluate(async () => {
    const res = await window.axe.run(document, { resultTypes: ['violations'] });
    return res.violations.map(v => ({ id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' ')) }));
  });
  const bad = r.filter(v => v.impact === 'serious' || v.impact === 'critical');
  for (const v of r) console.log(`  axe ${view}: ${v.impact} ${v.id} ${v.nodes.join(', ')}`);
  check(bad.length === 0, `axe-core: no serious or critical violation on the ${view} view`);
}
async function tabUntil(page, pred, max, what) {
  for (let i = 1; i <= max; ++i) {
    await page.keyboard.press('Tab');
    if (await page.evaluate(pred)) return i;
  }
  throw new Error(`${what}: not reached in ${max} Tabs`);
}

try {
  const out = run(gen, ['day', root, '300']);
  const m = /rollback to (\w+); tournament (\S+) applied "([^"]+)"/.exec(out);
  if (!m) throw new Error('history_gen day said: ' + out);
  const [, rollbackTo, tournament] = m;
  writeFileSync(tokenFile, token + '\n', { mode: 0o600 });
  server = await serve(bin, root, ['--token-file', tokenFile]);
  console.log('serving ' + server.base + ' (every request wants the token)');
  check(server.token === token, 'the listener and the page share the token');

  // 1. No token yet: the page loads (its files are open), asks for the
  // token once, trades it for a session cookie; reads and the event
  // stream then work with the cookie alone.
  const page = await b.newPage();
  const errors = [];
  page.on('pageerror', e => errors.push(e.message));
  await page.goto(server.base + '/', { waitUntil: 'domcontentloaded' });
  await page.waitForSelector('#token-dialog[open]', { timeout: 15000 });
  check(true, 'without a session the page asks for the token');
  await axe(page, 'token dialog');
  await page.type('#token-input', token);
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.body.dataset.ready === '1', { timeout: 30000 });
  await page.waitForSelector('#live.on', { timeout: 10000 });
  check(true, 'the timeline loaded and the event stream is live through the session cookie');
  const cookies = await page.cookies();
  const session = cookies.find(c => c.name.startsWith('agentenv_dvr_'));
  check(session && session.httpOnly && session.sameSite === 'Strict', 'the session cookie is HttpOnly and SameSite=Strict');
  check(await page.evaluate(() => document.cookie) === '', 'no script of the page can read the cookie');
  const bare = await page.evaluate(async () => (await fetch('/api/timeline', { credentials: 'omit' })).status);
  check(bare === 401, `a read without the cookie is refused (${bare})`);

  // 2. The facts of the day on the timeline.
  await page.click('[data-span="all"]');
  await settle(page);
  let boxes = await labels(page);
  const texts = boxes.map(x => x.text);
  console.log('labels at the whole day: ' + texts.length);
  check(texts.some(t => /✗ exit 1/.test(t)), 'a failed test run is labelled with its exit code (✗ exit 1)');
  check(texts.some(t => /↶ rollback/.test(t)), 'the rollback is drawn as a jump');
  check(texts.some(t => /★ won/.test(t)) || texts.some(t => /winner applied/.test(t)), 'the tournament winner is marked');
  const laneNames = await page.evaluate(() => Object.values(dvrTimeline.data.lane_names || {}).join(' | '));
  console.log('lanes: ' + laneNames);
  check(texts.some(t => t.includes('workspace try-flask')), 'the fork\'s lane is named after its workspace');
  check(texts.some(t => t.includes('tournament ' + tournament)), 'the candidates\' lanes are named after the tournament');
  const lanes = await page.$eval('#lanes', e => e.textContent);
  check(lanes.includes('rollback') && lanes.includes(rollbackTo), `the rollback's jump goes to ${rollbackTo}`);
  check(await page.evaluate(() => dvrTimeline.data.nodes.some(n => n.failed && n.exit === 2)), 'the failing build (exit 2) is on the timeline');
  check((await page.$$('#visible-nodes button.failed')).length > 0, 'failed nodes are marked in the list too');
  let pair = overlapping(boxes);
  check(!pair, 'no two labels overlap at the whole day' + (pair ? ': ' + pair.join(' / ') : ''));
  // Around the tournament, zoomed in step by step by keyboard.
  const t0 = await page.evaluate(t => dvrTimeline.data.nodes.find(n => n.tournament && n.tournament.id === t).time_ns, tournament);
  await page.evaluate(t => { dvrTimeline.view = { from: t - 3600e9, to: t + 3600e9 }; return dvrTimeline.load(); }, t0);
  await page.focus('#timeline');
  for (let z = 0; z < 4; ++z) {
    await settle(page);
    boxes = await labels(page);
    pair = overlapping(boxes);
    check(!pair, `no two labels overlap at zoom step ${z} (${boxes.length} labels)` + (pair ? ': ' + pair.join(' / ') : ''));
    if (z === 1) check(boxes.some(x => /★ won/.test(x.text)), 'the winner candidate is labelled ★ won');
    await page.keyboard.press('+');
  }
  // Narrow: the whole day in buckets; their labels do not overlap either.
  await page.setViewport({ width: 560, height: 900 });
  await page.click('[data-span="all"]');
  await settle(page);
  check(await page.evaluate(() => !!dvrTimeline.data.buckets), 'a narrow page shows the day as buckets');
  boxes = await labels(page);
  pair = overlapping(boxes);
  check(!pair, `no two labels overlap in the bucket view (${boxes.length} labels)` + (pair ? ': ' + pair.join(' / ') : ''));
  await page.setViewport({ width: 1400, height: 900 });
  if (shots) {
    await page.evaluate(t => { dvrTimeline.view = { from: t - 5400e9, to: t + 1800e9 }; return dvrTimeline.load(); }, t0);
    await settle(page);
    await page.screenshot({ path: join(shots, 'dvr-timeline.png') });
  }

  // 3. Fragment parameters in any order.
  for (const hash of [`#node=HEAD~1&token=${token}`, `#token=${token}&node=HEAD~2`]) {
    await page.goto('about:blank');
    await page.goto(server.base + '/' + hash);
    await page.waitForFunction(() => document.body.dataset.ready === '1', { timeout: 30000 });
    await page.waitForSelector('#node-id', { timeout: 10000 });
    const state = await page.evaluate(() => ({ hash: location.hash, kept: sessionStorage.getItem('agentenv-dvr-token') }));
    check(state.kept === token && !state.hash.includes('token') && state.hash.startsWith('#node=HEAD~'),
          `${hash.replace(token, 'T')}: the node opens and the token is taken (${state.hash})`);
  }

  // 4. Keyboard only: skip link, the canvas, a node, a file's diff, back.
  await page.goto('about:blank');
  await page.goto(server.base + '/');
  await page.waitForFunction(() => document.body.dataset.ready === '1', { timeout: 30000 });
  await page.keyboard.press('Tab');
  check(await page.evaluate(() => document.activeElement.classList.contains('skip')), 'the first Tab reaches the skip link');
  const toCanvas = await tabUntil(page, () => document.activeElement.id === 'timeline', 20, 'the timeline');
  check(toCanvas <= 15, `the timeline is ${toCanvas + 1} Tabs from the top`);
  await page.keyboard.press('End');
  await page.waitForFunction(() => dvrTimeline.cursor, { timeout: 10000 });
  await page.keyboard.press('ArrowLeft');
  const cursor = await page.evaluate(() => dvrTimeline.cursor);
  const said = await page.$eval('#timeline-status', e => e.textContent);
  check(said.length > 0, 'the cursor\'s node is said in the live region: ' + said.slice(0, 60));
  await page.keyboard.press('Enter');
  await page.waitForFunction(id => document.querySelector('#node-id')?.textContent === id, { timeout: 10000 }, cursor);
  check(await page.evaluate(() => document.activeElement.tagName === 'H2'), 'Enter opens the node and moves focus to it');
  if (shots) await page.screenshot({ path: join(shots, 'dvr-node.png') });
  const toFile = await tabUntil(page, () => document.activeElement.classList.contains('file'), 40, 'a changed file');
  check(toFile <= 25, `a changed file is ${toFile} Tabs from the node's heading`);
  await page.keyboard.press('Enter');
  await page.waitForSelector('pre.diff, .diff-note', { timeout: 10000 });
  check(true, 'Enter on the file opens its diff');
  await page.keyboard.press('Escape');
  check(await page.evaluate(() => document.activeElement.id === 'timeline'), 'Escape goes back to the timeline');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.activeElement.tagName === 'H2', { timeout: 10000 });
  await tabUntil(page, () => document.activeElement.textContent === 'Browse files', 20, 'Browse files');
  await page.keyboard.press('Enter');
  await page.waitForSelector('table.ls a', { timeout: 10000 });
  await tabUntil(page, () => !!document.activeElement.closest('table.ls'), 20, 'a file browser link');
  check(await page.evaluate(() => document.activeElement.getAttribute('href').startsWith('#files=')),
        'the file browser\'s links take focus (they have an href)');
  await axe(page, 'file browser');

  // 5. Summaries before actions: a restore to the day's first node leads
  // with counts per directory and the packages it undoes; compare lists
  // the nodes between; export streams with progress.
  const firstId = await page.evaluate(async () =>
    (await (await fetch('/api/timeline?max_nodes=5000')).json()).nodes[0].id);
  await page.evaluate(id => { location.hash = '#node=' + id; }, firstId);
  await page.waitForFunction(id => document.querySelector('#node-id')?.textContent === id, { timeout: 10000 }, firstId);
  await page.evaluate(() => [...document.querySelectorAll('.actions button')].find(e => e.textContent.startsWith('Restore')).click());
  await page.waitForSelector('#confirm[open] .dir-count', { timeout: 20000 });
  const plan = await page.evaluate(() => ({
    dirs: [...document.querySelectorAll('#confirm-paths .dir-count')].map(r => r.textContent),
    packages: document.querySelector('#confirm-paths .packages')?.textContent || '',
    pathsFirst: !!document.querySelector('#confirm-paths table + .packages + details.paths, #confirm-paths table + details.paths'),
  }));
  console.log(`restore summary: ${plan.dirs.length} directories (${plan.dirs.slice(0, 3).join('; ')}); ${plan.packages.slice(0, 120)}`);
  check(plan.dirs.length > 0, 'the restore\'s dry run leads with counts per top directory');
  check(/- apt jq/.test(plan.packages), 'the restore\'s dry run says it removes the jq package');
  check(plan.pathsFirst, 'the paths come after the summary, collapsible');
  await axe(page, 'restore confirmation');
  await page.keyboard.press('Escape');
  await page.evaluate(() => { location.hash = '#compare=HEAD~6..HEAD'; });
  await page.waitForSelector('#compare-nodes li', { timeout: 10000 });
  const between = await page.$$eval('#compare-nodes li', l => l.map(e => e.textContent));
  check(between.length === 6, `compare lists the 6 nodes between HEAD~6 and HEAD (${between.length})`);
  await axe(page, 'compare');
  const cdp = await page.createCDPSession();
  await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: dir });
  await page.evaluate(() => { location.hash = '#node=HEAD'; });
  await waitText(page, '.actions button', 'Export tarball');
  await page.evaluate(() => [...document.querySelectorAll('.actions button')].find(e => e.textContent.startsWith('Export')).click());
  await page.waitForSelector('#confirm[open] .dir-count, #confirm[open] #confirm-summary', { timeout: 20000 });
  await waitText(page, '#confirm-summary', 'streams node');
  await page.click('#confirm-ok');
  await waitText(page, '#export-status', 'done', 60000);
  const progress = await page.$eval('#export-progress', e => [e.value, e.max]);
  check(progress[0] > 0, `the export shows its progress (${progress[0]} of ~${progress[1]} bytes) and ends done`);

  // 6. axe on the other views.
  await page.evaluate(() => { location.hash = '#node=HEAD'; });
  await page.waitForSelector('#node-id');
  await axe(page, 'timeline and node');

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
