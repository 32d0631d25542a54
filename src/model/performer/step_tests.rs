//! The plain-slice decoder against the tensor form it stands in for.

use burn::tensor::Device;

use super::tests::{VOCAB, every_encoding, tiny};
use super::*;
use crate::model::config::Task;
use crate::model::features::FeatureKind;
use crate::model::pe::{PeConfig, PeKind};
use crate::model::testing::{close, to_vec};

/// The plain-slice decoder (`Performer::step` on the CPU) gives the tensor form's logits and
/// attention rows, for every encoding, both feature maps and both tasks: after a tensor
/// prefill, step by step, and when a tensor call takes its state back.
#[test]
fn plain_steps_agree_with_the_tensor_form() {
    let device = Device::flex();
    let (len, prefill, back) = (9, 3, 7);
    for task in [Task::Continuation, Task::Accompaniment, Task::Harmonization] {
        for feature_kind in [FeatureKind::Favor, FeatureKind::Relu] {
            for pe in every_encoding() {
                let mut config = tiny(task, VOCAB, pe.clone());
                config.feature_kind = feature_kind;
                let model = Performer::new(&config, 3, &device).unwrap();
                let width = config.input_dim;
                let ids: Vec<u32> = (0..len).map(|i| ((i * 7 + 3) % VOCAB) as u32).collect();
                let rolls: Vec<f32> = (0..len * width)
                    .map(|i| ((i * 13 % 17) as f32 / 17.0).max(0.5) - 0.5)
                    .collect();
                let coords = config.pe.coordinates();
                let labs: Vec<f32> = (0..len * coords).map(|i| ((i * 5) % 7) as f32).collect();
                let inputs = |r: std::ops::Range<usize>| match task {
                    Task::Continuation => {
                        let v: Vec<i64> = ids[r.clone()].iter().map(|&t| t as i64).collect();
                        Inputs::Tokens(Tensor::from_data(
                            TensorData::new(v, vec![1, r.len()]),
                            &device,
                        ))
                    }
                    Task::Accompaniment | Task::Harmonization => Inputs::Rolls(Tensor::from_data(
                        TensorData::new(
                            rolls[r.start * width..r.end * width].to_vec(),
                            vec![1, r.len(), width],
                        ),
                        &device,
                    )),
                };
                let labels = |r: std::ops::Range<usize>| {
                    config.pe.is_structural().then(|| {
                        Tensor::from_data(
                            TensorData::new(
                                labs[r.start * coords..r.end * coords].to_vec(),
                                vec![1, r.len(), coords],
                            ),
                            &device,
                        )
                    })
                };
                let stepping = pollster::block_on(model.stepping(&device)).unwrap();
                assert!(stepping.decoder.is_some());
                // Watch layer 1, as the page does; every step's logits and rows.
                let run = |plain: bool| {
                    let mut state = model.start(5, true, &device);
                    state.capture_layer = Some(1);
                    if plain {
                        state = state.stepping(&stepping);
                    }
                    let mut logits = to_vec(
                        model
                            .forward(inputs(0..prefill), labels(0..prefill), &mut state, None)
                            .unwrap(),
                    );
                    let mut rows = Vec::new();
                    for t in prefill..back {
                        let lab = config
                            .pe
                            .is_structural()
                            .then(|| &labs[t * coords..(t + 1) * coords]);
                        let input = match task {
                            Task::Continuation => StepInput::Token(ids[t]),
                            Task::Accompaniment | Task::Harmonization => {
                                StepInput::Roll(&rolls[t * width..(t + 1) * width])
                            }
                        };
                        let out = pollster::block_on(model.step(input, lab, &mut state, &device))
                            .unwrap();
                        logits.extend(out);
                        rows.extend(to_vec(state.rows[1].clone().unwrap()));
                    }
                    // A tensor call after the steps continues from their state.
                    logits.extend(to_vec(
                        model
                            .forward(inputs(back..len), labels(back..len), &mut state, None)
                            .unwrap(),
                    ));
                    rows.extend(to_vec(state.rows[1].clone().unwrap()));
                    (logits, rows)
                };
                let (tensor_logits, tensor_rows) = run(false);
                let (plain_logits, plain_rows) = run(true);
                let what = format!("{task:?} {feature_kind:?} {:?} gated {}", pe.kind, pe.gated);
                assert_eq!(tensor_logits.len(), plain_logits.len(), "{what}");
                assert!(close(&plain_logits, &tensor_logits, 1e-4), "logits, {what}");
                assert!(
                    close(&plain_rows, &tensor_rows, 1e-4),
                    "attention rows, {what}"
                );
            }
        }
    }
    // Softmax attention decodes through tensors.
    let mut softmax = tiny(Task::Continuation, VOCAB, PeConfig::new(PeKind::None));
    softmax.attention = crate::model::config::AttentionKind::Softmax;
    let model = Performer::new(&softmax, 1, &device).unwrap();
    assert!(
        pollster::block_on(model.stepping(&device))
            .unwrap()
            .decoder
            .is_none()
    );
}

/// A whole call on the plain path (a state with the decoder, no attention map) gives the
/// tensor form's logits: a bidirectional model's one pass, and a causal model's prefill in
/// two calls followed by a step, for every encoding (those without plain codes take the tensor
/// form on both) and both feature maps.
#[test]
fn whole_calls_on_plain_slices_agree_with_the_tensor_form() {
    use crate::model::config::Direction;
    let device = Device::flex();
    let len = 70; // past one re-anchoring of sineSPE's rotated phases
    for (task, direction) in [
        (Task::Harmonization, Some(Direction::Bidirectional)),
        (Task::Harmonization, Some(Direction::Causal)),
        (Task::Continuation, None),
    ] {
        for feature_kind in [FeatureKind::Favor, FeatureKind::Relu] {
            for pe in every_encoding() {
                let mut config = tiny(task, VOCAB, pe.clone());
                config.feature_kind = feature_kind;
                config.direction = direction.or(config.direction);
                let model = Performer::new(&config, 3, &device).unwrap();
                let width = config.input_dim;
                let coords = config.pe.coordinates();
                let labs: Vec<f32> = (0..len * coords).map(|i| ((i * 5) % 7) as f32).collect();
                let call = |r: std::ops::Range<usize>| {
                    let inputs = match task {
                        Task::Continuation => Inputs::Tokens(Tensor::from_data(
                            TensorData::new(
                                r.clone().map(|i| ((i * 7 + 3) % VOCAB) as i64).collect(),
                                vec![1, r.len()],
                            ),
                            &device,
                        )),
                        _ => Inputs::Rolls(Tensor::from_data(
                            TensorData::new(
                                (r.start * width..r.end * width)
                                    .map(|i| ((i * 13 % 17) as f32 / 17.0).max(0.5) - 0.5)
                                    .collect(),
                                vec![1, r.len(), width],
                            ),
                            &device,
                        )),
                    };
                    let labels = config.pe.is_structural().then(|| {
                        Tensor::from_data(
                            TensorData::new(
                                labs[r.start * coords..r.end * coords].to_vec(),
                                vec![1, r.len(), coords],
                            ),
                            &device,
                        )
                    });
                    (inputs, labels)
                };
                let stepping = pollster::block_on(model.stepping(&device)).unwrap();
                let run = |plain: bool| {
                    let mut state = model.start(5, false, &device);
                    if plain {
                        state = state.stepping(&stepping);
                    }
                    // Where each call ends.
                    let ends: &[usize] = if config.is_causal() {
                        &[40, len - 1, len]
                    } else {
                        &[len]
                    };
                    let calls = ends.iter().scan(0, |from, &end| {
                        let r = *from..end;
                        *from = end;
                        Some(r)
                    });
                    let mut logits = Vec::new();
                    for r in calls {
                        let (inputs, labels) = call(r);
                        let out = model.forward(inputs, labels, &mut state, None).unwrap();
                        logits.extend(to_vec(out));
                    }
                    logits
                };
                let what = format!(
                    "{task:?} {direction:?} {feature_kind:?} {:?} gated {}",
                    pe.kind, pe.gated
                );
                let (tensor, plain) = (run(false), run(true));
                assert_eq!(tensor.len(), plain.len(), "{what}");
                assert!(close(&plain, &tensor, 1e-4), "logits, {what}");
            }
        }
    }
}

/// Bad input to a step is an error in words, on both paths.
#[test]
fn a_step_refuses_what_the_model_does_not_read() {
    let device = Device::flex();
    let config = tiny(Task::Continuation, VOCAB, PeConfig::new(PeKind::SineSpe));
    let model = Performer::new(&config, 1, &device).unwrap();
    let stepping = pollster::block_on(model.stepping(&device)).unwrap();
    for plain in [false, true] {
        let mut state = model.start(1, false, &device);
        if plain {
            state = state.stepping(&stepping);
        }
        let far = pollster::block_on(model.step(
            StepInput::Token(VOCAB as u32),
            None,
            &mut state,
            &device,
        ));
        assert!(far.unwrap_err().to_string().contains("token ids below"));
        let roll = [0.0; 4];
        let wrong =
            pollster::block_on(model.step(StepInput::Roll(&roll), None, &mut state, &device));
        assert!(wrong.is_err());
        assert_eq!(state.position, 0, "nothing was consumed");
    }
}
