//! The learnt pedal as a small network (issue 70): one layer of rectified units over a step's
//! features (`music::pedal::model::Steps`, with its context), read by the two logistic
//! scores, press and down. Fitted by Adam on the binary cross-entropy of both answers over
//! shuffled batches of the training songs' steps; after each pass the validation songs'
//! steps are scored, and the pass with the lowest loss there is kept (the fit stops two
//! passes after it). The weights go into a [`PedalModel`], which plays them without Burn.

use burn::module::Module;
use burn::nn::Linear;
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor, TensorData};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use super::step::{adam, bce_per_step};
use crate::model::performer::seeded_linear;
use crate::music::pedal::model::{FEATURES, Hidden, Link, PedalModel, width};

/// How a network is fitted.
#[derive(Clone, Debug)]
pub struct NetworkFit {
    pub context: usize,
    /// The rows were read causally ([`Steps::causal`](crate::music::pedal::model::Steps)):
    /// the context reaches back only.
    pub causal: bool,
    pub units: usize,
    /// Passes over the training steps at most.
    pub passes: usize,
    pub batch: usize,
    pub lr: f64,
    pub seed: u64,
}

#[derive(Module, Debug)]
struct Net {
    hidden: Linear,
    out: Linear,
}

impl Net {
    fn logits(&self, x: Tensor<2>) -> Tensor<2> {
        self.out.forward(relu(self.hidden.forward(x)))
    }
}

/// Mean binary cross-entropy of `logits` [n, 2] against `targets` [n, 2] (the training
/// step's, [`bce_per_step`]).
fn bce(logits: Tensor<2>, targets: Tensor<2>) -> Tensor<1> {
    bce_per_step(logits.unsqueeze(), targets.unsqueeze(), 1.0).mean()
}

fn batch(
    rows: &[f32],
    answers: &[[bool; 2]],
    k: usize,
    at: &[usize],
    device: &Device,
) -> (Tensor<2>, Tensor<2>) {
    let mut x = Vec::with_capacity(at.len() * k);
    let mut y = Vec::with_capacity(at.len() * 2);
    for &i in at {
        x.extend_from_slice(&rows[i * k..(i + 1) * k]);
        y.extend(answers[i].iter().map(|&a| f32::from(u8::from(a))));
    }
    (
        Tensor::from_data(TensorData::new(x, vec![at.len(), k]), device),
        Tensor::from_data(TensorData::new(y, vec![at.len(), 2]), device),
    )
}

fn values<const D: usize>(t: Tensor<D>) -> Result<Vec<f64>, String> {
    t.into_data()
        .try_to_vec::<f32>()
        .map(|v| v.into_iter().map(f64::from).collect())
        .map_err(|e| format!("reading the network's weights failed: {e:?}"))
}

/// The mean loss of `net` over every row of `rows` (no gradients).
fn loss_over(
    net: &Net,
    rows: &[f32],
    answers: &[[bool; 2]],
    k: usize,
    device: &Device,
) -> Result<f64, String> {
    let mut sum = 0.0;
    let order: Vec<usize> = (0..answers.len()).collect();
    for at in order.chunks(8192) {
        let (x, y) = batch(rows, answers, k, at, device);
        sum += values(bce(net.logits(x), y))?[0] * at.len() as f64;
    }
    Ok(sum / answers.len().max(1) as f64)
}

/// The weights of `net` as a [`PedalModel`] (thresholds at 0.5 until chosen).
fn model_of(net: &Net, fit: &NetworkFit, k: usize) -> Result<PedalModel, String> {
    let w = values(net.hidden.weight.val())?; // [k, units]
    let units = fit.units;
    let weights = (0..units)
        .flat_map(|u| (0..k).map(move |i| (u, i)))
        .map(|(u, i)| w[i * units + u])
        .collect();
    let bias = values(net.hidden.bias.as_ref().expect("a bias").val())?;
    let out = values(net.out.weight.val())?; // [units, 2]
    let out_bias = values(net.out.bias.as_ref().expect("a bias").val())?;
    let head = |j: usize| {
        std::iter::once(out_bias[j])
            .chain((0..units).map(|u| out[u * 2 + j]))
            .collect()
    };
    Ok(PedalModel {
        features: FEATURES.iter().map(|s| s.to_string()).collect(),
        context: fit.context,
        press: head(0),
        down: head(1),
        press_threshold: 0.5,
        down_threshold: 0.5,
        link: Link::Logistic,
        hidden: Some(Hidden {
            units,
            weights,
            bias,
        }),
        causal: fit.causal,
    })
}

/// Fits the network on the training rows (`train`: rows of `FEATURES.len() ×` [`width`]
/// values and their answers), keeping the pass with the lowest loss on `valid`'s; reports each
/// pass's losses through `report`.
pub fn fit_network(
    fit: &NetworkFit,
    train: (&[f32], &[[bool; 2]]),
    valid: (&[f32], &[[bool; 2]]),
    device: &Device,
    mut report: impl FnMut(usize, f64, f64),
) -> Result<PedalModel, String> {
    let k = FEATURES.len() * width(fit.context, fit.causal);
    let (rows, answers) = train;
    if answers.len() <= k || rows.len() != answers.len() * k || valid.0.len() != valid.1.len() * k {
        return Err(format!(
            "{} steps are too few to fit the pedal's network on",
            answers.len()
        ));
    }
    let mut rng = StdRng::seed_from_u64(fit.seed);
    let plain = device.clone();
    let device = device.clone().autodiff();
    let mut net = Net {
        hidden: seeded_linear(Some(&mut rng), k, fit.units, &device),
        out: seeded_linear(Some(&mut rng), fit.units, 2, &device),
    };
    let mut optim = adam(1.0);
    let steps_a_pass = answers.len().div_ceil(fit.batch);
    let total = steps_a_pass * fit.passes;
    let mut order: Vec<usize> = (0..answers.len()).collect();
    let mut best: Option<(f64, PedalModel)> = None;
    let mut since_best = 0;
    for pass in 0..fit.passes {
        order.shuffle(&mut rng);
        let mut sum = 0.0;
        for (i, at) in order.chunks(fit.batch).enumerate() {
            let step = pass * steps_a_pass + i;
            // A cosine from the rate down to a tenth of it over every pass.
            let t = step as f64 / total.max(1) as f64;
            let lr = fit.lr * (0.1 + 0.9 * 0.5 * (1.0 + (std::f64::consts::PI * t).cos()));
            let (x, y) = batch(rows, answers, k, at, &device);
            let loss = bce(net.logits(x), y);
            sum += values(loss.clone().detach())?[0] * at.len() as f64;
            let grads = burn::optim::GradientsParams::from_grads(loss.backward(), &net);
            net = optim.step(lr, net, grads);
        }
        let on_valid = loss_over(&net.valid(), valid.0, valid.1, k, &plain)?;
        report(pass + 1, sum / answers.len() as f64, on_valid);
        if best.as_ref().is_none_or(|b| on_valid < b.0) {
            best = Some((on_valid, model_of(&net.valid(), fit, k)?));
            since_best = 0;
        } else {
            since_best += 1;
            if since_best >= 2 {
                break;
            }
        }
    }
    Ok(best.expect("at least one pass").1)
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::music::pedal::model::tests::{fixture, fixture_pianist};
    use crate::music::pedal::model::{Fit, Steps, pianist_steps, press_f1, press_steps};

    /// The fixture's pianist changes the pedal at every bar's chord: a network fitted on it
    /// presses there, and its JSON plays the same.
    #[test]
    fn a_fitted_network_presses_where_the_pianist_did() {
        let (grid, labels, piano, melody) = fixture();
        let n = grid.num_steps();
        let pianist = fixture_pianist(&grid, &labels);
        let (press, down) = pianist_steps(&grid, &pianist, grid.tick_at(n));
        let steps = Steps::new(&grid, &labels, &piano, &melody);
        let mut rows = Fit::new(1, Link::Linear, false).keeping_rows();
        rows.add(&steps, 0..n, &press, &down);
        let fit = NetworkFit {
            context: 1,
            causal: false,
            units: 8,
            passes: 80,
            batch: 16,
            lr: 0.02,
            seed: 3,
        };
        let mut losses = Vec::new();
        let device = Device::flex();
        let model = fit_network(&fit, rows.rows(), rows.rows(), &device, |_, t, _| {
            losses.push(t)
        })
        .unwrap();
        assert!(
            losses.last().unwrap() < &(0.5 * losses[0]),
            "the loss falls: {losses:?}"
        );
        let hidden = model.hidden.as_ref().unwrap();
        assert_eq!((hidden.units, model.press.len()), (8, 9));
        let back = PedalModel::from_json(&serde_json::to_string(&model).unwrap()).unwrap();
        let events = model.pedal(&steps, &grid, 0..n);
        assert_eq!(back.pedal(&steps, &grid, 0..n), events);
        let found = press_steps(&grid, &events, grid.tick_at(n));
        let wanted = press_steps(&grid, &pianist, grid.tick_at(n));
        let (_, _, f1) = press_f1(&found, &wanted, 2).unwrap();
        assert!(f1 > 0.9, "F1 {f1}, {found:?} against {wanted:?}");
    }

    #[test]
    fn too_few_steps_are_refused_in_words() {
        let fit = NetworkFit {
            context: 0,
            causal: false,
            units: 4,
            passes: 1,
            batch: 8,
            lr: 0.01,
            seed: 0,
        };
        let err =
            fit_network(&fit, (&[], &[]), (&[], &[]), &Device::flex(), |_, _, _| {}).unwrap_err();
        assert!(err.contains("too few"), "{err}");
    }
}
