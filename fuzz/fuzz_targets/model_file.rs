//! The page's model-file importer (`.pfmodel`, what "Import a model" reads): the container,
//! the description (its config is checked before anything is allocated) and Burn's weight
//! reader, building the model on the CPU. The bytes go through `unpack_model` as they are;
//! then, as a forger would, the description's `bytes` and `sha256` are set to match the
//! weights, so that mutations get past the checksum to the config checks and the weights.
//! Seed: `PIANOFORMER_MODEL_SEED=fuzz/corpus/model_file cargo test --lib forged_model`.
#![no_main]

use burn::tensor::Device;
use libfuzzer_sys::fuzz_target;
use pianoformer::models::{ModelEntry, load_entry, pack_model, sha256_hex, unpack_model};

fuzz_target!(|data: &[u8]| {
    let device = Device::flex();
    if let Ok((entry, weights)) = unpack_model(data) {
        let _ = load_entry(&entry, &weights, &device);
    }
    // Forged: the checksum made to fit.
    let Some(len) = data.get(8..12) else { return };
    let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
    let Some(json) = 12usize.checked_add(len).and_then(|end| data.get(12..end)) else {
        return;
    };
    let weights = &data[12 + len..];
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(json) else {
        return;
    };
    let Some(fields) = value.as_object_mut() else {
        return;
    };
    fields.insert("bytes".into(), weights.len().into());
    fields.insert("sha256".into(), sha256_hex(weights).into());
    let Ok(entry) = serde_json::from_value::<ModelEntry>(value) else {
        return;
    };
    if let Ok((entry, weights)) = unpack_model(&pack_model(&entry, weights)) {
        let _ = load_entry(&entry, &weights, &device);
    }
});
