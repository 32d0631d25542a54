// Compare two models on the same piece and seed: which models can be compared with the chosen
// one, which one is offered first, and the comparison itself (two results, which one is shown).
// No DOM here: main.js draws it, and `node --test tests/js/` tests it.

/** The models that can be compared with `current`: the others of its task, in manifest order. */
export function partnerChoices(manifest, current) {
  if (!current) return [];
  const task = String(current.task).toLowerCase();
  return manifest.filter((m) => m.name !== current.name && String(m.task).toLowerCase() === task);
}

/**
 * The model offered first to compare with `current`: the model a fine-tuned one started from;
 * else the task's default; else the first with another positional encoding (the point of
 * comparing is usually the encoding); else the first other model. `previous` (the last choice)
 * wins while it is still a choice. Null when there is nothing to compare with.
 */
export function defaultPartner(manifest, current, previous = null) {
  const choices = partnerChoices(manifest, current);
  const named = (name) => (name ? choices.find((m) => m.name === name) : undefined);
  return (
    named(previous) ??
    named(current?.user ? current.training?.base : null) ??
    choices.find((m) => m.default) ??
    choices.find((m) => m.pe !== current?.pe) ??
    choices[0] ??
    null
  );
}

/** A button's label for one side: the model's name and encoding, and what it is to the other. */
export function sideLabel(entry, other) {
  if (!entry) return '';
  const role = entry.user && other && entry.training?.base === other.name ? ' (fine-tuned)'
    : other?.user && other.training?.base === entry.name ? ' (base)' : '';
  return `${entry.name}${entry.pe ? ` · ${entry.pe}` : ''}${role}`;
}

/**
 * Two results of the same piece and seed. Each side: `{ model, piece, attention }`, where
 * `attention` is what the attention map held when that side was written (null when it came from
 * a link: it is drawn again when shown). `showing` is 'a' or 'b'.
 */
export class Comparison {
  constructor(a, b, seed) {
    this.a = { attention: null, ...a };
    this.b = { attention: null, ...b };
    this.seed = seed;
    this.showing = 'a';
  }

  get shown() {
    return this[this.showing];
  }

  get hidden() {
    return this[this.showing === 'a' ? 'b' : 'a'];
  }

  /** Shows `which` ('a' or 'b'); returns that side. */
  show(which) {
    if (which !== 'a' && which !== 'b') throw new Error(`no side called ${which}`);
    this.showing = which;
    return this.shown;
  }

  /**
   * An edit of the shown piece stays with its side, so switching back and forth keeps it; the
   * side's attention map was of the piece before the edit, and is drawn again when shown.
   */
  edited(piece) {
    this.shown.piece = piece;
    this.shown.attention = null;
  }

  /** What a share link carries: the shown side as the piece, the other as `compare`. */
  forShare() {
    return {
      piece: this.shown.piece,
      model: this.shown.model,
      compare: { model: this.hidden.model, piece: this.hidden.piece },
    };
  }

  /** The comparison a decoded share link holds (`{ piece, model, seed, compare }`), or null. */
  static fromShare(shared) {
    if (!shared?.compare) return null;
    return new Comparison(
      { model: shared.model ?? null, piece: shared.piece },
      { model: shared.compare.model, piece: shared.compare.piece },
      shared.seed ?? null,
    );
  }
}
