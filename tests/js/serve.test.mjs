// The static server's security headers, and index.html's copy of the policy for other hosts.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { CSP, startServer } from '../../tools/serve.mjs';

test('every response carries the Content-Security-Policy and nosniff, 404s included', async () => {
  const server = await startServer({ port: 0, quiet: true });
  try {
    const base = `http://127.0.0.1:${server.address().port}`;
    for (const [path, status] of [['/', 200], ['/www/main.js', 200], ['/no-such-file', 404], ['/../etc/passwd', 404]]) {
      const res = await fetch(base + path);
      await res.arrayBuffer();
      assert.equal(res.status, status, path);
      assert.equal(res.headers.get('content-security-policy'), CSP, path);
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff', path);
      assert.equal(res.headers.get('referrer-policy'), 'no-referrer', path);
    }
  } finally {
    server.close();
  }
});

test('the policy allows nothing from elsewhere and no inline script', () => {
  const directives = Object.fromEntries(CSP.split('; ').map((d) => [d.split(' ')[0], d.split(' ').slice(1)]));
  assert.deepEqual(directives['default-src'], ["'self'"]);
  assert.deepEqual(directives['script-src'], ["'self'", "'wasm-unsafe-eval'"]);
  assert.deepEqual(directives['object-src'], ["'none'"]);
  for (const [name, sources] of Object.entries(directives)) {
    for (const s of sources) {
      assert.ok(["'self'", "'none'", "'wasm-unsafe-eval'", 'blob:'].includes(s), `${name} allows ${s}`);
    }
  }
});

test("index.html's meta policy is the served one without frame-ancestors", () => {
  const html = readFileSync(new URL('../../index.html', import.meta.url), 'utf8');
  const meta = html.match(/<meta http-equiv="Content-Security-Policy" content="([^"]*)">/);
  assert.ok(meta, 'index.html has a CSP meta tag');
  const served = CSP.split('; ').filter((d) => !d.startsWith('frame-ancestors')).join('; ');
  assert.equal(meta[1], served);
  assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script');
  assert.doesNotMatch(html, /\sstyle="/, 'no inline style attribute');
  assert.doesNotMatch(html, /\son[a-z]+="/, 'no inline event handler');
});
