//! The model core, backend-agnostic (CPU, WebGPU, autodiff): feature maps, causal linear and
//! softmax attention, positional encodings, the Performer. Knows nothing of MIDI.

pub mod attention;
pub mod features;
pub mod pe;

#[cfg(all(test, not(target_arch = "wasm32")))]
pub(crate) mod testing;
