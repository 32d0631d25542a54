// Every generation setting's range and default, written once in settings/options.json and read by
// the Rust code too (src/generate/limits.rs): the page's inputs take their limits from it, and
// a setting out of range is refused here in the same words the Worker and the CLI use.
// tests/options-cases.json holds cases both sides run.
import spec from '../settings/options.json' with { type: 'json' };

/** Every setting's range, in the file's order. */
export const LIMITS = spec.options;

/** The range of the setting called `key` (its name in the generate request's options). */
export function limitOf(key) {
  const limit = LIMITS.find((l) => l.key === key);
  if (!limit) throw new Error(`settings/options.json has no setting ${key}`);
  return limit;
}

/** A number as the messages write it: no trailing zeros, thousands apart from 10 000. */
function number(x) {
  if (Number.isInteger(x) && Math.abs(x) >= 10_000) {
    return `${x < 0 ? '-' : ''}${String(Math.abs(x)).replace(/\B(?=(\d{3})+(?!\d))/g, ' ')}`;
  }
  return String(x);
}

/** What a value of `limit` must be, in words. */
export function message(limit) {
  const unit = limit.unit ? ` ${limit.unit}` : '';
  const low = `${limit.above ? 'above' : 'at least'} ${number(limit.min)}`;
  if (limit.max === null || limit.max === undefined) return `${limit.what} must be ${low}${unit}`;
  if (limit.integer && !limit.above && !limit.below) {
    return `${limit.what} must be a whole number from ${number(limit.min)} to ${number(limit.max)}${unit}`;
  }
  return `${limit.what} must be ${low} and ${limit.below ? 'below' : 'at most'} ${number(limit.max)}${unit}`;
}

/** Whether `value` is in the range of `limit`. */
export function allows(limit, value) {
  if (typeof value !== 'number' || !Number.isFinite(value)) return false;
  const low = limit.above ? value > limit.min : value >= limit.min;
  const max = limit.max ?? Infinity;
  const high = limit.below ? value < max : value <= max;
  return low && high && (!limit.integer || Number.isInteger(value));
}

/** The message for `value` as the setting `key`, or null when it is in range. */
export function problem(key, value) {
  const limit = limitOf(key);
  return allows(limit, value) ? null : message(limit);
}

/**
 * The first setting of a generate request's `options` that is out of range, as
 * {key, input, message}, or null. Settings left to the model (null) are not checked.
 */
export function optionsProblem(options) {
  for (const limit of LIMITS) {
    const value = options[limit.key];
    if (value === null || value === undefined) continue;
    if (!allows(limit, value)) return { key: limit.key, input: limit.input, message: message(limit) };
  }
  return null;
}

/** Gives each setting's input in `doc` its range and step (and its default where empty). */
export function applyLimits(doc) {
  for (const limit of LIMITS) {
    const input = limit.input && doc.getElementById(limit.input);
    if (!input) continue;
    // An input's min is inclusive: an excluded bound becomes the first step past it.
    input.min = String(limit.above ? limit.min + limit.step : limit.min);
    if (limit.max !== null && limit.max !== undefined) input.max = String(limit.below ? limit.max - limit.step : limit.max);
    else input.removeAttribute('max');
    input.step = String(limit.step);
    if (input.value === '' && limit.default !== null && !input.placeholder) input.value = String(limit.default);
  }
}
