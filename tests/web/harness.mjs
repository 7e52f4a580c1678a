// The browser harness of the web DVR tests and benchmark: a repository,
// `agentenv serve --listen` on loopback, and Debian's headless chromium
// driven by puppeteer-core (never a downloaded browser).
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

export function skip(why) {
  console.log('SKIP: ' + why);
  process.exit(77);
}

export function fail(why) {
  console.error('FAIL: ' + why);
  process.exitCode = 1;
  throw new Error(why);
}

export function check(cond, what) {
  if (!cond) fail(what);
  console.log('ok: ' + what);
}

export function tempDir() { return mkdtempSync(join(process.env.TMPDIR || '/var/tmp', 'agentenv-web-')); }

export function run(bin, args, opts = {}) {
  return execFileSync(bin, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...opts });
}

// `agentenv serve --listen 127.0.0.1:0` on `root`; resolves once it
// printed the DVR's URL (with the token in its fragment).
export async function serve(bin, root, extra = []) {
  const child = spawn(bin, ['serve', '--root', root, '--listen', '127.0.0.1:0', ...extra],
                      { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('serve printed no URL in 60 s:\n' + log)), 60000);
    child.stderr.on('data', b => {
      log += b;
      const m = /web DVR at (http:\/\/127\.0\.0\.1:\d+)\/#token=([0-9a-f]+)/.exec(log);
      if (m) { clearTimeout(timer); resolve({ base: m[1], token: m[2] }); }
    });
    child.on('exit', code => { clearTimeout(timer); reject(new Error(`serve exited (${code}):\n` + log)); });
  });
  child.stderr.on('data', b => { log += b; if (log.length > 1 << 20) log = log.slice(-65536); });
  return { child, ...url, log: () => log, stop: () => new Promise(r => { child.once('exit', r); child.kill('SIGTERM'); }) };
}

export function rssKiB(pid) {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

export async function browser() {
  if (!existsSync(CHROMIUM)) skip(CHROMIUM + ' missing (apt-get install chromium)');
  let puppeteer;
  try { puppeteer = (await import('puppeteer-core')).default; } catch (e) {
    fail('puppeteer-core missing: run scripts/install-deps.sh (npm ci in tests/web): ' + e.message);
  }
  return puppeteer.launch({
    executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
    defaultViewport: { width: 1400, height: 900 },
  });
}

// Opens the page (no token: reads need none on loopback) and waits until
// the timeline is drawn; returns the milliseconds from navigation start.
export async function openPage(b, base) {
  const page = await b.newPage();
  const errors = [];
  page.on('pageerror', e => errors.push(e.message));
  page.on('console', m => { if (m.type() === 'error') errors.push(m.text()); });
  await page.goto(base + '/', { waitUntil: 'domcontentloaded' });
  await page.waitForFunction(() => document.body.dataset.ready === '1', { timeout: 30000 });
  const paint = await page.evaluate(() => window.dvrFirstPaint);
  return { page, paint, errors };
}

export function cleanup(dir) { try { rmSync(dir, { recursive: true, force: true }); } catch {} }
