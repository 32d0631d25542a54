//! Steering at sampling time, as parts, for every task that samples. The model proposes each
//! decision; a part that leans it — a continuation's key hold, density and echo
//! (`continuation/steer.rs`), a melody's echo (`melody/echo.rs`), an accompaniment's texture
//! echo (`TextureSteer`, in `texture.rs`) — is a small type behind [`Steer`], and each task
//! composes its parts in one order ([`lean_all`]). What a part reads of the sampling's moment is
//! the task's own `Now` (the token grammar's place, the melody's step, the piano's step); the
//! lean it adds is in the units that task's draw reads (log-odds added to its logits).
//!
//! A new steering is one type and one `impl Steer<TheTasksNow>`, added to its task's list of
//! parts; it can be read and tested alone.

/// A part that leans a sampling's next decision.
pub trait Steer<Now: ?Sized> {
    /// Adds its lean on the decision at `now` to `logits` and says whether it leaned at all (a
    /// part that does not lean leaves `logits` as they were; when no part leans, the model's
    /// own distribution is drawn from as it is).
    fn lean(&mut self, now: &Now, logits: &mut [f32]) -> bool;
}

/// `logits` leaned by each of `parts` in turn (their leans add up in that order), or `None`
/// when none of them leans.
pub fn lean_all<Now: ?Sized>(
    parts: &mut [&mut dyn Steer<Now>],
    now: &Now,
    logits: &[f32],
) -> Option<Vec<f32>> {
    if parts.is_empty() {
        // Nothing to lean with (no copy of the logits, per step).
        return None;
    }
    let mut out = logits.to_vec();
    let mut leaned = false;
    for part in parts.iter_mut() {
        leaned |= part.lean(now, &mut out);
    }
    leaned.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Leans index `at` by `by`, where `now` allows it.
    struct Toward {
        at: usize,
        by: f32,
    }

    impl Steer<[bool]> for Toward {
        fn lean(&mut self, allowed: &[bool], logits: &mut [f32]) -> bool {
            if !allowed[self.at] {
                return false;
            }
            logits[self.at] += self.by;
            true
        }
    }

    #[test]
    fn parts_add_their_leans_in_order_and_none_leaves_the_model_alone() {
        let logits = [0.5, -1.0, 2.0];
        let (mut a, mut b) = (Toward { at: 0, by: 1.0 }, Toward { at: 2, by: -0.5 });
        let leaned = lean_all(&mut [&mut a, &mut b], &[true, true, true][..], &logits);
        assert_eq!(leaned, Some(vec![1.5, -1.0, 1.5]));
        let leaned = lean_all(&mut [&mut a, &mut b], &[true, true, false][..], &logits);
        assert_eq!(
            leaned,
            Some(vec![1.5, -1.0, 2.0]),
            "a part that may not lean does not"
        );
        assert_eq!(
            lean_all(&mut [&mut a, &mut b], &[false, true, false][..], &logits),
            None,
            "no part leans: the model's own logits"
        );
        assert_eq!(lean_all::<[bool]>(&mut [], &[true][..], &logits), None);
    }
}
