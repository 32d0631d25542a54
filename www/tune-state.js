// The Fine-tune panel's state (tune.js), which its helpers tune-files.js and tune-mine.js
// share: the files it teaches with, the run in progress, the models kept in this tab. And the
// weights of a kept model, which the model loader asks for (model-loader.js). DOM-free but
// for the task menu.
import { loadUserModel } from './store.js';

export const tune = {
  files: [], // {name, piece, report}
  run: null, // the run in progress, see tune.js start()
  kept: new Map(), // name → weights kept in this tab (what storage refused still exports)
  pending: null, // a finished run waiting to be kept or discarded
  lastDrawn: null, // the last run, whose curve stays on show
};

/** The task the Generate panel is set to (the Fine-tune panel trains that task's models). */
export const task = () => document.getElementById('task').value;

/** Weights of a model fine-tuned or imported here (null when gone). */
export async function weightsOf(entry) {
  return tune.kept.get(entry.name) ?? (await loadUserModel(entry.name))?.weights ?? null;
}
