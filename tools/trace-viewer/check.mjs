// Loads a Chrome trace-event file in speedscope, served on localhost, in headless Chromium, and saves
// a screenshot. Usage: node check.mjs TRACE.json [SCREENSHOT.png] [NEXT_PROFILES]
// Needs: npm install (speedscope, playwright-core) and Debian's chromium (/usr/bin/chromium).
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { chromium } from 'playwright-core';

const trace = process.argv[2];
const shot = process.argv[3] || 'trace-speedscope.png';
// Optional: how many times to step to the next thread profile before the screenshot.
const next = Number(process.argv[4] || 0);
if (!trace) {
  console.error('usage: node check.mjs TRACE.json [SCREENSHOT.png]');
  process.exit(2);
}
const root = path.join(path.dirname(new URL(import.meta.url).pathname), 'node_modules', 'speedscope', 'dist', 'release');
const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json', '.png': 'image/png', '.wasm': 'application/wasm' };
const server = http.createServer((req, res) => {
  const url = decodeURIComponent(req.url.split('?')[0].split('#')[0]);
  const file = url === '/trace.json' ? path.resolve(trace) : path.join(root, url === '/' ? 'index.html' : url);
  fs.readFile(file, (err, data) => {
    if (err) { res.writeHead(404); res.end(); return; }
    res.writeHead(200, { 'Content-Type': types[path.extname(file)] || 'application/octet-stream' });
    res.end(data);
  });
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const port = server.address().port;
const profileDir = fs.mkdtempSync(path.join(os.tmpdir(), 'chromium-'));
// A fresh profile directory each run.
const browser = await chromium.launchPersistentContext(profileDir, {
  executablePath: '/usr/bin/chromium',
  headless: true,
  viewport: { width: 1400, height: 800 },
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const page = await browser.newPage();
const errors = [];
page.on('pageerror', (e) => errors.push(String(e)));
await page.goto(`http://127.0.0.1:${port}/#profileURL=${encodeURIComponent(`http://127.0.0.1:${port}/trace.json`)}&title=tpusim`);
await page.waitForTimeout(4000);
for (let i = 0; i < next; i++) {
  await page.keyboard.press('n');
  await page.waitForTimeout(300);
}
const body = await page.textContent('body');
await page.screenshot({ path: shot });
await browser.close();
server.close();
// speedscope shows an import error text when it cannot read a file.
const failed = /Something went wrong|could not|Failed to/i.test(body || '') || errors.length > 0;
console.log(failed ? `FAILED to load: ${errors.join('; ')} ${body?.slice(0, 200)}` : `loaded; screenshot: ${shot}`);
process.exit(failed ? 1 : 0);
