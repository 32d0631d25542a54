//! Model checks that run on any device, reading results asynchronously: the browser tests run
//! them on WebGPU (and the CPU backend in wasm), the native tests on the CPU.

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{Device, Int, Tensor, TensorData};

use super::config::{PerformerConfig, Task};
use super::features::FeatureKind;
use super::pe::PeConfig;
use super::performer::{Inputs, Performer};

const VOCAB: usize = 20;

use super::read;

fn tokens(len: usize, device: &Device) -> Tensor<2, Int> {
    let ids: Vec<i64> = (0..len).map(|i| ((i * 7 + 3) % VOCAB) as i64).collect();
    Tensor::from_data(TensorData::new(ids, vec![1, len]), device)
}

fn labels(config: &PerformerConfig, len: usize, device: &Device) -> Option<Tensor<3>> {
    config.pe.is_structural().then(|| {
        let c = config.pe.coordinates();
        let v: Vec<f32> = (0..len * c).map(|i| ((i * 5) % 7) as f32).collect();
        Tensor::from_data(TensorData::new(v, vec![1, len, c]), device)
    })
}

/// Largest difference between the logits of a tiny continuation model run over `len` tokens at
/// once (the parallel form, in chunks of 4) and token by token (the recurrent form).
pub async fn parallel_vs_recurrent(
    pe: &PeConfig,
    features: FeatureKind,
    len: usize,
    device: &Device,
) -> Result<f32, String> {
    let mut config = PerformerConfig::tiny_sized(Task::Continuation, VOCAB, VOCAB, pe.clone());
    config.chunk = 4;
    config.feature_kind = features;
    let model = Performer::new(&config, 1, device).map_err(|e| e.to_string())?;
    let toks = tokens(len, device);
    let labs = labels(&config, len, device);
    let mut state = model.start(9, false, device);
    let whole = model
        .forward(Inputs::Tokens(toks.clone()), labs.clone(), &mut state, None)
        .map_err(|e| e.to_string())?;
    let mut state = model.start(9, false, device);
    let mut steps = Vec::new();
    for t in 0..len {
        let out = model
            .forward(
                Inputs::Tokens(toks.clone().narrow(1, t, 1)),
                labs.clone().map(|l| l.narrow(1, t, 1)),
                &mut state,
                None,
            )
            .map_err(|e| e.to_string())?;
        steps.push(out);
    }
    let (a, b) = (read(whole).await?, read(Tensor::cat(steps, 1)).await?);
    Ok(a.iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max))
}

/// The size of the gradient of every positional-encoding parameter (frequencies, offsets,
/// gains, filters, phases, gates) after one backward pass of a tiny model on
/// `device.autodiff()`.
pub async fn positional_gradients(
    pe: &PeConfig,
    device: &Device,
) -> Result<Vec<(String, f32)>, String> {
    let device = device.clone().autodiff();
    let config = PerformerConfig::tiny_sized(Task::Continuation, VOCAB, VOCAB, pe.clone());
    let model = Performer::new(&config, 5, &device).map_err(|e| e.to_string())?;
    let mut state = model.start(1, false, &device);
    let logits = model
        .forward(
            Inputs::Tokens(tokens(8, &device)),
            labels(&config, 8, &device),
            &mut state,
            None,
        )
        .map_err(|e| e.to_string())?;
    let grads = logits.square().mean().backward();
    let mut visitor = GradientsOf {
        grads: &grads,
        path: Vec::new(),
        found: Vec::new(),
    };
    model.pe.visit(&mut visitor);
    let params = visitor.found;
    let mut out = Vec::new();
    for (name, grad) in params {
        let size = match grad {
            Some(g) => read(g.abs().sum()).await?[0],
            None => 0.0,
        };
        out.push((name, size));
    }
    Ok(out)
}

/// Every float parameter of a module, named by its record path (`kernel.SineSpe.freqs`,
/// `gates.0`), with its gradient if it has one.
struct GradientsOf<'a> {
    grads: &'a burn::tensor::Gradients,
    path: Vec<String>,
    found: Vec<(String, Option<Tensor<1>>)>,
}

impl ModuleVisitor for GradientsOf<'_> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let grad = param
            .val()
            .grad(self.grads)
            .map(|t| t.flatten::<1>(0, D - 1));
        self.found.push((self.path.join("."), grad));
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::model::pe::PeKind;
    use pollster::block_on;

    #[test]
    fn the_checks_pass_on_the_cpu() {
        let device = Device::flex();
        let pe = PeConfig::new(PeKind::ConvSpe).with_gate(true);
        for features in [FeatureKind::Favor, FeatureKind::Relu] {
            assert!(block_on(parallel_vs_recurrent(&pe, features, 6, &device)).unwrap() < 1e-4);
        }
        let grads = block_on(positional_gradients(&pe, &device)).unwrap();
        assert_eq!(grads.len(), 4);
        assert!(
            grads.iter().all(|(_, g)| *g > 0.0 && g.is_finite()),
            "{grads:?}"
        );
    }

    /// Gradients reach every positional-encoding parameter (frequencies, gains, offsets, filters,
    /// phases, gates) through a training loss on the autodiff CPU backend; the browser tests run
    /// the same check on WebGPU.
    #[test]
    fn gradients_reach_every_positional_parameter() {
        let device = Device::flex();
        for pe in crate::model::performer::tests::every_encoding()
            .into_iter()
            .filter(|p| p.acts_on_attention() && p.gated)
        {
            let grads = pollster::block_on(positional_gradients(&pe, &device)).unwrap();
            // The encoding's own parameters and one gate per layer.
            assert!(grads.len() >= 2 + 2, "{:?}: {grads:?}", pe.kind);
            for (name, size) in grads {
                assert!(
                    size > 0.0 && size.is_finite(),
                    "{:?}: {name} gradient {size}",
                    pe.kind
                );
            }
        }
    }
}
