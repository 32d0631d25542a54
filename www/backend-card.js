// The "Backend and storage" card and the header's badges: the backend the Worker got, its
// self-check, the cached models, and the service worker that keeps the app offline.
import { $, status, t0, showError } from './page.js';
import { backendText, readyText, checkSummary, cachedText } from './page-text.js';
import { drawLossCurve } from './loss-curve.js';
import { cachedModels } from './store.js';
import { command } from './commands.js';
import { onWorkerRestart } from './worker-client.js';

command('show-cached', () => showCached());

/** Shows the backend the Worker's session is up on; `ms`: its start-up time in the Worker. */
export function showBackend(backend, ms) {
  status.backend = backend;
  status.readyMs = performance.now() - t0;
  const text = backendText(backend);
  const badge = $('backend-badge');
  badge.textContent = text.badge;
  badge.className = text.className;
  badge.title = text.title;
  $('check-backend').textContent = text.line;
  $('check-ready').textContent = readyText(status.readyMs, ms);
}

/** Shows the self-check; false (and the page stopped with an error) when it failed. */
export function showCheck(report, ms) {
  status.check = report;
  const { ops, fit, fused, losses, ok } = checkSummary(report, ms);
  $('check-ops').textContent = ops;
  $('check-fit').textContent = fit;
  $('check-fused').hidden = $('check-fused-text').hidden = !fused;
  $('check-fused-text').textContent = fused ?? '';
  drawLossCurve($('loss-curve'), losses);
  if (!ok) {
    showError('The compute backend failed its self-check; results on it would not be trustworthy.', {
      fatal: true,
    });
    return false;
  }
  return true;
}

// A new Worker races again.
onWorkerRestart(() => {
  status.races = [];
  $('check-race').hidden = true;
  $('check-race-text').hidden = true;
  $('check-race-text').replaceChildren();
});

/** Shows what the backends' races found (the card's "Race" line); null: a race failed. */
export function showRace(race) {
  if (!race) return;
  const line = document.createElement('div');
  line.textContent = race.text;
  $('check-race').hidden = false;
  $('check-race-text').hidden = false;
  $('check-race-text').append(line);
}

export async function showCached() {
  const urls = await cachedModels();
  $('cached-models').textContent = cachedText(urls);
}

/**
 * Registers the service worker that keeps the app, its default models and the piano samples
 * (../sw.js), once the page is ready so it never competes with the start. Where service
 * workers are missing (insecure contexts, some private modes) the page works online as before.
 */
export async function keepOffline() {
  if (status.offline !== 'pending') return;
  if (!('serviceWorker' in navigator)) {
    status.offline = 'unsupported';
    return;
  }
  status.offline = 'installing';
  try {
    await navigator.serviceWorker.register(new URL('../sw.js', import.meta.url), {
      type: 'module',
      scope: new URL('../', import.meta.url).pathname,
    });
    await navigator.serviceWorker.ready;
    status.offline = 'ready';
    $('offline-badge').hidden = false;
  } catch (e) {
    status.offline = `unavailable: ${e?.message ?? e}`;
  }
}
