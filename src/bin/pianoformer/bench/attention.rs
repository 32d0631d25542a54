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
    use pianoformer::device::{self, Preference};
    use pianoformer::model::config::PerformerConfig;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    let preference: Preference = options.backend.parse().map_err(|e| format!("{e}"))?;
    let backend = pollster::block_on(device::init(preference)).map_err(|e| format!("{e}"))?;
    let config = PerformerConfig::bench();
    let dims = Dims {
        heads: config.heads,
        features: config.features,
        d_head: config.d_head,
        chunk: config.chunk,
    };
    let mut rng = StdRng::seed_from_u64(0);
    let mut rows = Vec::new();
    for &len in &options.positions {
        let row = gpu::measure(len, &dims, options.steps.max(1), &mut rng, &backend.device)
            .map_err(|e| {
                e.unwrap_or_else(|| {
                    format!(
                        "the fused kernel does not run on {} (it needs --backend gpu)",
                        backend.info.label()
                    )
                })
            })?;
        rows.push(row);
    }
    if options.json {
        let value = serde_json::json!({
            "backend": backend.info,
            "batch": 1, "heads": dims.heads, "features": dims.features, "d_head": dims.d_head,
            "chunk": dims.chunk,
            "lengths": rows.iter().map(|r| r.len).collect::<Vec<_>>(),
            "generic_ms": rows.iter().map(|r| r.generic_ms).collect::<Vec<_>>(),
            "fused_ms": rows.iter().map(|r| r.fused_ms).collect::<Vec<_>>(),
            "generic_pool_growth_mib": rows.iter().map(|r| r.generic_mib).collect::<Vec<_>>(),
            "fused_pool_growth_mib": rows.iter().map(|r| r.fused_mib).collect::<Vec<_>>(),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    println!(
        "attention, {}: causal linear attention, batch 1 × {} heads, {} features, {} per \
         head (generic: chunks of {}); median of {} runs",
        backend.info.label(),
        dims.heads,
        dims.features,
        dims.d_head,
        dims.chunk,
        options.steps.max(1)
    );
    println!(
        "{:<10}{:>12}{:>12}{:>10}{:>20}{:>20}",
        "length", "generic ms", "fused ms", "speedup", "generic pool MiB", "fused pool MiB"
    );
    let mib = |x: &Option<f64>| x.map_or("?".to_string(), |v| format!("{v:.1}"));
    for r in &rows {
        println!(
            "{:<10}{:>12.2}{:>12.2}{:>10.2}{:>20}{:>20}",
            r.len,
            r.generic_ms,
            r.fused_ms,
            r.generic_ms / r.fused_ms,
            mib(&r.generic_mib),
            mib(&r.fused_mib)
        );
    }
    Ok(())
}

/// The attention's sizes (batch 1).
#[cfg(feature = "gpu")]
struct Dims {
    heads: usize,
    features: usize,
    d_head: usize,
    chunk: usize,
}

/// One length's timings (median ms) and memory-pool growth (MiB) of both forms.
#[cfg(feature = "gpu")]
struct Row {
    len: usize,
    generic_ms: f64,
    fused_ms: f64,
    generic_mib: Option<f64>,
    fused_mib: Option<f64>,
}

#[cfg(feature = "gpu")]
mod gpu {
    use std::time::Instant;

    use burn::tensor::{Device, Tensor, TensorData};
    use pianoformer::model::attention::{LinearState, causal_linear};
    use pianoformer::model::kernels::{causal_linear_fused, gpu_memory, gpu_memory_cleanup};
    use rand::RngExt;
    use rand::rngs::StdRng;

    use super::{Dims, Row};

    /// Both forms at `len` on random features and values: checked against each other, then
    /// timed (median of `steps` after a warm-up) and their pool growth measured. `Err(None)`
    /// when the fused kernel does not run on `device`.
    pub(super) fn measure(
        len: usize,
        d: &Dims,
        steps: usize,
        rng: &mut StdRng,
        device: &Device,
    ) -> Result<Row, Option<String>> {
        let (b, h, m, dv) = (1, d.heads, d.features, d.d_head);
        let mut uniform = |shape: [usize; 4], low: f32| -> Tensor<4> {
            let values: Vec<f32> = (0..shape.iter().product::<usize>())
                .map(|_| low + rng.random::<f32>())
                .collect();
            Tensor::from_data(TensorData::new(values, shape.to_vec()), device)
        };
        // Features in [0, 1), values in [-0.5, 0.5), a fresh state.
        let phi_q = uniform([b, h, len, m], 0.0);
        let phi_k = uniform([b, h, len, m], 0.0);
        let v = uniform([b, h, len, dv], -0.5);
        let state = LinearState::zeros(b, h, m, dv, device);
        if causal_linear_fused(&phi_q, &phi_k, &v, &state).is_none() {
            return Err(None);
        }
        let generic = || {
            causal_linear(
                phi_q.clone(),
                phi_k.clone(),
                v.clone(),
                d.chunk,
                state.clone(),
            )
        };
        let fused = || causal_linear_fused(&phi_q, &phi_k, &v, &state).expect("checked above");
        let median_ms = |run: &dyn Fn() -> (Tensor<4>, LinearState)| -> f64 {
            wait(run()); // warm-up: pipeline compilation, pool growth
            let mut times: Vec<f64> = (0..steps)
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
        let diff = max_diff(generic().0, fused().0);
        if diff.is_nan() || diff > 1e-3 {
            return Err(Some(format!(
                "at length {len} the fused kernel's output is {diff} from the generic one's"
            )));
        }
        Ok(Row {
            len,
            generic_ms: median_ms(&generic),
            fused_ms: median_ms(&fused),
            generic_mib: growth_mib(&generic),
            fused_mib: growth_mib(&fused),
        })
    }

    /// Waits for `run`'s kernels: a read waits for every kernel enqueued before it.
    fn wait((out, next): (Tensor<4>, LinearState)) {
        let len = out.dims()[2];
        let _ = out.narrow(2, len - 1, 1).into_data();
        let _ = next.z.into_data();
    }

    /// The largest difference between two outputs (infinite when their sizes differ).
    fn max_diff(a: Tensor<4>, b: Tensor<4>) -> f32 {
        let read = |t: Tensor<4>| t.into_data().try_to_vec::<f32>().unwrap_or_default();
        let (a, b) = (read(a), read(b));
        let start = if a.len() == b.len() {
            0.0
        } else {
            f32::INFINITY
        };
        a.iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(start, f32::max)
    }
}
