// Loads a Chrome trace-event JSON file in speedscope (served from node_modules on localhost) inside Debian's
// Chromium, waits until speedscope has imported it, checks the page shows no import error, and saves a screenshot.
//
// Usage: node check.mjs TRACE.json [SCREENSHOT.png]
// Exit codes: 0 loaded, 1 speedscope did not show the profile, 2 bad usage.
import { createServer } from 'node:http';
import { readFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { extname, join, normalize, resolve, basename, dirname } from 'node:path';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const [tracePath, shotPath = 'trace-screenshot.png'] = process.argv.slice(2);
if (!tracePath || !existsSync(tracePath)) {
  console.error(`usage: node check.mjs TRACE.json [SCREENSHOT.png] (trace file not found: ${tracePath})`);
  process.exit(2);
}
const here = dirname(fileURLToPath(import.meta.url));
const viewerDir = join(here, 'node_modules', 'speedscope', 'dist', 'release');
const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json',
  '.wasm': 'application/wasm', '.png': 'image/png', '.ico': 'image/x-icon', '.woff2': 'font/woff2', '.txt': 'text/plain' };

// Serves the viewer's files and the trace (as /trace.json) on an ephemeral localhost port.
const server = createServer((req, res) => {
  const url = new URL(req.url, 'http://localhost');
  let file;
  if (url.pathname === '/trace.json') file = resolve(tracePath);
  else file = join(viewerDir, normalize(url.pathname === '/' ? '/index.html' : url.pathname));
  if (!file.startsWith(viewerDir) && file !== resolve(tracePath)) { res.writeHead(403); res.end(); return; }
  if (!existsSync(file)) { res.writeHead(404); res.end(); return; }
  res.writeHead(200, { 'content-type': types[extname(file)] || 'application/octet-stream' });
  res.end(readFileSync(file));
});
await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
const port = server.address().port;

const profileDir = mkdtempSync(join(tmpdir(), 'tpusim-chromium-'));
// A fresh profile directory per run (playwright passes it to Chromium as --user-data-dir).
const browser = await chromium.launchPersistentContext(profileDir, {
  executablePath: '/usr/bin/chromium',
  headless: true,
  viewport: { width: 1400, height: 800 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
let code = 0;
try {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  const name = basename(tracePath);
  await page.goto(`http://127.0.0.1:${port}/#profileURL=${encodeURIComponent(`http://127.0.0.1:${port}/trace.json`)}&title=${encodeURIComponent(name)}`);
  // speedscope shows its flame-graph canvas once a profile is imported; on failure it shows an alert/error text.
  await page.waitForTimeout(3000);
  const text = await page.evaluate(() => document.body.innerText);
  await page.screenshot({ path: shotPath });
  const failed = /(Something went wrong|Failed to|Unrecognized format|could not)/i.test(text);
  // speedscope imports one profile per (process, thread) and titles the page "NAME (1/THREADS)".
  const m = text.match(new RegExp(`${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(1/(\\d+)\\)`));
  const threadShown = m !== null;
  if (m) console.log(`threads imported: ${m[1]}`);
  console.log(`screenshot: ${resolve(shotPath)}`);
  console.log(`page text (first 300 chars): ${text.slice(0, 300).replace(/\s+/g, ' ')}`);
  if (errors.length) console.log(`page errors: ${errors.join(' | ')}`);
  if (failed || !threadShown) {
    console.error('speedscope did not show the trace');
    code = 1;
  } else {
    console.log('speedscope loaded the trace');
  }
} finally {
  await browser.close();
  server.close();
  rmSync(profileDir, { recursive: true, force: true });
}
process.exit(code);
