// Keeping and sharing a piece: the MIDI download, the share link (the piece, its labels, the
// model, the seed and a comparison's two results in the URL fragment, see share.js) and opening
// one when the page starts.
import { $, status, showError, notice, download } from './page.js';
import { call } from './worker-client.js';
import { encodeShare, decodeShare } from './share.js';
import { Comparison } from './compare.js';
import { exportName } from './page-text.js';
import { entryNamed } from './model-loader.js';
import { setPiece, store } from './page-store.js';
import { applySettings, settings } from './settings.js';
import { run } from './commands.js';

export async function downloadMidi() {
  try {
    const bytes = await call('writeMidi', { piece: store.piece });
    download(new Blob([bytes], { type: 'audio/midi' }), exportName(store.piece, 'mid'));
  } catch (e) {
    showError(`The MIDI file could not be written: ${e.message}`);
  }
}

/** Downloads the piece as compressed MusicXML: a lead sheet (`lead`) or every track. */
export async function downloadMusicXml(lead) {
  try {
    const bytes = await call('writeMusicXml', { piece: store.piece, lead });
    const name = exportName(store.piece, 'mxl').replace(/\.mxl$/, lead ? ' (lead sheet).mxl' : '.mxl');
    download(new Blob([bytes], { type: 'application/vnd.recordare.musicxml' }), name);
  } catch (e) {
    showError(`The MusicXML score could not be written: ${e.message}`);
  }
}

export async function share() {
  try {
    const s = settings();
    const fragment = await encodeShare({
      piece: store.piece,
      model: s.model,
      seed: s.seed,
      task: s.task,
      settings: s,
      ...(store.comparison ? store.comparison.forShare() : {}),
      ...(store.comparison?.seed != null ? { seed: store.comparison.seed } : {}),
    });
    const link = `${location.origin}${location.pathname}#${fragment}`;
    status.shareLink = link;
    try {
      await navigator.clipboard.writeText(link);
      notice(`Share link copied (${(link.length / 1000).toFixed(1)} kB): it holds the piece, its labels, the model and the seed.`);
    } catch {
      notice(`Share link (copy it): ${link}`);
    }
  } catch (e) {
    showError(e.message);
  }
}

/** Opens a share link in the URL fragment, if there is one. */
export async function openShared() {
  const fragment = location.hash.slice(1);
  if (!fragment) return false;
  history.replaceState(null, '', location.pathname + location.search);
  try {
    const shared = await decodeShare(fragment);
    await call('checkPiece', { piece: shared.piece });
    if (shared.compare) await call('checkPiece', { piece: shared.compare.piece });
    applySettings(
      { ...shared.settings, task: shared.task, model: shared.model, seed: shared.seed },
      (name) => run('show-models', name),
    );
    setPiece(shared.piece, { fresh: true });
    const comparison = Comparison.fromShare(shared);
    if (comparison) {
      if (entryNamed(comparison.b.model)) $('compare-model').value = comparison.b.model;
      run('show-comparison', comparison, { draw: false });
    }
    const what = comparison ? `${shared.model ?? 'no model'} against ${comparison.b.model}` : shared.model ?? 'no model';
    notice(`Opened a shared piece (${what}, seed ${shared.seed ?? '–'}). Press Play (Space) to hear it.`);
    return true;
  } catch (e) {
    showError(`This share link could not be opened: ${e.message}`);
    return false;
  }
}
