// Opens the pipelining lesson (tpusim explain pipelining --html DIR) in headless Chromium from a
// file:// URL with every network request refused, checks that it drew, that moving a slider
// changes the speedup shown, and saves a screenshot.
// Usage: node check.mjs DIR/index.html [SCREENSHOT.png] [QUERY]
//   QUERY sets the sliders for the screenshot, e.g. "tc=60&sc=40&host=10&inflight=2&mode=pipelined".
// Needs: npm install (playwright-core) and Debian's chromium (/usr/bin/chromium).
// Exit 0 when every check passed, 1 otherwise.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const page_path = process.argv[2];
const shot = process.argv[3] || 'pipelining-lesson.png';
const query = process.argv[4] || 'tc=60&sc=40&host=10&inflight=2&mode=pipelined';
if (!page_path) {
  console.error('usage: node check.mjs DIR/index.html [SCREENSHOT.png] [QUERY]');
  process.exit(2);
}
const url = 'file://' + path.resolve(page_path);
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'chromium-lesson-'));
const ctx = await chromium.launchPersistentContext(profile, {
  executablePath: '/usr/bin/chromium',
  headless: true,
  viewport: { width: 1320, height: 720 },
  deviceScaleFactor: 1,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
         '--disable-sync', '--no-first-run'],
});
const failures = [];
const network = [];
// Anything that is not the page itself is a network request the page should not make.
await ctx.route('**/*', (route) => {
  const u = route.request().url();
  if (u.startsWith(url.split('?')[0])) return route.continue();
  network.push(u);
  return route.abort();
});
const page = await ctx.newPage();
const errors = [];
page.on('pageerror', (e) => errors.push(String(e)));
page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
await page.goto(url);
await page.waitForSelector('#chart rect');
const read = async () => ({
  speedup: await page.textContent('#speedup'),
  step: await page.textContent('#steptime'),
  bars: await page.locator('#chart rect').count(),
});
const before = await read();
// Move the SparseCore slider to its last position as a learner would (input event).
await page.$eval('#sc', (s) => { s.value = s.max; s.dispatchEvent(new Event('input')); });
const after = await read();
// And the schedule toggle.
await page.click('#mode-sequential');
const sequential = await read();
console.log('default  :', before);
console.log('sc=max   :', after);
console.log('sequential:', sequential);
if (before.bars < 10) failures.push('the chart drew ' + before.bars + ' rects');
if (before.speedup === after.speedup) failures.push('moving the SparseCore slider left the speedup at ' + before.speedup);
if (sequential.speedup !== '1.00×') failures.push('sequential speedup is ' + sequential.speedup);
// The screenshot, with the sliders from the query string.
await page.goto(url + '?' + query);
await page.waitForSelector('#chart rect');
await page.screenshot({ path: shot, fullPage: true });
console.log('screenshot:', shot, 'speedup', await page.textContent('#speedup'));
if (network.length) failures.push('network requests: ' + network.join(', '));
if (errors.length) failures.push('page errors: ' + errors.join(' | '));
await ctx.close();
fs.rmSync(profile, { recursive: true, force: true });
if (failures.length) {
  console.error('FAILED:\n  ' + failures.join('\n  '));
  process.exit(1);
}
console.log('ok: loaded offline, no network requests, the slider changes the speedup');
