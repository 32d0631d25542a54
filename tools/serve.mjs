// Static server for the app: serves index.html, www/, settings/ and pkg/ from the repository root on
// 127.0.0.1 with the right MIME types (application/wasm matters for streaming compilation).
// Usage: node tools/serve.mjs [--port 8000]   (PORT in the environment works too)
// Also imported by the end-to-end test, which serves on a free port.
import { createServer } from 'node:http';
import { createReadStream, statSync } from 'node:fs';
import { extname, join, normalize, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));
const PUBLIC = ['index.html', 'www', 'settings', 'pkg', 'sw.js', 'manifest.webmanifest'];
const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.webmanifest': 'application/manifest+json',
  '.wasm': 'application/wasm',
  '.mid': 'audio/midi',
  '.midi': 'audio/midi',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.sf2': 'application/octet-stream',
  '.bin': 'application/octet-stream',
  '.mpk': 'application/octet-stream',
  '.bpk': 'application/octet-stream',
  '.ogg': 'audio/ogg',
  '.mp3': 'audio/mpeg',
  '.txt': 'text/plain; charset=utf-8',
};

/**
 * The page's Content-Security-Policy: everything from this origin only, no inline script or
 * style, WebAssembly compilation allowed ('wasm-unsafe-eval', nothing else evaluated), blob:
 * only for the audio and downloads the page makes itself, no plugins, no framing. index.html
 * repeats it in a <meta> tag (without frame-ancestors, which a meta tag cannot set) so any
 * static host enforces it; a test checks the two agree.
 */
export const CSP = [
  "default-src 'self'",
  "script-src 'self' 'wasm-unsafe-eval'",
  "worker-src 'self'",
  "connect-src 'self'",
  "img-src 'self' blob:",
  "media-src 'self' blob:",
  "style-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** Sent with every response. */
export const SECURITY_HEADERS = {
  'content-security-policy': CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/** Maps a URL path to a file under ROOT, or null when it is outside the public set. */
function resolvePath(urlPath) {
  let rel = decodeURIComponent(urlPath.split('?')[0]).replace(/^\/+/, '');
  if (rel === '') rel = 'index.html';
  const clean = normalize(rel);
  if (clean.startsWith('..') || !PUBLIC.some((p) => clean === p || clean.startsWith(p + sep))) {
    return null;
  }
  return join(ROOT, clean);
}

export function startServer({ port = 8000, host = '127.0.0.1', quiet = false } = {}) {
  const server = createServer((req, res) => {
    let file;
    try {
      file = resolvePath(req.url);
    } catch {
      file = null;
    }
    let stat;
    try {
      stat = file && statSync(file);
      if (stat && stat.isDirectory()) {
        file = join(file, 'index.html');
        stat = statSync(file);
      }
    } catch {
      stat = null;
    }
    if (!stat) {
      res.writeHead(404, { ...SECURITY_HEADERS, 'content-type': 'text/plain; charset=utf-8' });
      res.end(`Not found: ${req.url}\n`);
      if (!quiet) console.log(`404 ${req.url}`);
      return;
    }
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      'content-type': TYPES[extname(file).toLowerCase()] ?? 'application/octet-stream',
      'content-length': stat.size,
      'cache-control': 'no-cache',
    });
    createReadStream(file)
      .on('error', () => res.destroy()) // e.g. unreadable despite stat: drop this response only
      .pipe(res);
  });
  return new Promise((ok, fail) => {
    server.once('error', fail);
    server.listen(port, host, () => ok(server));
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const i = process.argv.indexOf('--port');
  const port = Number(i > 0 ? process.argv[i + 1] : process.env.PORT ?? 8000);
  try {
    statSync(join(ROOT, 'pkg', 'pianoformer_bg.wasm'));
  } catch {
    console.warn('warning: pkg/pianoformer_bg.wasm is missing; build it with `make wasm` first.');
  }
  startServer({ port, quiet: true })
    .then(() => console.log(`pianoformer is being served at http://127.0.0.1:${port}/  (Ctrl-C stops it)`))
    .catch((e) => {
      console.error(
        e.code === 'EADDRINUSE'
          ? `error: port ${port} is already in use; try PORT=8001 make serve`
          : `error: ${e.message}`,
      );
      process.exit(1);
    });
}
