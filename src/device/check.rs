//! Backend self-check: proves that a device computes what the CPU reference computes and that
//! it can train (autodiff + Adam), before a model is trusted to it.
//!
//! The page runs it when its Worker starts (the backend badge shows the result), the CLI runs
//! it with `pianoformer check`, and the browser tests assert on it on WebGPU. It reads tensors
//! only with `into_data_async`, since synchronous reads panic on WebGPU in wasm.

use burn::module::{Module, Param};
use burn::nn::{Linear, LinearConfig};
use burn::optim::{AdamConfig, GradientsParams};
use burn::tensor::activation::{gelu, softmax};
use burn::tensor::{Device, Tensor, TensorData};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::Serialize;

/// Largest absolute difference between the device and the CPU backend, per operation.
#[derive(Clone, Debug, Serialize)]
pub struct OpsReport {
    pub matmul: f32,
    pub cumsum: f32,
    pub softmax: f32,
}

impl OpsReport {
    pub fn max(&self) -> f32 {
        self.matmul.max(self.cumsum).max(self.softmax)
    }
}

/// Loss after each Adam step of [`adam_fit`], the first entry being the loss before training.
#[derive(Clone, Debug, Serialize)]
pub struct FitReport {
    pub losses: Vec<f32>,
}

impl FitReport {
    pub fn first(&self) -> f32 {
        self.losses.first().copied().unwrap_or(f32::NAN)
    }
    pub fn last(&self) -> f32 {
        self.losses.last().copied().unwrap_or(f32::NAN)
    }
}

/// Both checks together, as the page shows them (with, on WebGPU, the fused steps' check:
/// `generate::check`).
#[derive(Clone, Debug, Serialize)]
pub struct SelfCheck {
    pub ops: OpsReport,
    pub fit: FitReport,
}

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("reading a result back from the device failed: {0}")]
    Read(String),
    #[error("the device returned a non-finite value in {0}")]
    NonFinite(&'static str),
}

/// Reproducible inputs, generated on the host so both devices see the same numbers.
fn uniform(rng: &mut StdRng, shape: &[usize], scale: f32) -> TensorData {
    let n = shape.iter().product();
    let values: Vec<f32> = (0..n)
        .map(|_| (rng.random::<f32>() * 2.0 - 1.0) * scale)
        .collect();
    TensorData::new(values, shape.to_vec())
}

async fn read<const D: usize>(t: Tensor<D>) -> Result<Vec<f32>, CheckError> {
    super::read(t).await.map_err(CheckError::Read)
}

async fn max_abs_diff<const D: usize>(
    name: &'static str,
    a: Tensor<D>,
    b: Tensor<D>,
) -> Result<f32, CheckError> {
    let (a, b) = (read(a).await?, read(b).await?);
    let mut worst = 0f32;
    for (x, y) in a.iter().zip(&b) {
        if !x.is_finite() || !y.is_finite() {
            return Err(CheckError::NonFinite(name));
        }
        worst = worst.max((x - y).abs());
    }
    Ok(worst)
}

/// Runs a batched matmul, a long cumulative sum and a softmax over large logits on `device` and
/// on the CPU backend, and reports how far apart they are. Odd sizes on purpose: they exercise
/// the edges of tiled GPU kernels.
pub async fn ops_parity(device: &Device) -> Result<OpsReport, CheckError> {
    let cpu = Device::flex();
    let mut rng = StdRng::seed_from_u64(0x9e37_79b9);

    // Shape: [batch 2, 33, 17] x [2, 17, 29] -> [2, 33, 29]
    let a = uniform(&mut rng, &[2, 33, 17], 1.0);
    let b = uniform(&mut rng, &[2, 17, 29], 1.0);
    let on = |d: &Device| {
        Tensor::<3>::from_data(a.clone(), d).matmul(Tensor::<3>::from_data(b.clone(), d))
    };
    let matmul = max_abs_diff("matmul", on(device), on(&cpu)).await?;

    // Shape: [3, 257, 8], summed along the 257 axis (the sequence axis of linear attention).
    let c = uniform(&mut rng, &[3, 257, 8], 1.0);
    let on = |d: &Device| Tensor::<3>::from_data(c.clone(), d).cumsum(1);
    let cumsum = max_abs_diff("cumsum", on(device), on(&cpu)).await?;

    // Shape: [4, 65], logits up to ±30 so an unstabilised softmax would overflow.
    let s = uniform(&mut rng, &[4, 65], 30.0);
    let on = |d: &Device| softmax(Tensor::<2>::from_data(s.clone(), d), 1);
    let softmax = max_abs_diff("softmax", on(device), on(&cpu)).await?;

    Ok(OpsReport {
        matmul,
        cumsum,
        softmax,
    })
}

/// A two-layer perceptron, the smallest thing with the shape of a Transformer feed-forward.
#[derive(Module, Debug)]
struct Mlp {
    hidden: Linear,
    out: Linear,
}

/// A linear layer initialised from `rng` rather than the backend's global generator, so that
/// concurrent runs (tests) cannot perturb each other's draws.
fn seeded_linear(rng: &mut StdRng, d_in: usize, d_out: usize, device: &Device) -> Linear {
    let bound = 1.0 / (d_in as f32).sqrt();
    let mut layer = LinearConfig::new(d_in, d_out).init(device);
    layer.weight = Param::from_data(uniform(rng, &[d_in, d_out], bound), device);
    layer.bias = Some(Param::from_data(uniform(rng, &[d_out], bound), device));
    layer
}

impl Mlp {
    fn new(rng: &mut StdRng, d_in: usize, d_hidden: usize, device: &Device) -> Self {
        Self {
            hidden: seeded_linear(rng, d_in, d_hidden, device),
            out: seeded_linear(rng, d_hidden, 1, device),
        }
    }

    /// Shape: [batch, d_in] -> [batch, 1]
    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.out.forward(gelu(self.hidden.forward(x)))
    }
}

/// Fits a small MLP to a fixed smooth target with `steps` Adam steps on `device.autodiff()`
/// and returns the loss trajectory. Initialisation is seeded, so a run is reproducible on one
/// backend; different backends differ only by float rounding.
pub async fn adam_fit(device: &Device, steps: usize) -> Result<FitReport, CheckError> {
    const BATCH: usize = 64;
    const D_IN: usize = 4;
    let device = device.clone().autodiff();
    let mut rng = StdRng::seed_from_u64(11);
    let x_data = uniform(&mut rng, &[BATCH, D_IN], 1.0);
    // Target: y = sin(2 x0) + x1 * x2 - 0.5 x3, learnable by a 32-unit MLP in a few dozen steps.
    let xs = x_data.try_to_vec::<f32>().expect("generated as f32");
    let ys: Vec<f32> = xs
        .chunks(D_IN)
        .map(|r| (2.0 * r[0]).sin() + r[1] * r[2] - 0.5 * r[3])
        .collect();
    let x = Tensor::<2>::from_data(x_data, &device);
    let y = Tensor::<2>::from_data(TensorData::new(ys, vec![BATCH, 1]), &device);

    let mut model = Mlp::new(&mut rng, D_IN, 32, &device);
    let mut optim = AdamConfig::new().init();
    let mut losses = Vec::with_capacity(steps + 1);
    for step in 0..=steps {
        let loss = (model.forward(x.clone()) - y.clone()).square().mean();
        losses.push(
            read(loss.clone().detach())
                .await?
                .first()
                .copied()
                .filter(|v| v.is_finite())
                .ok_or(CheckError::NonFinite("the training loss"))?,
        );
        if step == steps {
            break;
        }
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(3e-2, model, grads);
    }
    Ok(FitReport { losses })
}

/// Both checks, with the default number of steps.
pub async fn self_check(device: &Device) -> Result<SelfCheck, CheckError> {
    Ok(SelfCheck {
        ops: ops_parity(device).await?,
        fit: adam_fit(device, 30).await?,
    })
}

// Natively only: the browser runs the same checks on WebGPU and the CPU in tests/web.rs.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    use pollster::block_on;

    #[test]
    fn cpu_agrees_with_itself() {
        let report = block_on(ops_parity(&Device::flex())).unwrap();
        assert!(report.max() <= 1e-6, "{report:?}");
    }

    #[test]
    fn adam_lowers_the_loss_on_autodiff_cpu() {
        let fit = block_on(adam_fit(&Device::flex(), 30)).unwrap();
        assert_eq!(fit.losses.len(), 31);
        assert!(
            fit.last() < 0.3 * fit.first(),
            "loss went {} -> {}",
            fit.first(),
            fit.last()
        );
    }

    #[test]
    fn seeded_fits_are_reproducible() {
        let a = block_on(adam_fit(&Device::flex(), 3)).unwrap();
        let b = block_on(adam_fit(&Device::flex(), 3)).unwrap();
        assert_eq!(a.losses, b.losses);
    }
}
