//! The accompaniment model: rolls in (the melody and bridge, and with its conditioning the
//! lanes, the piano's step before and the reference lane), the piano's onset and sustain out
//! per sixteenth, one bit per pitch.

use rand::rngs::StdRng;

use super::{Kind, Needs};
use crate::data::corpus::{Batch, Corpus, Piece, WindowSpec};
use crate::data::example::{example, replace_chords};
use crate::model::config::{ACCOMPANIMENT_INPUTS, ACCOMPANIMENT_OUTPUTS, Conditioning};

pub struct Accompaniment;

impl Kind for Accompaniment {
    fn sizes(_vocab: usize, conditioning: Option<Conditioning>) -> (usize, usize) {
        (
            ACCOMPANIMENT_INPUTS + conditioning.map_or(0, Conditioning::extra_inputs),
            ACCOMPANIMENT_OUTPUTS,
        )
    }

    const CONDITIONED: bool = true;
    /// 16 bars of 4/4 sixteenths; 8 for fine-tuning.
    const TRAIN_WINDOW: usize = 256;
    const TUNE_WINDOW: usize = 128;
    const NEEDS: Needs = Needs::MelodyAndPiano;

    fn learns_from(piece: &Piece, _len: usize) -> bool {
        piece.has_accompaniment() && !piece.range.is_empty()
    }

    fn none_to_learn(_corpus: &Corpus, _len: usize) -> String {
        "no piece has both a melody and an accompaniment to learn (name the tracks MELODY and \
         PIANO, or give files with a clear melody track and other parts)"
            .into()
    }

    fn starts(piece: &Piece, len: usize) -> Vec<usize> {
        piece.crop_starts(len)
    }

    /// A training window reads chords replaced at the spec's chord noise.
    fn window(
        piece: &Piece,
        spec: &WindowSpec,
        start: usize,
        shift: i32,
        rng: Option<&mut StdRng>,
    ) -> Batch {
        let example = match rng.filter(|_| spec.chord_noise > 0.0) {
            Some(rng) => {
                let sheet = &piece.sheet;
                let labels = replace_chords(
                    &sheet.labels,
                    start..start + spec.len,
                    spec.chord_noise,
                    rng,
                );
                example(&sheet.rolls, &labels, spec, start, shift)
            }
            None => piece.sheet.example(spec, start, shift),
        };
        Batch::Rolls(vec![example])
    }
}
