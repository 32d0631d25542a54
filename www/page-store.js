// The page's state in one place (issue 37, the page store): the current piece with its undo
// and redo history, the job running, the models (the manifest's and the person's own, which
// of them the Worker has loaded), the comparison on show and the roll's loop selection.
// Changes are told to whoever listens: 'piece' (the roll and the track list redraw, a
// comparison ends or keeps the edit, the piece is saved for the next visit), 'job', 'models'
// (the model menus), 'comparison' and 'loop' — so that a panel changes the state here instead
// of calling the panel that shows it. What one module alone uses stays in that module.
// DOM-free: Node tests load it.

const listeners = new Map();

/** Calls `fn(detail)` on each `name` event; returns a function that stops it. */
export function on(name, fn) {
  if (!listeners.has(name)) listeners.set(name, new Set());
  listeners.get(name).add(fn);
  return () => listeners.get(name).delete(fn);
}

function emit(name, detail) {
  for (const fn of [...(listeners.get(name) ?? [])]) fn(detail);
}

/**
 * The work running (a generation, suggested chords): `{id, task, cancelled}`, or null. One at
 * a time: `startJob` refuses a second, and a job ends only itself.
 */
let job = null;

/** Makes `next` the running job, telling 'job' listeners; false when one is running. */
export function startJob(next) {
  if (job) return false;
  job = next;
  emit('job', { job });
  return true;
}

/** Ends `done` if it is the running job, telling 'job' listeners. */
export function endJob(done) {
  if (job !== done) return;
  job = null;
  emit('job', { job: null });
}

/** Pieces Undo brings back (at most this many). */
export const MAX_UNDO = 50;
let piece = null;
const undoStack = []; // earlier pieces, the last to come back first
const redoStack = []; // pieces Undo took back, the last undone first; a new edit clears it

let manifest = []; // the models' entries: the manifest's, then the person's own
let dynamics = null; // the manifest's velocity model, or null
let pedal = null; // the manifest's pedal model, or null
let livePedal = null; // the manifest's live (causal) pedal model, or null
const loaded = new Set(); // the names of the models loaded in the current Worker
let comparison = null; // the Comparison on show (compare.js), or null
let loop = null; // the roll's loop selection [fromTick, toTick), or null

/** What the page's modules read. */
export const store = {
  get manifest() {
    return manifest;
  },
  get dynamics() {
    return dynamics;
  },
  get pedal() {
    return pedal;
  },
  get livePedal() {
    return livePedal;
  },
  /** Whether the current Worker has the model called `name` loaded. */
  isLoaded(name) {
    return loaded.has(name);
  },
  get comparison() {
    return comparison;
  },
  get loop() {
    return loop;
  },
  get piece() {
    return piece;
  },
  get canUndo() {
    return undoStack.length > 0;
  },
  get canRedo() {
    return redoStack.length > 0;
  },
  get job() {
    return job;
  },
};

/**
 * The piece on show while a generation writes it (or the one put back when it fails): no
 * history, no event — the generation draws it itself.
 */
export function showDraft(draft) {
  piece = draft;
}

/**
 * Puts `p` on the undo stack: Undo brings it back. The piece already on top is not put there
 * twice (a comparison's two runs start from the same piece: one Undo goes back to it).
 */
export function remember(p) {
  if (undoStack.at(-1) === p) return;
  undoStack.push(p);
  if (undoStack.length > MAX_UNDO) undoStack.shift();
}

/**
 * Makes `next` the current piece and tells the listeners `{piece, keepView, fresh, edit}`:
 * with `undoable` (an edit) the previous piece goes on the undo stack and Redo is cleared.
 * `fresh`: another piece (a file, a link, the last visit); `keepView`: the roll keeps its zoom
 * and scroll.
 */
export function setPiece(next, { undoable = true, keepView = false, fresh = false } = {}) {
  const edit = undoable && piece !== null;
  if (edit) {
    remember(piece);
    redoStack.length = 0;
  }
  piece = next;
  emit('piece', { piece: next, keepView, fresh, edit });
}

/** Brings the previous piece back (false when there is none). */
export function undo() {
  if (!undoStack.length) return false;
  const previous = undoStack.pop();
  if (piece) redoStack.push(piece);
  piece = previous;
  emit('piece', { piece, keepView: true, fresh: false, edit: false });
  return true;
}

/** Brings back the piece Undo took (false when there is none). */
export function redo() {
  if (!redoStack.length) return false;
  const next = redoStack.pop();
  if (piece) remember(piece);
  piece = next;
  emit('piece', { piece, keepView: true, fresh: false, edit: false });
  return true;
}

/**
 * The manifest's models, velocity model, pedal model and live pedal model (as the page opens),
 * telling 'models' listeners.
 */
export function setModels(models, velocity = null, pedalModel = null, livePedalModel = null) {
  manifest = [...models];
  dynamics = velocity;
  pedal = pedalModel;
  livePedal = livePedalModel;
  emit('models', { manifest });
}

/**
 * Adds `entry` to the models (one of the person's own: fine-tuned, imported), in place of one
 * of the same name; `loaded` when the Worker already holds its weights.
 */
export function addModel(entry, { loaded: inWorker = false } = {}) {
  manifest = manifest.filter((m) => m.name !== entry.name).concat([entry]);
  markLoaded(entry.name, inWorker);
  emit('models', { manifest });
}

/** Takes the model called `name` off the list (and out of the loaded ones). */
export function removeModel(name) {
  manifest = manifest.filter((m) => m.name !== name);
  loaded.delete(name);
  emit('models', { manifest });
}

/** Records that the Worker holds (or no longer holds) the model called `name`. */
export function markLoaded(name, yes = true) {
  if (yes) loaded.add(name);
  else loaded.delete(name);
}

/** A new Worker (another backend, the cache cleared) holds no model. */
export function forgetLoaded() {
  loaded.clear();
}

/** Puts `next` (a Comparison, or null) on show, telling 'comparison' listeners. */
export function setComparison(next) {
  comparison = next;
  emit('comparison', { comparison });
}

/** The roll's loop selection [fromTick, toTick) (null: none), telling 'loop' listeners. */
export function setLoop(range) {
  loop = range && range[1] > range[0] ? [range[0], range[1]] : null;
  emit('loop', { loop });
}
