//! pianoformer: structure-aware Performers for symbolic music, written once with Burn, trained
//! natively and run in the browser on WebGPU (CPU fallback).
//!
//! Layout (`reports/code.md` walks it file by file): `music` (no tensors) reads and writes the
//! music; `model` holds the Performer and its positional encodings (`model::pe::family`);
//! `data`, `train` and `generate` feed, train and sample it; `eval` measures it; `studio` is what
//! the page and the CLI do with a piece and a model, one row of its task table per generation
//! task (`studio::family`); `device` picks and checks the compute backend; `tune` fine-tunes on
//! a person's files (the page's Fine-tune panel); `web` is the only place with
//! `#[wasm_bindgen]`; the native CLI lives in `src/bin/`.

#[cfg(feature = "ml")]
pub mod data;
#[cfg(feature = "ml")]
pub mod device;
#[cfg(feature = "ml")]
pub mod eval;
#[cfg(feature = "ml")]
pub mod generate;
#[cfg(feature = "ml")]
pub mod model;
#[cfg(feature = "ml")]
pub mod models;
pub mod music;
#[cfg(feature = "ml")]
pub mod studio;
#[cfg(feature = "ml")]
pub mod train;
#[cfg(feature = "ml")]
pub mod tune;

#[cfg(all(target_arch = "wasm32", feature = "ml"))]
pub mod web;

/// For tests that cannot run where they are (no POP909, no GPU): says why on stderr and, when
/// `PIANOFORMER_SKIP_LOG` names a file (`make test-native` sets it), appends `test: why` to it,
/// so the run ends by listing every test that checked nothing.
#[doc(hidden)]
#[cfg(not(target_arch = "wasm32"))]
pub fn note_skipped_test(why: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    eprintln!("SKIPPED {test}: {why}");
    if let Some(path) = std::env::var_os("PIANOFORMER_SKIP_LOG") {
        use std::io::Write as _;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{test}: {why}");
        }
    }
}
