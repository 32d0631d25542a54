//! Browser tests: the stack proven in headless Chromium on WebGPU (SwiftShader on machines
//! without a GPU) and on the CPU backend compiled to wasm.
//!
//! Run with `make test-browser` (wasm-pack test --headless --chrome; flags in webdriver.json).
//! WebGPU on SwiftShader compiles kernels per shape and is slow, so these stay few and small.
#![cfg(target_arch = "wasm32")]

use pianoformer::device::{self, BackendKind, Preference, check};
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

/// Fails, rather than falling back to the CPU, when WebGPU is absent.
async fn webgpu() -> device::Backend {
    match device::init(Preference::Gpu).await {
        Ok(backend) => backend,
        Err(e) => panic!("WebGPU is required for this test and is not available: {e}"),
    }
}

#[wasm_bindgen_test]
async fn webgpu_adapter_is_really_used() {
    let backend = webgpu().await;
    let info = &backend.info;
    web_sys::console::log_1(&format!("WebGPU adapter: {info:?}").into());
    assert_eq!(info.kind, BackendKind::Gpu);
    assert_eq!(
        info.api, "BrowserWebGpu",
        "not the browser's WebGPU: {info:?}"
    );
    assert!(info.is_browser_webgpu());
    // And the device actually computes: 1 + 2 + … + 100 through a GPU reduction.
    let t = burn::tensor::Tensor::<1, burn::tensor::Int>::arange(1..101, &backend.device)
        .float()
        .sum();
    let sum: f32 = t.into_scalar_async().await.expect("read back");
    assert_eq!(sum, 5050.0);
}

#[wasm_bindgen_test]
async fn auto_preference_picks_webgpu_when_present() {
    let auto = device::init(Preference::Auto)
        .await
        .expect("auto never fails");
    assert_eq!(auto.info.kind, BackendKind::Gpu, "{:?}", auto.info);
    assert!(auto.info.fallback_reason.is_none());
}

#[wasm_bindgen_test]
async fn webgpu_ops_match_the_cpu_backend() {
    let backend = webgpu().await;
    let report = check::ops_parity(&backend.device).await.expect("ops run");
    web_sys::console::log_1(&format!("WebGPU vs CPU: {report:?}").into());
    assert!(report.matmul <= 1e-4, "matmul differs: {report:?}");
    assert!(report.cumsum <= 1e-4, "cumsum differs: {report:?}");
    assert!(report.softmax <= 1e-4, "softmax differs: {report:?}");
}

#[wasm_bindgen_test]
async fn adam_lowers_the_loss_on_autodiff_webgpu() {
    let backend = webgpu().await;
    let fit = check::adam_fit(&backend.device, 30)
        .await
        .expect("training runs");
    web_sys::console::log_1(&format!("Autodiff<Wgpu> losses: {:?}", fit.losses).into());
    assert!(fit.last() < 0.3 * fit.first(), "{:?}", fit.losses);
}

#[wasm_bindgen_test]
async fn adam_lowers_the_loss_on_autodiff_cpu_in_wasm() {
    let cpu = device::init(Preference::Cpu).await.expect("cpu");
    assert_eq!(cpu.info.kind, BackendKind::Cpu);
    let fit = check::adam_fit(&cpu.device, 30)
        .await
        .expect("training runs");
    assert!(fit.last() < 0.3 * fit.first(), "{:?}", fit.losses);
}

#[wasm_bindgen_test]
async fn webgpu_and_cpu_train_to_the_same_losses() {
    // Same seeded initialisation and data: the trajectories differ only by float rounding.
    let gpu = check::adam_fit(&webgpu().await.device, 5)
        .await
        .expect("gpu");
    let cpu = check::adam_fit(&device::cpu().device, 5)
        .await
        .expect("cpu");
    for (g, c) in gpu.losses.iter().zip(&cpu.losses) {
        assert!(
            (g - c).abs() <= 1e-3 * c.abs().max(1.0),
            "{gpu:?} vs {cpu:?}"
        );
    }
}

/// The model core on WebGPU: the parallel and the recurrent forms agree for the encodings
/// that act on attention (gated, one shared draw), with either feature map, and gradients
/// reach every positional parameter through `Autodiff<Wgpu>`.
#[wasm_bindgen_test]
async fn performer_forms_agree_and_positional_parameters_learn_on_webgpu() {
    use pianoformer::model::checks::{parallel_vs_recurrent, positional_gradients};
    use pianoformer::model::features::FeatureKind;
    use pianoformer::model::pe::{PeConfig, PeKind, StructureLevel};
    let backend = webgpu().await;
    for (kind, features) in [
        (PeKind::SineSpe, FeatureKind::Favor),
        (PeKind::ConvSpe, FeatureKind::Relu),
        (PeKind::Fstripe, FeatureKind::Favor),
    ] {
        let pe = PeConfig::new(kind)
            .with_gate(true)
            .with_levels(&[StructureLevel::Melody, StructureLevel::Chord]);
        let diff = parallel_vs_recurrent(&pe, features, 6, &backend.device)
            .await
            .expect("runs");
        web_sys::console::log_1(&format!("{kind:?}: parallel vs recurrent {diff:e}").into());
        assert!(diff < 1e-4, "{kind:?}: {diff}");
        let grads = positional_gradients(&pe, &backend.device)
            .await
            .expect("trains");
        web_sys::console::log_1(&format!("{kind:?}: gradients {grads:?}").into());
        assert!(!grads.is_empty());
        for (name, size) in grads {
            assert!(
                size > 0.0 && size.is_finite(),
                "{kind:?}: {name} gradient {size}"
            );
        }
    }
}

/// The same check on the CPU backend compiled to wasm, for every encoding and feature map.
#[wasm_bindgen_test]
async fn performer_forms_agree_on_the_cpu_in_wasm() {
    use pianoformer::model::checks::parallel_vs_recurrent;
    use pianoformer::model::features::FeatureKind;
    use pianoformer::model::pe::{PeConfig, PeKind};
    let cpu = device::init(Preference::Cpu).await.expect("cpu");
    for kind in [
        PeKind::None,
        PeKind::Ape,
        PeKind::Cape,
        PeKind::SineSpe,
        PeKind::ConvSpe,
        PeKind::Fstripe,
        PeKind::FstripeSff,
    ] {
        for features in [FeatureKind::Favor, FeatureKind::Relu] {
            let pe = PeConfig::new(kind).with_gate(true);
            let diff = parallel_vs_recurrent(&pe, features, 7, &cpu.device)
                .await
                .expect("runs");
            assert!(diff < 1e-4, "{kind:?} {features:?}: {diff}");
        }
    }
}
