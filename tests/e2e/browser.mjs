// What the end-to-end tests share: where screenshots go, which Chromium runs, its flags, and a
// launch that records the page's console for failure messages. Not a test file itself.
import { chromium } from 'playwright-core';

export const OUT = process.env.E2E_OUT ?? 'target/e2e';
export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
export const FLAGS = [
  '--no-sandbox',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-quic',
  '--no-first-run',
  '--disable-dev-shm-usage',
  '--autoplay-policy=no-user-gesture-required',
];

/** Headless Chromium with WebGPU on (SwiftShader without a GPU) or off, and one page at `url`. */
export async function launch({ webgpu, url, viewport = { width: 1280, height: 800 } }) {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: webgpu ? [...FLAGS, '--enable-unsafe-webgpu'] : [...FLAGS, '--disable-webgpu'],
  });
  const page = await browser.newPage({ viewport });
  const log = [];
  page.on('console', (m) => log.push(`[${m.type()}] ${m.text()}`));
  page.on('pageerror', (e) => log.push(`[pageerror] ${e.message}`));
  await page.goto(url);
  return { browser, page, log };
}
