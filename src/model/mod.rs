//! The model core, backend-agnostic (CPU, WebGPU, autodiff): feature maps, causal linear and
//! softmax attention, positional encodings, the Performer. Knows nothing of MIDI.

pub mod attention;
pub mod checks;
pub mod config;
pub mod features;
/// The fused WGSL kernel for causal linear attention (`shaders/`), used on wgpu for inference.
#[cfg(feature = "gpu")]
pub mod kernels;
pub mod pe;
pub mod performer;

#[cfg(all(test, not(target_arch = "wasm32")))]
pub(crate) mod testing;

pub(crate) use crate::device::read;

/// What can go wrong building, feeding or loading a model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("the model configuration is not usable: {0}")]
    Config(String),
    #[error("this model reads {expected}, but was given {given}")]
    Input { expected: String, given: String },
    #[error("F-StrIPE needs structure labels (chords, phrases, melody) for every step")]
    MissingLabels,
    #[error("this sequence was started with {started} rows and was given {given}")]
    Batch { started: usize, given: usize },
    #[error("the model weights could not be saved or read: {0}")]
    Weights(String),
    #[error("this is not a usable model file: {0}")]
    File(String),
}

/// The sha256 of `bytes` (a model's weights, a checkpoint), as lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
