// The words the page shows about its data, pure: the backend badge and check lines, a piece's
// title and roles, the model list's labels and descriptions. No DOM: main.js and its panels put
// these strings on the page, and tests/js/page-text.test.mjs checks them under Node.
import { noteCount } from './piece.js';

/** The backend badge's {text, className, title} and the check card's line for `backend`. */
export function backendText(backend) {
  let line = backend.label;
  if (backend.fallback_reason) line += ` — not WebGPU: ${backend.fallback_reason}`;
  return {
    badge: backend.kind === 'gpu' ? backend.label : 'CPU',
    className: `badge ${backend.kind}`,
    title: backend.fallback_reason
      ? `Running on the CPU: ${backend.fallback_reason}.\n${backend.fallback_detail ?? ''}`
      : backend.label,
    line,
  };
}

/** "123 ms after page load (45 ms in the Worker)". */
export function readyText(readyMs, workerMs) {
  return `${readyMs.toFixed(0)} ms after page load (${workerMs.toFixed(0)} ms in the Worker)`;
}

/**
 * The self-check `report` ({ops: {matmul, cumsum, softmax}, fit: {losses}}, and on WebGPU
 * `fused`: {tokens, tokens_agree, read_backs, overridden, steps, steps_agree, on}) in words, and whether it passed:
 * every op within 1e-4 of the CPU and a training loss that went down. Fused steps that
 * disagree with tensor ops do not fail it: they are turned off, and `fused` says so.
 */
export function checkSummary(report, ms) {
  const { matmul, cumsum, softmax } = report.ops;
  const worst = Math.max(matmul, cumsum, softmax);
  const fmt = (x) => x.toExponential(1);
  const ops =
    `max |Δ| matmul ${fmt(matmul)}, cumsum ${fmt(cumsum)}, softmax ${fmt(softmax)} ` +
    (worst <= 1e-4 ? '✓' : '✗ (too far from the CPU reference)');
  const losses = report.fit.losses;
  const fit =
    `${losses.length - 1} Adam steps, loss ${losses[0].toFixed(4)} → ${losses.at(-1).toFixed(4)} ` +
    `in ${ms.toFixed(0)} ms`;
  const f = report.fused;
  const fused = f
    ? f.on
      ? `${f.tokens} continuation tokens (${f.read_backs} read-back${f.read_backs === 1 ? '' : 's'}) and ${f.steps} accompaniment steps as tensor ops write them ✓`
      : `✗ ${[!f.tokens_agree && 'continuation tokens', !f.steps_agree && 'accompaniment steps'].filter(Boolean).join(' and ')} ` +
        'differ from tensor ops: the fused steps are off, generation goes through tensor ops'
    : null;
  return { ops, fit, fused, losses, ok: !(worst > 1e-4 || !(losses.at(-1) < losses[0])) };
}

/** The title bar's "name · 16 bars · 120 notes" ('' without a piece). */
export function pieceTitle(p) {
  return p ? `${p.name} · ${p.bars.length} bars · ${noteCount(p)} notes` : '';
}

/** Which track was taken for the melody, and how many bars have chords. */
export function describeRoles(piece) {
  const melody = piece.tracks.filter((t) => t.role === 'melody').map((t) => t.name);
  return melody.length
    ? `melody on ${melody.join(', ')}; ${piece.chords.filter((c) => c).length} bars with chords`
    : 'no melody track found — choose one in the track list below the roll';
}

/** A model's line in the Model list. */
export function modelOption(m) {
  return `${m.name} · ${m.pe}${m.default ? ' (default)' : ''}${m.user ? ' (yours)' : ''}`;
}

/** What the panel says under the Model list about `entry` (none: there is no model). */
export function modelAbout(entry) {
  const c = entry?.config;
  return entry
    ? `${entry.description} ${c ? `${c.layers} layers × ${c.heads} heads, ${(entry.parameters / 1e6).toFixed(2)} M parameters, ${(entry.bytes / 1e6).toFixed(1)} MB.` : ''}`
    : 'No model for this task.';
}

/** Why a model has no positional template to draw. */
export function noTemplateText(pe) {
  return `${pe} has no positional template: ${
    pe.startsWith('fstripe')
      ? 'its kernel compares structure labels (melody, chords, phrases), not lags.'
      : 'positions enter by adding a code to the input, not through a kernel of the lag.'
  }`;
}

/** The cached model files by name, or 'none'. */
export function cachedText(urls) {
  return urls.length ? urls.map((u) => u.split('/').pop()).join(', ') : 'none';
}

/** The name a download of `piece` gets: its name without .mid, "-pianoformer", `ext`. */
export function exportName(piece, ext) {
  return `${(piece?.name ?? 'piece').replace(/\.(mid|midi|kar|smf)$/i, '')}-pianoformer.${ext}`;
}
