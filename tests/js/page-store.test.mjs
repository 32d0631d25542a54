// The page store (www/page-store.js): the current piece, its undo and redo history, the job,
// the models, the comparison and the loop selection, and the events their changes send, under
// Node.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  MAX_UNDO,
  addModel,
  endJob,
  forgetLoaded,
  markLoaded,
  on,
  redo,
  remember,
  removeModel,
  setComparison,
  setLoop,
  setModels,
  setPiece,
  showDraft,
  startJob,
  store,
  undo,
} from '../../www/page-store.js';

test('edits go on the undo stack, undo and redo walk it, a new edit clears redo', () => {
  const seen = [];
  const stop = on('piece', (e) => seen.push(e));
  const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((name) => ({ name }));
  setPiece(a, { fresh: true });
  assert.equal(store.piece, a);
  assert.deepEqual(seen.at(-1), { piece: a, keepView: false, fresh: true, edit: false });
  assert.equal(store.canUndo, false, 'the first piece is no edit');
  setPiece(b, { keepView: true });
  assert.deepEqual(seen.at(-1), { piece: b, keepView: true, fresh: false, edit: true });
  setPiece(c);
  assert.ok(store.canUndo && !store.canRedo);
  assert.equal(undo(), true);
  assert.equal(store.piece, b);
  assert.deepEqual(seen.at(-1), { piece: b, keepView: true, fresh: false, edit: false });
  assert.equal(undo(), true);
  assert.equal(store.piece, a);
  assert.equal(undo(), false, 'nothing before the first piece');
  assert.equal(redo(), true);
  assert.equal(store.piece, b);
  setPiece(d);
  assert.equal(store.canRedo, false, 'an edit clears redo');
  assert.equal(redo(), false);
  // Not undoable: the piece changes, the history does not.
  const before = seen.length;
  setPiece(a, { undoable: false });
  assert.equal(seen.length, before + 1);
  assert.equal(undo(), true);
  assert.equal(store.piece, b, 'the piece before d');
  const heard = seen.length;
  stop();
  setPiece(c);
  assert.equal(seen.length, heard, 'a stopped listener hears nothing');
});

test('a draft is shown without history or event; the history keeps fifty pieces', () => {
  let heard = 0;
  const stop = on('piece', () => heard++);
  const draft = { name: 'draft' };
  showDraft(draft);
  assert.equal(store.piece, draft);
  assert.equal(heard, 0);
  while (undo());
  for (let i = 0; i < MAX_UNDO + 10; i++) setPiece({ i });
  let steps = 0;
  while (undo()) steps++;
  assert.equal(steps, MAX_UNDO);
  // The same piece is remembered once (a comparison's two runs start from one piece).
  const p = { name: 'p' };
  remember(p);
  remember(p);
  setPiece({ name: 'q' }, { undoable: false });
  assert.equal(undo(), true);
  assert.equal(store.piece, p);
  assert.equal(store.canUndo, false);
  stop();
});

test('one job runs at a time, and a job ends only itself', () => {
  const heard = [];
  const stop = on('job', (e) => heard.push(e.job));
  const a = { task: 'accompaniment' };
  const b = { task: 'chords' };
  assert.equal(store.job, null);
  assert.equal(startJob(a), true);
  assert.equal(startJob(b), false, 'a second job is refused while one runs');
  assert.equal(store.job, a);
  endJob(b);
  assert.equal(store.job, a, 'another job cannot end the running one');
  endJob(a);
  assert.equal(store.job, null);
  assert.deepEqual(heard, [a, null]);
  stop();
});

test("the models: the manifest, the person's own joining and leaving, which are loaded", () => {
  const heard = [];
  const stop = on('models', (e) => heard.push(e.manifest.map((m) => m.name)));
  const shipped = [{ name: 'a' }, { name: 'b' }];
  const velocity = { name: 'dynamics' };
  setModels(shipped, velocity);
  assert.deepEqual(store.manifest, shipped);
  assert.notEqual(store.manifest, shipped, 'the store keeps its own list');
  assert.equal(store.dynamics, velocity);
  addModel({ name: 'mine', user: true }, { loaded: true });
  assert.ok(store.isLoaded('mine'), 'a model kept from a run is in the Worker already');
  addModel({ name: 'mine', user: true, steps: 2 });
  assert.equal(store.manifest.filter((m) => m.name === 'mine').length, 1, 'the same name replaces');
  assert.equal(store.manifest.at(-1).steps, 2);
  assert.ok(!store.isLoaded('mine'), 'an imported model still has to be loaded');
  markLoaded('a');
  markLoaded('mine');
  removeModel('mine');
  assert.ok(!store.isLoaded('mine') && store.isLoaded('a'));
  forgetLoaded();
  assert.ok(!store.isLoaded('a'), 'a new Worker holds no model');
  assert.deepEqual(heard, [['a', 'b'], ['a', 'b', 'mine'], ['a', 'b', 'mine'], ['a', 'b']]);
  stop();
});

test('the comparison on show and the loop selection are told to their listeners', () => {
  const shown = [];
  const loops = [];
  const stops = [on('comparison', (e) => shown.push(e.comparison)), on('loop', (e) => loops.push(e.loop))];
  const comparison = { seed: 7 };
  setComparison(comparison);
  assert.equal(store.comparison, comparison);
  setComparison(null);
  assert.equal(store.comparison, null);
  assert.deepEqual(shown, [comparison, null]);
  setLoop([480, 1920]);
  assert.deepEqual(store.loop, [480, 1920]);
  setLoop([960, 960]);
  assert.equal(store.loop, null, 'an empty range is no selection');
  setLoop(null);
  assert.deepEqual(loops, [[480, 1920], null, null]);
  for (const stop of stops) stop();
});
