//! The harmonizer: the melody and bridge per beat with the bar grid and the phrase lane in
//! (`BeatInputs`), chord-class logits out per beat.

use rand::rngs::StdRng;

use super::{Kind, Needs};
use crate::data::beats::BeatInputs;
use crate::data::corpus::{Batch, Corpus, Piece, WindowSpec};
use crate::data::harmony::beat_crop_starts;
use crate::model::config::{Conditioning, PerformerConfig};
use crate::music::harmony::CHORD_CLASSES;

pub struct Harmonization;

impl Kind for Harmonization {
    /// New harmonizers read the context; the causal form's is cut at the current beat (same
    /// width).
    fn sizes(_vocab: usize, _conditioning: Option<Conditioning>) -> (usize, usize) {
        (BeatInputs::WITH_CONTEXT.width(), CHORD_CLASSES)
    }

    /// With or without the context (the first shipped harmonizer read none).
    fn input_width(config: &PerformerConfig, sized: usize) -> usize {
        BeatInputs::of_width(config.input_dim, config.is_causal()).map_or(sized, |r| r.width())
    }

    /// Beats: 32 bars of 4/4.
    const TRAIN_WINDOW: usize = 128;
    const TUNE_WINDOW: usize = 128;
    const CLASSES: bool = true;
    const NEEDS: Needs = Needs::Melody;

    fn learns_from(piece: &Piece, _len: usize) -> bool {
        piece.has_harmony()
    }

    fn none_to_learn(_corpus: &Corpus, _len: usize) -> String {
        "no piece has both a melody and chords to learn from (a harmonizer learns from \
         annotated chords, as POP909's, or from files whose chords can be recognised)"
            .into()
    }

    fn starts(piece: &Piece, len: usize) -> Vec<usize> {
        beat_crop_starts(&piece.sheet.grid, len)
    }

    fn window(
        piece: &Piece,
        spec: &WindowSpec,
        start: usize,
        shift: i32,
        _rng: Option<&mut StdRng>,
    ) -> Batch {
        Batch::Rolls(vec![piece.harmony_example(spec, start, shift)])
    }
}
