//! A song as the models read it: its grid, its rolls (melody, bridge, piano) and its labels
//! per step. A training piece (`corpus::Piece`) and a generation's input
//! (`generate::AccompanimentInput`) each hold one, and the windows and examples the models read
//! are cut from it (`data::example`).

use super::example::{Example, WindowSpec, example};
use crate::music::grid::Grid;
use crate::music::labels::StepLabels;
use crate::music::roll::MultiRoll;

#[derive(Clone, Debug)]
pub struct Sheet {
    pub grid: Grid,
    pub rolls: MultiRoll,
    pub labels: StepLabels,
}

impl Sheet {
    /// The window of `spec` from step `start`, transposed by `transpose` semitones, as the
    /// model reads it (see [`example`]).
    pub fn example(&self, spec: &WindowSpec, start: usize, transpose: i32) -> Example {
        example(&self.rolls, &self.labels, spec, start, transpose)
    }
}
