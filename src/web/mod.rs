//! The JavaScript-facing API, used by the page's Web Worker (`www/worker.js`). Errors become
//! `JsError`s with a plain sentence here and nowhere else.

use wasm_bindgen::prelude::*;

use crate::device::{self, Backend, Preference};

#[wasm_bindgen(start)]
fn start() {
    console_error_panic_hook::set_once();
}

/// One model session in a Worker: the backend it runs on and, later, the loaded models.
#[wasm_bindgen]
pub struct Session {
    backend: Backend,
}

#[wasm_bindgen]
impl Session {
    /// Starts a session on `preference` (`"auto"`, `"gpu"` or `"cpu"`). `"auto"` falls back to
    /// the CPU when WebGPU is missing and says why in `backend().fallback_reason`.
    pub async fn create(preference: String) -> Result<Session, JsError> {
        let preference: Preference = preference.parse().map_err(to_js)?;
        let backend = device::init(preference).await.map_err(to_js)?;
        Ok(Session { backend })
    }

    /// `{kind, api, adapter, device_type, fallback_reason, label}` of the backend in use.
    pub fn backend(&self) -> Result<JsValue, JsError> {
        let info = &self.backend.info;
        let value = serde_wasm_bindgen::to_value(info).map_err(to_js)?;
        js_sys::Reflect::set(&value, &"label".into(), &info.label().into())
            .map_err(|_| JsError::new("could not describe the backend"))?;
        Ok(value)
    }

    /// Runs the backend self-check (ops against the CPU reference, a few Adam steps) and returns
    /// `{ops: {matmul, cumsum, softmax}, fit: {losses}}`.
    #[wasm_bindgen(js_name = selfCheck)]
    pub async fn self_check(&self) -> Result<JsValue, JsError> {
        let report = device::check::self_check(&self.backend.device)
            .await
            .map_err(to_js)?;
        serde_wasm_bindgen::to_value(&report).map_err(to_js)
    }
}

fn to_js(e: impl std::fmt::Display) -> JsError {
    JsError::new(&e.to_string())
}
