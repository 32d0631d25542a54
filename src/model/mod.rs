//! The model core, backend-agnostic (CPU, WebGPU, autodiff): feature maps, causal linear and
//! softmax attention, positional encodings, the Performer. Knows nothing of MIDI.

pub mod attention;
pub mod checks;
pub mod config;
pub mod features;
/// The fused WGSL kernel for causal linear attention (`shaders/`), used on wgpu for inference.
pub mod kernels;
pub mod pe;
pub mod performer;

#[cfg(all(test, not(target_arch = "wasm32")))]
pub(crate) mod testing;
