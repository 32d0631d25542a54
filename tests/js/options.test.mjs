// The page's side of the one options contract: the same cases the Rust tests run
// (tests/options-cases.json) give the same words, and the inputs take their ranges from it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { LIMITS, problem, optionsProblem, applyLimits, limitOf } from '../../www/options.js';

const cases = JSON.parse(readFileSync(new URL('../options-cases.json', import.meta.url), 'utf8'));

test('the shared cases give the same words as the Worker and the CLI', () => {
  assert.ok(cases.length >= 10);
  for (const c of cases) assert.equal(problem(c.key, c.value), c.problem, `${c.key} = ${c.value}`);
});

test("a generate request's first setting out of range is named, and the model's own are left alone", () => {
  const ok = { seed: 1, threshold: null, pianoTemperature: null, temperature: 0.8, echo: null, tokens: null, bars: 8, context: 512 };
  assert.equal(optionsProblem(ok), null);
  const bad = optionsProblem({ ...ok, temperature: 0 });
  assert.deepEqual(bad, { key: 'temperature', input: 'temperature', message: "the temperature of a continuation or a melody must be above 0 and at most 10" });
  assert.equal(optionsProblem({ ...ok, tokens: 0 }).input, 'max-tokens');
  assert.equal(optionsProblem({ ...ok, bars: 0 }).input, 'length');
  assert.equal(optionsProblem({ ...ok, tokens: Number.NaN }).key, 'tokens');
});

test('inputs take their range, step and default from the file', () => {
  const inputs = new Map();
  const doc = {
    getElementById: (id) => {
      if (!inputs.has(id)) inputs.set(id, { id, value: '', placeholder: id === 'temperature' ? "model's" : '', min: '', max: '', step: '', removeAttribute(a) { this[a] = ''; } });
      return inputs.get(id);
    },
  };
  applyLimits(doc);
  const t = inputs.get('temperature');
  assert.deepEqual([t.min, t.max, t.step, t.value], ['0.05', '10', '0.05', '']);
  // A continuation's length is bars (8 by default); the token limit is left to its rule.
  const length = inputs.get('length');
  assert.deepEqual([length.min, length.max, length.value], ['1', '1024', String(limitOf('bars').default)]);
  assert.equal(limitOf('bars').default, 8);
  assert.deepEqual([inputs.get('max-tokens').max, inputs.get('max-tokens').value], ['20000', ''])
  for (const l of LIMITS) if (l.default !== null) assert.equal(problem(l.key, l.default), null, `${l.key}'s default`);
});
