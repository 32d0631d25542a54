// The page's events: a module says what happened (`emit`) and the modules that care listen
// (`on`), so that no module imports another only to tell it something. The page's modules
// import one another in one direction (`tools/deps.py` refuses a cycle in www/ as in src/);
// these events carry the few messages that go the other way. Changes of the page's state are
// the page store's events (page-store.js: 'piece', 'job', 'models', 'comparison', 'loop').
//   'model-shown'   the model menu shows another task or model (piece-view: the buttons;
//                   tune: its base models)
//   'buttons'       the page's buttons were updated (tune: its own follow)
//   'tune-files'    the Fine-tune panel's file list changed (tune: its buttons)
//   'model-loaded'  a model is loaded in the Worker (attention-panel: its template)
//   'leave-compare' another piece, an undo, or a generation that is not a comparison's
//                   (compare-panel: the comparison ends)
//   'label-click'   (kind, bar): a chord or phrase cell of the roll was clicked (lanes: edit it)
const listeners = new Map();

/** Calls `fn` with the event's arguments each time `name` is emitted. */
export function on(name, fn) {
  if (!listeners.has(name)) listeners.set(name, []);
  listeners.get(name).push(fn);
}

/** Tells every listener of `name`, in the order they were added. */
export function emit(name, ...args) {
  for (const fn of listeners.get(name) ?? []) fn(...args);
}
