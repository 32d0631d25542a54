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
                    Task::Accompaniment | Task::Harmonization | Task::Melody => {
                        Inputs::Rolls(Tensor::from_data(
                            TensorData::new(
                                rolls[r.start * width..r.end * width].to_vec(),
                                vec![1, r.len(), width],
                            ),
                            &device,
                        ))
                    }
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
                            Task::Accompaniment | Task::Harmonization | Task::Melody => {
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

/// Sequences stepped together ([`Performer::step_batch`]: each its own seed, position and
/// memory, the matrices read once for all) give each one's logits exactly as stepping it
/// alone does, for every encoding, tokens and rows alike; a mismatched batch is an error.
#[test]
fn sequences_stepped_together_are_each_what_it_is_alone() {
    let device = Device::flex();
    for task in [Task::Continuation, Task::Accompaniment] {
        for pe in every_encoding() {
            let config = tiny(task, VOCAB, pe.clone());
            let model = Performer::new(&config, 2, &device).unwrap();
            let stepping = pollster::block_on(model.stepping(&device)).unwrap();
            let width = config.input_dim;
            let coords = config.pe.coordinates();
            // Sequence b has seed 3 + b and is b steps ahead of the first.
            let starts = [0usize, 1, 2];
            let row = |b: usize, t: usize| -> Vec<f32> {
                (0..width)
                    .map(|i| (((i + 3 * t + 5 * b) % 7) as f32 / 7.0 - 0.4).max(0.0))
                    .collect()
            };
            let labs =
                |t: usize| -> Vec<f32> { (0..coords).map(|i| ((i + t) % 4) as f32).collect() };
            let fresh = || -> Vec<State> {
                (0..3)
                    .map(|b| {
                        model
                            .start(3 + b as u64, false, &device)
                            .stepping(&stepping)
                    })
                    .collect()
            };
            let step = |states: &mut [State], t: usize, together: bool| -> Vec<Vec<f32>> {
                let rows: Vec<Vec<f32>> = (0..3).map(|b| row(b, t + starts[b])).collect();
                let labels: Vec<Vec<f32>> = (0..3).map(|b| labs(t + starts[b])).collect();
                let ins: Vec<StepInput<'_>> = (0..3)
                    .map(|b| match task {
                        Task::Continuation => {
                            StepInput::Token(((t * 7 + b * 5 + 1) % VOCAB) as u32)
                        }
                        _ => StepInput::Roll(&rows[b]),
                    })
                    .collect();
                let labs: Vec<Option<&[f32]>> = labels
                    .iter()
                    .map(|l| config.pe.is_structural().then_some(l.as_slice()))
                    .collect();
                if together {
                    pollster::block_on(model.step_batch(&ins, &labs, states, &device)).unwrap()
                } else {
                    (0..3)
                        .map(|b| {
                            let s = &mut states[b];
                            pollster::block_on(model.step(ins[b], labs[b], s, &device)).unwrap()
                        })
                        .collect()
                }
            };
            let (mut alone, mut together) = (fresh(), fresh());
            // Put the sequences at different positions first.
            for (b, &ahead) in starts.iter().enumerate() {
                for _ in 0..ahead {
                    let states = [&mut alone[b], &mut together[b]];
                    for s in states {
                        let r = row(b, 0);
                        let input = match task {
                            Task::Continuation => StepInput::Token(1),
                            _ => StepInput::Roll(&r),
                        };
                        let l = labs(0);
                        let l = config.pe.is_structural().then_some(l.as_slice());
                        pollster::block_on(model.step(input, l, s, &device)).unwrap();
                    }
                }
            }
            for t in 0..5 {
                let a = step(&mut alone, t, false);
                let b = step(&mut together, t, true);
                assert_eq!(a, b, "{task:?} {:?} step {t}", pe.kind);
            }
            assert_ne!(alone[0].position, alone[2].position);
        }
    }
    let config = tiny(Task::Continuation, VOCAB, PeConfig::new(PeKind::None));
    let model = Performer::new(&config, 2, &device).unwrap();
    let mut states = vec![model.start(1, false, &device)];
    let err = pollster::block_on(model.step_batch(&[], &[], &mut states, &device)).unwrap_err();
    assert!(err.to_string().contains("each of 1 sequences"), "{err}");
}

/// A batched matrix product is each input's own product to the bit, for any count of inputs
/// and with zero inputs (which a row skips).
#[test]
fn a_batched_matrix_product_is_each_inputs_own() {
    use super::plain::Dense;
    let (d_in, d_out) = (13, 21);
    let dense = Dense {
        w: (0..d_in * d_out)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 17.0)
            .collect(),
        b: (0..d_out).map(|i| i as f32 / 7.0).collect(),
    };
    for count in [2, 4, 5, 9] {
        let xs: Vec<Vec<f32>> = (0..count)
            .map(|b| {
                (0..d_in)
                    .map(|i| {
                        if (i + b) % 3 == 0 {
                            0.0
                        } else {
                            ((i * 5 + b) % 11) as f32 / 3.0 - 1.5
                        }
                    })
                    .collect()
            })
            .collect();
        let mut together = vec![Vec::new(); count];
        dense.apply_batch(&xs, &mut together);
        for (x, got) in xs.iter().zip(&together) {
            let mut alone = Vec::new();
            dense.apply(x, &mut alone);
            assert_eq!(&alone, got, "{count} inputs");
        }
    }
}
