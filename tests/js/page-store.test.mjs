// The page store (www/page-store.js): the current piece, its undo and redo history, and the
// 'piece' events its changes send, under Node.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  MAX_UNDO,
  endJob,
  on,
  redo,
  remember,
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
