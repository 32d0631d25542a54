//! The melody model: the lanes, the melody's step before and the accompaniment's pitch
//! classes in per sixteenth, one class out (rest, hold or the onset of a pitch).

use rand::RngExt;
use rand::rngs::StdRng;

use super::{Kind, Needs};
use crate::data::corpus::{Batch, Corpus, Piece, WindowSpec};
use crate::data::melody::{MELODY_CLASSES, MELODY_INPUTS};
use crate::model::config::Conditioning;

pub struct Melody;

impl Kind for Melody {
    fn sizes(_vocab: usize, _conditioning: Option<Conditioning>) -> (usize, usize) {
        (MELODY_INPUTS, MELODY_CLASSES)
    }

    /// Sixteenths: 16 bars of 4/4; 8 for fine-tuning.
    const TRAIN_WINDOW: usize = 256;
    const TUNE_WINDOW: usize = 128;
    const CLASSES: bool = true;
    const NEEDS: Needs = Needs::Melody;

    fn learns_from(piece: &Piece, _len: usize) -> bool {
        piece.has_harmony()
    }

    fn none_to_learn(_corpus: &Corpus, _len: usize) -> String {
        "no piece has both a melody and chords to learn from (a melody model learns from songs \
         whose chords are annotated, as POP909's, or can be recognised)"
            .into()
    }

    fn starts(piece: &Piece, len: usize) -> Vec<usize> {
        piece.crop_starts(len)
    }

    /// Half the training windows read the piano and bridge under the melody, half the lanes
    /// alone (a melody is written over a plan or over a piano part); held-out windows the
    /// lanes alone, as a song from a plan does.
    fn window(
        piece: &Piece,
        spec: &WindowSpec,
        start: usize,
        shift: i32,
        rng: Option<&mut StdRng>,
    ) -> Batch {
        let accompaniment = rng.is_some_and(|r| r.random_bool(0.5));
        Batch::Rolls(vec![piece.melody_example(
            spec,
            start,
            shift,
            accompaniment,
        )])
    }
}
