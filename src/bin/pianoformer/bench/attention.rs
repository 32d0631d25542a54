//! `pianoformer bench attention`: the fused causal-linear-attention kernel against the generic
//! tensor ops, with the kernel's numbers checked against the reference at each length.

use super::Options;

/// `bench attention`: causal linear attention alone at the bench model's size (batch 1, 4
/// heads, 128 features, 64 per head, chunks of 128): the fused WGSL kernel
/// (`shaders/causal_dot_product.wgsl`) against the generic tensor ops (`causal_linear`), for
/// each length in `--positions` (e.g. `--positions 1024,4096`), on the GPU (`--backend gpu`).
/// Median ms over `--steps` runs after a warm-up, and how much the device's memory pools grew
/// over one run from a cleaned-up start.
#[cfg(not(feature = "gpu"))]
pub(super) fn attention(_: &Options) -> Result<(), String> {
    Err("this build has no GPU backend: build with the `gpu` feature (the default)".into())
}

#[cfg(feature = "gpu")]
pub(super) fn attention(options: &Options) -> Result<(), String> {
    use std::time::Instant;

    use burn::tensor::{Tensor, TensorData};
    use pianoformer::device::{self, Preference};
    use pianoformer::model::attention::{LinearState, causal_linear};
    use pianoformer::model::config::PerformerConfig;
    use pianoformer::model::kernels::{causal_linear_fused, gpu_memory, gpu_memory_cleanup};
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    let preference: Preference = options.backend.parse().map_err(|e| format!("{e}"))?;
    let backend = pollster::block_on(device::init(preference)).map_err(|e| format!("{e}"))?;
    let device = backend.device.clone();
    let config = PerformerConfig::bench();
    let (b, h, m, dv, chunk) = (
        1,
        config.heads,
        config.features,
        config.d_head,
        config.chunk,
    );
    let mut rng = StdRng::seed_from_u64(0);
    let mut rows = Vec::new();
    for &len in &options.positions {
        let mut uniform = |shape: [usize; 4], low: f32| -> Tensor<4> {
            let values: Vec<f32> = (0..shape.iter().product::<usize>())
                .map(|_| low + rng.random::<f32>())
                .collect();
            Tensor::from_data(TensorData::new(values, shape.to_vec()), &device)
        };
        // Features in [0, 1), values in [-0.5, 0.5), a fresh state.
        let phi_q = uniform([b, h, len, m], 0.0);
        let phi_k = uniform([b, h, len, m], 0.0);
        let v = uniform([b, h, len, dv], -0.5);
        let state = LinearState::zeros(b, h, m, dv, &device);
        if causal_linear_fused(&phi_q, &phi_k, &v, &state).is_none() {
            return Err(format!(
                "the fused kernel does not run on {} (it needs --backend gpu)",
                backend.info.label()
            ));
        }
        let generic = || {
            causal_linear(
                phi_q.clone(),
                phi_k.clone(),
                v.clone(),
                chunk,
                state.clone(),
            )
        };
        let fused = || causal_linear_fused(&phi_q, &phi_k, &v, &state).expect("checked above");
        // A read waits for every kernel enqueued before it.
        let wait = |(out, next): (Tensor<4>, LinearState)| {
            let _ = out.narrow(2, len - 1, 1).into_data();
            let _ = next.z.into_data();
        };
        let median_ms = |run: &dyn Fn() -> (Tensor<4>, LinearState)| -> f64 {
            wait(run()); // warm-up: pipeline compilation, pool growth
            let mut times: Vec<f64> = (0..options.steps.max(1))
                .map(|_| {
                    let started = Instant::now();
                    wait(run());
                    started.elapsed().as_secs_f64() * 1e3
                })
                .collect();
            times.sort_by(f64::total_cmp);
            times[times.len() / 2]
        };
        // MiB the pools grew by over one run (pages reserved), from a cleaned-up start.
        let growth_mib = |run: &dyn Fn() -> (Tensor<4>, LinearState)| -> Option<f64> {
            gpu_memory_cleanup(&phi_q);
            let (_, before) = gpu_memory(&phi_q)?;
            wait(run());
            let (_, after) = gpu_memory(&phi_q)?;
            Some(after.saturating_sub(before) as f64 / (1024.0 * 1024.0))
        };
        // The two must agree: a timing of a kernel that did not run would be no timing.
        let read = |t: Tensor<4>| t.into_data().try_to_vec::<f32>().unwrap_or_default();
        let (g, f) = (read(generic().0), read(fused().0));
        let diff = g.iter().zip(&f).map(|(a, b)| (a - b).abs()).fold(
            if g.len() == f.len() {
                0.0
            } else {
                f32::INFINITY
            },
            f32::max,
        );
        if diff.is_nan() || diff > 1e-3 {
            return Err(format!(
                "at length {len} the fused kernel's output is {diff} from the generic one's"
            ));
        }
        let (generic_ms, fused_ms) = (median_ms(&generic), median_ms(&fused));
        let (generic_mib, fused_mib) = (growth_mib(&generic), growth_mib(&fused));
        rows.push((len, generic_ms, fused_ms, generic_mib, fused_mib));
    }
    if options.json {
        let value = serde_json::json!({
            "backend": backend.info,
            "batch": b, "heads": h, "features": m, "d_head": dv, "chunk": chunk,
            "lengths": rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            "generic_ms": rows.iter().map(|r| r.1).collect::<Vec<_>>(),
            "fused_ms": rows.iter().map(|r| r.2).collect::<Vec<_>>(),
            "generic_pool_growth_mib": rows.iter().map(|r| r.3).collect::<Vec<_>>(),
            "fused_pool_growth_mib": rows.iter().map(|r| r.4).collect::<Vec<_>>(),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    println!(
        "attention, {}: causal linear attention, batch {b} × {h} heads, {m} features, {dv} per \
         head (generic: chunks of {chunk}); median of {} runs",
        backend.info.label(),
        options.steps.max(1)
    );
    println!(
        "{:<10}{:>12}{:>12}{:>10}{:>20}{:>20}",
        "length", "generic ms", "fused ms", "speedup", "generic pool MiB", "fused pool MiB"
    );
    let mib = |x: &Option<f64>| x.map_or("?".to_string(), |v| format!("{v:.1}"));
    for (len, g, f, gm, fm) in &rows {
        println!(
            "{len:<10}{g:>12.2}{f:>12.2}{:>10.2}{:>20}{:>20}",
            g / f,
            mib(gm),
            mib(fm)
        );
    }
    Ok(())
}
