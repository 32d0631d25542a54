//! The echo's lean beyond what the model already plays. A lean counted in the pianists alone
//! ([`super::EchoCounts::lean_by_latest`] and the others) is the evidence a repeat's answered
//! step gives *a listener who knows nothing else*; the model, writing step by step, has heard
//! its own earlier bars and already leans toward them. Added as it stands, the lean counts that
//! continuity twice: the keeping lean, counted against the bar before, doubled the onsets.
//!
//! So the same counts are taken of the model's own accompaniments (no echo) of training songs
//! under their lanes, and the model's lean is taken from the pianists': what is left is what
//! the pianists' repeats say that the model's sampling does not. Where the pianists' lean is
//! split by kind (a bar pasted or played anew: [`super::PasteMix`]), the model's is pooled
//! over both kinds ([`EchoCounts::pooled_kinds`]): the model does not know which kind a bar
//! was drawn, and its own logits carry the pooled lean.

use super::{EchoCounts, EchoLean, JointLean, KindCounts, LeanTable, PasteMix, Table};

/// `a −= b`, cell by cell.
fn less_table(a: &mut LeanTable, b: &LeanTable) {
    for (x, y) in a
        .iter_mut()
        .flatten()
        .flatten()
        .zip(b.iter().flatten().flatten())
    {
        *x -= y;
    }
}

fn less_joint(a: &mut JointLean, b: &JointLean) {
    let cells = |t: &JointLean| {
        t.iter()
            .flatten()
            .flatten()
            .flatten()
            .copied()
            .collect::<Vec<_>>()
    };
    let b = cells(b);
    for (x, y) in a.iter_mut().flatten().flatten().flatten().zip(b) {
        *x -= y;
    }
}

/// Each kind's lean of `a` less the same kind's of `b` (the shares are `a`'s).
fn less_mix(a: &mut PasteMix, b: &PasteMix) {
    for (ka, kb) in a.lean.iter_mut().zip(&b.lean) {
        for (x, y) in ka.iter_mut().zip(kb) {
            less_table(x, y);
        }
    }
}

impl EchoLean {
    /// This lean less `model`'s, table by table where both were counted so (a table `model`
    /// lacks is left as it is).
    pub fn beyond(mut self, model: &EchoLean) -> EchoLean {
        less_table(&mut self.lean, &model.lean);
        if let (Some(a), Some(b)) = (&mut self.by_melody, &model.by_melody) {
            a.iter_mut().zip(b).for_each(|(x, y)| less_table(x, y));
        }
        if let (Some(a), Some(b)) = (&mut self.by_latest, &model.by_latest) {
            a.iter_mut().zip(b).for_each(|(x, y)| less_joint(x, y));
        }
        if let (Some(a), Some(b)) = (&mut self.paste, &model.paste) {
            less_mix(a, b);
        }
        if let (Some(a), Some(b)) = (&mut self.kept, &model.kept) {
            less_mix(a, b);
        }
        self
    }
}

fn add_table(a: &mut Table, b: &Table) {
    for (x, y) in a
        .iter_mut()
        .flatten()
        .flatten()
        .zip(b.iter().flatten().flatten())
    {
        x[0] += y[0];
        x[1] += y[1];
    }
}

impl KindCounts {
    /// These counts with both kinds' steps counted together under each kind.
    fn pooled(&self) -> KindCounts {
        let mut both = self.by_kind[0];
        both.iter_mut()
            .zip(&self.by_kind[1])
            .for_each(|(a, b)| add_table(a, b));
        KindCounts {
            bars: self.bars,
            by_kind: [both, both],
        }
    }
}

impl EchoCounts {
    /// These counts with the repeats' and the kept bars' kinds pooled: the lean a sampler
    /// that draws no kind shows, to take from a lean that does ([`EchoLean::beyond`]).
    pub fn pooled_kinds(&self) -> EchoCounts {
        EchoCounts {
            repeat_kinds: self.repeat_kinds.pooled(),
            kept_kinds: self.kept_kinds.pooled(),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::music::texture::echo::MELODY_BINS;

    #[test]
    fn a_lean_beyond_itself_is_nothing_and_beyond_nothing_is_itself() {
        let mut counts = EchoCounts::default();
        // Some onsets counted: in a repeat, the pitch that started at the answered step
        // starts again 9 times in 10; other pitches once in 10.
        for bin in 0..=MELODY_BINS {
            for k in 0..2 {
                let t = &mut counts.repeat_kinds.by_kind[k][bin];
                t[0][1][2] = [1, 9 + k as u64];
                t[0][1][0] = [9, 1];
            }
        }
        counts.repeats[0][1][2] = [1, 9];
        counts.repeats[0][1][0] = [9, 1];
        let lean = counts.lean_pasting();
        assert!(lean.lean[0][1][2] > 1.0, "the counts lean: {:?}", lean.lean);
        let none = lean.beyond(&lean);
        assert!(none.lean.iter().flatten().flatten().all(|&x| x == 0.0));
        let mix = none.paste.expect("a mix");
        assert!(
            mix.lean
                .iter()
                .flatten()
                .flatten()
                .flatten()
                .flatten()
                .all(|&x| x == 0.0)
        );
        assert_eq!(
            mix.share,
            lean.paste.expect("a mix").share,
            "the shares are kept"
        );
        assert_eq!(lean.beyond(&EchoLean::default()), lean);
    }

    #[test]
    fn pooled_kinds_count_both_kinds_under_each() {
        let mut counts = EchoCounts::default();
        counts.kept_kinds.by_kind[0][0][1][2][1] = [3, 4];
        counts.kept_kinds.by_kind[1][0][1][2][1] = [5, 6];
        let pooled = counts.pooled_kinds();
        for k in 0..2 {
            assert_eq!(pooled.kept_kinds.by_kind[k][0][1][2][1], [8, 10]);
        }
        let lean = pooled.lean_keeping().kept.expect("a mix");
        assert_eq!(lean.lean[0], lean.lean[1], "one lean for both kinds");
    }
}
