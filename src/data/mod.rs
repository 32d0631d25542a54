//! What the models read, made from music: accompaniment examples (a song's rolls and lanes
//! over a window, `example`), corpora of pieces and their windows for training and evaluation
//! (`corpus`), harmonizer windows of beats (`harmony`), the melody model's steps (`melody`), batches of them as tensors (`batch`), each kind of
//! model's sizes, default windows, loss and the windows it learns from in one table (`kinds`:
//! `kinds.rs` says how a kind joins), and, natively, where the pieces come from
//! (`sources`: POP909 or a folder of MIDI files). Used by training, generation and evaluation
//! alike.

pub mod batch;
pub mod beats;
pub mod corpus;
pub mod example;
pub mod features;
pub mod harmony;
pub mod kinds;
pub mod melody;
pub mod pop909_cl;
pub mod shapes;
pub mod sheet;
#[cfg(not(target_arch = "wasm32"))]
pub mod sources;

pub use batch::{stack, stack_coordinates, stack_tokens};
pub use example::{Example, example};
