//! Training: the training step with its loss, optimiser and schedule (`step`), and a run that
//! checkpoints and resumes (`session`), over the examples of `crate::data`. Built on Burn's
//! autodiff, with nothing native-only, so the page can fine-tune with the same code. And the
//! learnt pedal's small network (`pedal`), which only `pianoformer pedal` fits, so it is left
//! out of the page's bundles.

#[cfg(not(target_arch = "wasm32"))]
pub mod pedal;
pub mod session;
pub mod step;

#[cfg(all(test, not(target_arch = "wasm32")))]
pub(crate) mod tests;
