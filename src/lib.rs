//! pianoformer: structure-aware Performers for symbolic music, written once with Burn, trained
//! natively and run in the browser on WebGPU (CPU fallback).
//!
//! Layout (see `DESIGN.md` in the shared folder): `device` picks and checks the compute backend;
//! `tune` fine-tunes on a person's files (the page's Fine-tune panel); `web` is the only place with `#[wasm_bindgen]`; the native CLI lives in `src/bin/`.

#[cfg(feature = "ml")]
pub mod device;
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
