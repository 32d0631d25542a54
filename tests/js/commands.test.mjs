// The page's commands (www/commands.js), under Node.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { command, run } from '../../www/commands.js';

test('a command runs by its name once registered, and only once registered', async () => {
  const calls = [];
  command('test-echo', (a, b) => {
    calls.push([a, b]);
    return a + b;
  });
  assert.equal(run('test-echo', 2, 3), 5);
  assert.deepEqual(calls, [[2, 3]]);
  assert.throws(() => command('test-echo', () => 0), /registered twice/);
  assert.throws(() => run('test-nothing'), /no command called test-nothing/);
  command('test-async', async (x) => x * 2);
  assert.equal(await run('test-async', 21), 42);
});
