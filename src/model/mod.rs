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

/// A tensor's values, read asynchronously (sync reads panic on WebGPU in wasm).
pub(crate) async fn read<const D: usize>(t: burn::tensor::Tensor<D>) -> Result<Vec<f32>, String> {
    t.into_data_async()
        .await
        .map_err(|e| format!("{e:?}"))?
        .convert::<f32>()
        .try_into_vec::<f32>()
        .map_err(|e| format!("{e:?}"))
}

/// The sha256 of `bytes` (a model's weights, a checkpoint), as lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
