// The README's picture of the page (docs/playground.png), made from the page as it is: the
// bundled example opened on the CPU backend, the default accompaniment written for it (the
// attention of layer 1, head 1 drawn as it goes), and a full-page screenshot.
// Usage: make wasm && node tools/screenshot.mjs [--out docs/playground.png]
import { startServer } from './serve.mjs';
import { launch } from '../tests/e2e/browser.mjs';

const args = process.argv.slice(2);
const out = args.includes('--out') ? args[args.indexOf('--out') + 1] : 'docs/playground.png';
const LIMIT = 600_000;

const server = await startServer({ port: 0, quiet: true });
const { browser, page, log } = await launch({ webgpu: false, url: `http://127.0.0.1:${server.address().port}/?backend=cpu` });
try {
  await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: LIMIT });
  if ((await page.evaluate(() => window.pianoformer.state)) !== 'ready') throw new Error(`the page did not start:\n${log.join('\n')}`);
  await page.waitForFunction(() => window.pianoformer.modelReadyMs, null, { timeout: LIMIT });
  await page.click('#example');
  await page.waitForFunction(() => window.pianoformer.piece, null, { timeout: LIMIT });
  await page.selectOption('#task', 'accompaniment');
  const n = await page.evaluate(() => window.pianoformer.generations.length);
  await page.click('#generate');
  await page.waitForFunction(
    (n) => window.pianoformer.generations.length > n || !document.getElementById('error').hidden,
    n,
    { timeout: LIMIT },
  );
  const error = await page.evaluate(() => (document.getElementById('error').hidden ? null : document.getElementById('error').textContent));
  if (error) throw new Error(`generation failed: ${error}`);
  // Let the last frames (roll, attention) draw.
  await page.waitForTimeout(500);
  await page.screenshot({ path: out, fullPage: true });
  console.log(`wrote ${out}`);
} finally {
  await browser.close();
  server.close();
}
