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
    for kind in PeKind::ALL {
        for features in [FeatureKind::Favor, FeatureKind::Relu] {
            let pe = PeConfig::new(*kind).with_gate(true);
            let diff = parallel_vs_recurrent(&pe, features, 7, &cpu.device)
                .await
                .expect("runs");
            assert!(diff < 1e-4, "{kind:?} {features:?}: {diff}");
        }
    }
}

/// Fine-tuning in the browser on WebGPU: 30 steps of a tiny model on two small songs made by
/// the project's own code lower the training loss clearly, and the fine-tuned weights, read
/// asynchronously and loaded back, give the same outputs.
#[wasm_bindgen_test]
async fn fine_tuning_lowers_the_loss_and_an_exported_model_reloads_on_webgpu() {
    use burn::tensor::{Tensor, TensorData};
    use pianoformer::model::config::{PerformerConfig, Task};
    use pianoformer::model::pe::{PeConfig, PeKind};
    use pianoformer::model::performer::{Inputs, Performer};
    use pianoformer::models::{ModelEntry, pack_model, sha256_hex, unpack_model};
    use pianoformer::music::fixtures;
    use pianoformer::music::piece::Piece;
    use pianoformer::music::tokens::VOCAB_SIZE;
    use pianoformer::tune::{FineTune, TuneOptions};

    let backend = webgpu().await;
    let config = PerformerConfig::tiny(
        Task::Accompaniment,
        VOCAB_SIZE,
        PeConfig::new(PeKind::SineSpe).with_gate(true),
    );
    let base = Performer::new(&config, 3, &backend.device.clone().autodiff()).unwrap();
    let pieces: Vec<Piece> = [0u8, 5]
        .iter()
        .map(|&k| Piece::from_song(&fixtures::song(k, 12), &format!("song{k}.mid")).unwrap())
        .collect();
    let options = TuneOptions {
        steps: 30,
        learning_rate: 3e-3,
        batch: 2,
        window: 64,
        eval_every: 30,
        ..TuneOptions::default()
    };
    let mut run = FineTune::new(base, &pieces, &options).expect("a run starts");
    let before = run.validate().await.unwrap().expect("held-out bars");
    let mut losses = Vec::new();
    while !run.is_done() {
        losses.push(run.train_step().await.expect("a step").loss);
    }
    let after = run.valid_losses.last().unwrap().1;
    web_sys::console::log_1(
        &format!("fine-tuning on WebGPU: {losses:?}; held out {before} -> {after}").into(),
    );
    let head: f32 = losses[..5].iter().sum::<f32>() / 5.0;
    let tail: f32 = losses[25..].iter().sum::<f32>() / 5.0;
    assert!(tail < 0.8 * head, "training loss {head} -> {tail}");
    assert!(after < before, "held-out loss {before} -> {after}");

    // Export as the page does (async reads, a model file) and load it back for inference.
    let weights = run.model().to_bytes_async().await.expect("weights read");
    let entry = ModelEntry {
        name: "mine".into(),
        file: "mine.bpk".into(),
        task: config.task,
        pe: "sine_spe".into(),
        description: String::new(),
        default: false,
        config: config.clone(),
        parameters: run.model().parameters(),
        bytes: weights.len(),
        sha256: sha256_hex(&weights),
        training: serde_json::Value::Null,
        metrics: serde_json::Value::Null,
        defaults: Default::default(),
    };
    let (entry, read) = unpack_model(&pack_model(&entry, &weights)).expect("the file reads");
    let reloaded =
        pianoformer::models::load_entry(&entry, &read, &backend.device).expect("it loads");
    assert_eq!(reloaded.to_bytes_async().await.unwrap(), weights);
    let input = |device: &burn::tensor::Device| {
        let values: Vec<f32> = (0..32 * config.input_dim)
            .map(|i| ((i * 7919) % 13 == 0) as u8 as f32)
            .collect();
        Tensor::<3>::from_data(
            TensorData::new(values, vec![1, 32, config.input_dim]),
            device,
        )
    };
    let out = |m: &Performer, device: &burn::tensor::Device| {
        let mut state = m.start(9, false, device);
        m.forward(Inputs::Rolls(input(device)), None, &mut state, None)
            .unwrap()
    };
    let tuned = out(run.model(), &backend.device.clone().autodiff());
    // The same arithmetic on both sides: autodiff tensors always take the generic attention,
    // so the reloaded model does too here (the fused kernel has its own parity test).
    pianoformer::model::kernels::set_fused(false);
    let again = out(&reloaded, &backend.device);
    pianoformer::model::kernels::set_fused(true);
    let a = tuned
        .into_data_async()
        .await
        .unwrap()
        .try_to_vec::<f32>()
        .unwrap();
    let b = again
        .into_data_async()
        .await
        .unwrap()
        .try_to_vec::<f32>()
        .unwrap();
    let diff = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    assert_eq!(a.len(), b.len());
    assert!(diff <= 1e-5, "outputs differ by {diff}");
}

/// The fused causal-linear-attention kernel (shaders/causal_dot_product.wgsl) agrees with the
/// generic `causal_linear` on WebGPU, outputs and final state, from a random non-zero state, at
/// a length that is no multiple of the reference's chunk (64) nor of the workgroup.
#[wasm_bindgen_test]
async fn fused_causal_linear_matches_the_reference_on_webgpu() {
    use pianoformer::model::kernels::fused_parity;
    let backend = webgpu().await;
    // b = 2, h = 3, L = 300, m = 32, d_v = 16.
    let parity = fused_parity(&backend.device, (2, 3, 300, 32, 16), 7)
        .await
        .expect("the fused kernel runs on WebGPU");
    web_sys::console::log_1(
        &format!("fused vs generic causal linear attention on WebGPU: {parity:?}").into(),
    );
    assert!(parity.worst() <= 1e-4, "{parity:?}");
}

/// On the CPU backend in wasm the kernel declines (no wgpu tensors): the generic path is used.
#[wasm_bindgen_test]
async fn fused_causal_linear_declines_on_the_cpu_in_wasm() {
    use pianoformer::model::kernels::fused_parity;
    let cpu = device::init(Preference::Cpu).await.expect("cpu");
    assert!(fused_parity(&cpu.device, (1, 1, 5, 4, 3), 1).await.is_err());
}

/// The fused steps on the browser's WebGPU (issue 35; `shaders/performer_step.wgsl`), as the
/// page's self-check runs them: the same music as tensor ops for a seed — 16 continuation
/// tokens run ahead on the GPU (one read-back, every GPU draw the host's) and a thresholded
/// bar of accompaniment — so they stay on.
#[wasm_bindgen_test]
async fn fused_steps_write_what_tensor_ops_write_on_webgpu() {
    use pianoformer::generate::{check, fused};
    let backend = webgpu().await;
    let report = check::fused_steps(&backend.device)
        .await
        .expect("the check runs")
        .expect("checked on WebGPU");
    web_sys::console::log_1(&format!("fused steps on WebGPU: {report:?}").into());
    assert!(
        report.tokens_agree && report.steps_agree && report.on,
        "{report:?}"
    );
    assert_eq!((report.read_backs, report.overridden), (1, 0), "{report:?}");
    assert!(fused::enabled());
}
