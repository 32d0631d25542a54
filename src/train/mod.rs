//! Training: examples from songs (`data`), the training step with its loss, optimiser and
//! schedule (`step`). Built on Burn's autodiff, with nothing native-only, so the page can
//! fine-tune with the same code.

pub mod corpus;
pub mod data;
pub mod eval;
pub mod panel;
pub mod sampled;
pub mod session;
#[cfg(not(target_arch = "wasm32"))]
pub mod sources;
pub mod step;

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
