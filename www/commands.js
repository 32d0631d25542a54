// The page's commands: a panel that can do something (generate, stop playback, show a
// comparison, ...) registers it here once, under a name; another panel runs it by that name
// instead of importing the panel (issue 37: panels import the store, the Worker client and
// their own helpers, never each other). DOM-free: Node tests load it.
//   'generate'          (request) → the piece written (generate.js)
//   'stop-playback'     stops the piano and the playhead (playback.js)
//   'restart-playback'  plays again from the playhead if the piano was playing (playback.js)
//   'seek'              (tick) moves the playhead (playback.js)
//   'playhead'          → the playhead's tick (playback.js)
//   'show-comparison'   (comparison, options) shows two results side by side (compare-panel.js)
//   'show-cached'       lists the models kept for offline use (backend-card.js)
//   'show-models'       (name) the model list of the chosen task (models.js)
//   'attention-stop', 'attention-refresh': the attention panel's map request (attention-panel.js)
//   'update-buttons', 'show-piece', 'selected-bars' → [from, to) or null, 'roll-draft' (piece),
//   'roll-generating' (range or null), 'roll-playhead' (tick or null): the piece view's
//   (piece-view.js)
//   'use-model'         (entry) chooses a model in the Generate panel (main.js)
//   'play-piece'        (piece) plays a piece that is not the page's, an audition (playback.js)
//   'show-alternatives' ({base, kind, items, caption, keep, span, playFrom}), 'close-alternatives':
//   the strip of alternatives (chords or pieces) to audition and keep (alternatives.js)
const commands = new Map();

/** Registers `fn` as the command `name`; a second registration of a name is a mistake. */
export function command(name, fn) {
  if (commands.has(name)) throw new Error(`the command ${name} is registered twice`);
  commands.set(name, fn);
}

/** Runs the command `name` with `args`, returning what it returns. */
export function run(name, ...args) {
  const fn = commands.get(name);
  if (!fn) throw new Error(`no command called ${name} is registered`);
  return fn(...args);
}
