//! How the accompaniment model's onset and sustain probabilities become notes when they are
//! thresholded rather than sampled: a threshold and a gap merge (both chosen on validation
//! data by onset F1, `eval::Predictions::choose`).

use serde::{Deserialize, Serialize};

use crate::music::roll::{PIANO_KEYS, PITCHES, PianoRoll};

/// How probabilities become notes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Binarize {
    /// A note starts where the onset probability is above this, and lasts while the sustain
    /// probability stays above it.
    pub threshold: f32,
    /// Sustain dips of at most this many steps inside a note are bridged.
    pub gap: usize,
}

impl Default for Binarize {
    fn default() -> Self {
        Self {
            threshold: 0.5,
            gap: 0,
        }
    }
}

/// A piano roll from onset and sustain probabilities, each `[len, 128]` row-major, on a
/// piano's keys ([`PIANO_KEYS`]).
pub fn binarize(onset: &[f32], sustain: &[f32], len: usize, b: Binarize) -> PianoRoll {
    let mut roll = PianoRoll::new(len);
    for p in PIANO_KEYS {
        let mut t = 0;
        while t < len {
            if onset[t * PITCHES + p] <= b.threshold {
                t += 1;
                continue;
            }
            // A note from t: extend while sustained, bridging short dips, until a new onset.
            roll.set(t, p, true, true, 0);
            let mut end = t + 1;
            let mut u = t + 1;
            while u < len && onset[u * PITCHES + p] <= b.threshold {
                if sustain[u * PITCHES + p] > b.threshold {
                    end = u + 1;
                } else if u - end + 1 > b.gap {
                    break;
                }
                u += 1;
            }
            for s in t + 1..end {
                roll.set(s, p, false, true, 0);
            }
            t = end.max(t + 1);
            // Resume the scan where a new onset may be.
            while t < u && onset[t * PITCHES + p] <= b.threshold {
                t += 1;
            }
        }
    }
    roll
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planes(len: usize, notes: &[(usize, usize, usize, f32)]) -> (Vec<f32>, Vec<f32>) {
        let mut on = vec![0.0; len * PITCHES];
        let mut sus = vec![0.0; len * PITCHES];
        for &(p, start, end, prob) in notes {
            on[start * PITCHES + p] = prob;
            for t in start..end {
                sus[t * PITCHES + p] = prob;
            }
        }
        (on, sus)
    }

    #[test]
    fn binarize_starts_notes_at_onsets_and_bridges_short_gaps() {
        // Pitch 60: onset at 0, sustained to 4, a dip at 4, sustained 5..8.
        let (on, mut sus) = planes(10, &[(60, 0, 8, 0.9), (64, 2, 3, 0.3)]);
        sus[4 * PITCHES + 60] = 0.1;
        let strict = binarize(
            &on,
            &sus,
            10,
            Binarize {
                threshold: 0.5,
                gap: 0,
            },
        );
        assert!(strict.onset(0, 60));
        assert!(strict.sustain(3, 60) && !strict.sustain(4, 60) && !strict.sustain(5, 60));
        assert!(!strict.onset(2, 64), "0.3 is under the threshold");
        let merged = binarize(
            &on,
            &sus,
            10,
            Binarize {
                threshold: 0.5,
                gap: 1,
            },
        );
        assert!(merged.sustain(4, 60) && merged.sustain(7, 60) && !merged.sustain(8, 60));
        assert!(!merged.onset(5, 60), "one note, not two");
        let low = binarize(
            &on,
            &sus,
            10,
            Binarize {
                threshold: 0.2,
                gap: 0,
            },
        );
        assert!(low.onset(2, 64) && !low.sustain(3, 64));
        // A new onset ends the note before it.
        let (mut on2, sus2) = planes(6, &[(50, 0, 6, 0.9)]);
        on2[3 * PITCHES + 50] = 0.9;
        let two = binarize(&on2, &sus2, 6, Binarize::default());
        assert!(two.onset(0, 50) && two.onset(3, 50) && two.sustain(5, 50));
    }
}
