//! The Performer's forms agree, every positional-encoding parameter learns, weights round-trip.

use burn::tensor::{Device, Int, Tensor, TensorData};

use super::*;
use crate::model::config::{PerformerConfig, Task};
use crate::model::features::FeatureKind;
use crate::model::pe::{PeConfig, PeKind, StructureLevel};
use crate::model::testing::{close, random, to_vec};

const VOCAB: usize = 20;

fn tokens(len: usize, device: &Device) -> Tensor<2, Int> {
    let ids: Vec<i64> = (0..2 * len).map(|i| ((i * 7 + 3) % VOCAB) as i64).collect();
    Tensor::from_data(TensorData::new(ids, vec![2, len]), device)
}

fn labels(config: &PerformerConfig, len: usize, device: &Device) -> Option<Tensor<3>> {
    config.pe.is_structural().then(|| {
        // Integer-valued coordinates with repeats, like real labels.
        let c = config.pe.coordinates();
        let v: Vec<f32> = (0..2 * len * c).map(|i| ((i * 5) % 7) as f32).collect();
        Tensor::from_data(TensorData::new(v, vec![2, len, c]), device)
    })
}

pub(crate) fn every_encoding() -> Vec<PeConfig> {
    let mut out = Vec::new();
    for kind in [
        PeKind::None,
        PeKind::Ape,
        PeKind::Cape,
        PeKind::SineSpe,
        PeKind::ConvSpe,
        PeKind::Fstripe,
        PeKind::FstripeSff,
    ] {
        let levels = [StructureLevel::Melody, StructureLevel::Chord];
        out.push(PeConfig::new(kind).with_levels(&levels));
        if matches!(
            kind,
            PeKind::SineSpe | PeKind::ConvSpe | PeKind::Fstripe | PeKind::FstripeSff
        ) {
            out.push(PeConfig::new(kind).with_gate(true).with_levels(&levels));
        }
    }
    out
}

/// convSPE decoding with its filters read once (codes on the CPU) gives the logits of the
/// plain recurrent form, gated and ungated.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn conv_spe_steps_with_filters_read_once_agree() {
    let device = Device::flex();
    let len = 9;
    for gated in [false, true] {
        let pe = PeConfig::new(PeKind::ConvSpe).with_gate(gated);
        let config = PerformerConfig::tiny(Task::Continuation, VOCAB, pe);
        let model = Performer::new(&config, 1, &device).unwrap();
        let filters = pollster::block_on(model.step_filters()).unwrap();
        assert!(filters.is_some());
        let toks = tokens(len, &device);
        let run = |state: &mut State| {
            // A prefill of 3 (the convolution), then steps.
            let mut parts = vec![
                model
                    .forward(
                        Inputs::Tokens(toks.clone().narrow(1, 0, 3)),
                        None,
                        state,
                        None,
                    )
                    .unwrap(),
            ];
            for t in 3..len {
                let one = Inputs::Tokens(toks.clone().narrow(1, t, 1));
                parts.push(model.forward(one, None, state, None).unwrap());
            }
            to_vec(Tensor::cat(parts, 1))
        };
        let plain = run(&mut model.start(9, false, &device));
        let stepping = Stepping {
            filters: filters.clone(),
            decoder: None,
        };
        let fast = run(&mut model.start(9, false, &device).stepping(&stepping));
        assert!(close(&plain, &fast, 1e-4), "gated {gated}");
    }
    // Other encodings read nothing.
    let sine = PerformerConfig::tiny(Task::Continuation, VOCAB, PeConfig::new(PeKind::SineSpe));
    let model = Performer::new(&sine, 1, &device).unwrap();
    assert!(pollster::block_on(model.step_filters()).unwrap().is_none());
}

/// Token by token (the recurrent form), a prefill then steps, and the whole sequence at once
/// (the chunked parallel form) give the same logits, for every encoding and feature map.
#[test]
fn parallel_and_recurrent_forms_agree_for_every_encoding() {
    let device = Device::flex();
    let len = 11;
    for feature_kind in [FeatureKind::Favor, FeatureKind::Relu] {
        for pe in every_encoding() {
            let mut config = PerformerConfig::tiny(Task::Continuation, VOCAB, pe.clone());
            config.feature_kind = feature_kind;
            config.chunk = 4;
            let model = Performer::new(&config, 1, &device).unwrap();
            let toks = tokens(len, &device);
            let labs = labels(&config, len, &device);
            let mut state = model.start(9, false, &device);
            let whole = model
                .forward(Inputs::Tokens(toks.clone()), labs.clone(), &mut state, None)
                .unwrap();
            let whole = to_vec(whole);
            let mut state = model.start(9, false, &device);
            let mut steps = Vec::new();
            for t in 0..len {
                let lab = labs.clone().map(|l| l.narrow(1, t, 1));
                let out = model
                    .forward(
                        Inputs::Tokens(toks.clone().narrow(1, t, 1)),
                        lab,
                        &mut state,
                        None,
                    )
                    .unwrap();
                steps.push(out);
            }
            let steps = to_vec(Tensor::cat(steps, 1));
            assert!(
                close(&steps, &whole, 1e-4),
                "{:?} {feature_kind:?}",
                pe.kind
            );
            // Prefill 7, then the rest one by one.
            let mut state = model.start(9, false, &device);
            let mut parts = vec![
                model
                    .forward(
                        Inputs::Tokens(toks.clone().narrow(1, 0, 7)),
                        labs.clone().map(|l| l.narrow(1, 0, 7)),
                        &mut state,
                        None,
                    )
                    .unwrap(),
            ];
            for t in 7..len {
                parts.push(
                    model
                        .forward(
                            Inputs::Tokens(toks.clone().narrow(1, t, 1)),
                            labs.clone().map(|l| l.narrow(1, t, 1)),
                            &mut state,
                            None,
                        )
                        .unwrap(),
                );
            }
            assert!(
                close(&to_vec(Tensor::cat(parts, 1)), &whole, 1e-4),
                "{:?} prefill",
                pe.kind
            );
        }
    }
}

#[test]
fn softmax_baseline_decodes_like_it_runs_in_parallel() {
    let device = Device::flex();
    let mut config = PerformerConfig::tiny(Task::Continuation, VOCAB, PeConfig::new(PeKind::Ape));
    config.attention = AttentionKind::Softmax;
    let model = Performer::new(&config, 2, &device).unwrap();
    let toks = tokens(9, &device);
    let mut state = model.start(0, false, &device);
    let whole = to_vec(
        model
            .forward(Inputs::Tokens(toks.clone()), None, &mut state, None)
            .unwrap(),
    );
    let mut state = model.start(0, false, &device);
    let steps: Vec<_> = (0..9)
        .map(|t| {
            model
                .forward(
                    Inputs::Tokens(toks.clone().narrow(1, t, 1)),
                    None,
                    &mut state,
                    None,
                )
                .unwrap()
        })
        .collect();
    assert!(close(&to_vec(Tensor::cat(steps, 1)), &whole, 1e-4));
}

#[test]
fn captured_rows_are_distributions_over_the_past() {
    let device = Device::flex();
    let config = PerformerConfig::tiny(Task::Continuation, VOCAB, PeConfig::new(PeKind::SineSpe));
    let model = Performer::new(&config, 3, &device).unwrap();
    let toks = tokens(6, &device);
    let mut plain = model.start(4, false, &device);
    let mut state = model.start(4, true, &device);
    let a = model
        .forward(
            Inputs::Tokens(toks.clone().narrow(1, 0, 5)),
            None,
            &mut state,
            None,
        )
        .unwrap();
    let b = model
        .forward(
            Inputs::Tokens(toks.clone().narrow(1, 0, 5)),
            None,
            &mut plain,
            None,
        )
        .unwrap();
    assert_eq!(to_vec(a), to_vec(b), "capture does not change the output");
    model
        .forward(
            Inputs::Tokens(toks.clone().narrow(1, 5, 1)),
            None,
            &mut state,
            None,
        )
        .unwrap();
    assert_eq!(state.rows.len(), config.layers);
    let stepped: Vec<Tensor<4>> = state.rows.iter().map(|r| r.clone().unwrap()).collect();
    for row in &stepped {
        assert_eq!(row.dims(), [2, config.heads, 1, 6]);
        let sums = to_vec(row.clone().sum_dim(3));
        assert!(sums.iter().all(|s| (s - 1.0).abs() < 1e-4), "{sums:?}");
    }
    // One call of six steps captures every row; its last row is the one stepping gave, and
    // capturing a single layer gives that layer's rows only.
    let mut whole = model.start(4, true, &device);
    whole.capture_layer = Some(1);
    model
        .forward(Inputs::Tokens(toks), None, &mut whole, None)
        .unwrap();
    assert!(whole.rows[0].is_none());
    let rows = whole.rows[1].clone().unwrap();
    assert_eq!(rows.dims(), [2, config.heads, 6, 6]);
    assert!(close(
        &to_vec(rows.narrow(2, 5, 1)),
        &to_vec(stepped[1].clone()),
        1e-5
    ));
}

#[test]
fn weights_round_trip_through_bytes() {
    let device = Device::flex();
    let pe = PeConfig::new(PeKind::ConvSpe).with_gate(true);
    let config = PerformerConfig::tiny(Task::Accompaniment, 0, pe);
    let model = Performer::new(&config, 6, &device).unwrap();
    let rolls = random::<3>(&[1, 5, config.input_dim], 3, &device).abs();
    let run = |m: &Performer| {
        let mut state = m.start(2, false, &device);
        to_vec(
            m.forward(Inputs::Rolls(rolls.clone()), None, &mut state, None)
                .unwrap(),
        )
    };
    let before = run(&model);
    let params = model.parameters();
    let bytes = model.to_bytes().unwrap();
    let loaded = Performer::from_bytes(&config, &bytes, &device).unwrap();
    assert_eq!(loaded.parameters(), params);
    assert_eq!(run(&loaded), before);
    // Another config, or damaged bytes: an error, not a panic.
    let other = PerformerConfig::tiny(Task::Accompaniment, 0, PeConfig::new(PeKind::SineSpe));
    assert!(Performer::from_bytes(&other, &bytes, &device).is_err());
    assert!(Performer::from_bytes(&config, &bytes[..bytes.len() / 2], &device).is_err());
}

#[test]
fn wrong_inputs_are_errors_in_words() {
    let device = Device::flex();
    let config = PerformerConfig::tiny(Task::Continuation, VOCAB, PeConfig::new(PeKind::Fstripe));
    let model = Performer::new(&config, 7, &device).unwrap();
    let mut state = model.start(0, false, &device);
    let err = model
        .forward(Inputs::Tokens(tokens(3, &device)), None, &mut state, None)
        .unwrap_err();
    assert_eq!(err, ModelError::MissingLabels);
    let rolls = random::<3>(&[1, 3, 4], 1, &device);
    assert!(
        model
            .forward(Inputs::Rolls(rolls), None, &mut state, None)
            .is_err()
    );
    // Labels of the wrong shape, an empty input, another batch size on the same sequence.
    let wrong = Tensor::<3>::zeros([2, 3, 1], &device);
    let err = model.forward(
        Inputs::Tokens(tokens(3, &device)),
        Some(wrong),
        &mut state,
        None,
    );
    assert!(matches!(err, Err(ModelError::Input { .. })), "{err:?}");
    let empty = Tensor::<2, Int>::zeros([2, 0], &device);
    assert!(
        model
            .forward(Inputs::Tokens(empty), None, &mut state, None)
            .is_err()
    );
    let plain = Performer::new(
        &PerformerConfig::tiny(Task::Continuation, VOCAB, PeConfig::new(PeKind::SineSpe)),
        7,
        &device,
    )
    .unwrap();
    let mut state = plain.start(0, false, &device);
    plain
        .forward(Inputs::Tokens(tokens(3, &device)), None, &mut state, None)
        .unwrap();
    let one_row = tokens(3, &device).narrow(0, 0, 1);
    let err = plain.forward(Inputs::Tokens(one_row), None, &mut state, None);
    assert_eq!(
        err.unwrap_err(),
        ModelError::Batch {
            started: 2,
            given: 1
        }
    );
    let breakers: [fn(&mut PerformerConfig); 3] =
        [|c| c.features = 7, |c| c.pe.sines = 0, |c| c.d_model = 0];
    for broken in breakers {
        let mut bad = config.clone();
        broken(&mut bad);
        assert!(matches!(
            Performer::new(&bad, 0, &device),
            Err(ModelError::Config(_))
        ));
    }
    let mut conv = PerformerConfig::tiny(Task::Continuation, VOCAB, PeConfig::new(PeKind::ConvSpe));
    conv.pe.taps = 0;
    assert!(Performer::new(&conv, 0, &device).is_err());
}

#[test]
fn the_config_is_saved_as_json_beside_the_weights() {
    let config = PerformerConfig::small(
        Task::Accompaniment,
        0,
        PeConfig::new(PeKind::Fstripe).with_levels(&[StructureLevel::Chord]),
    );
    let json = serde_json::to_string_pretty(&config).unwrap();
    assert!(
        json.contains("\"fstripe\"") && json.contains("\"chord\""),
        "{json}"
    );
    let back: PerformerConfig = serde_json::from_str(&json).unwrap();
    assert_eq!(back, config);
    let dir = std::env::temp_dir().join(format!("pianoformer-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("model.json");
    burn::config::Config::save(&config, &path).unwrap();
    let loaded = <PerformerConfig as burn::config::Config>::load(&path).unwrap();
    assert_eq!(loaded, config);
    std::fs::remove_dir_all(&dir).ok();
}

/// The plain-slice decoder (`Performer::step` on the CPU) gives the tensor form's logits and
/// attention rows, for every encoding, both feature maps and both tasks: after a tensor
/// prefill, step by step, and when a tensor call takes its state back.
#[test]
fn plain_steps_agree_with_the_tensor_form() {
    let device = Device::flex();
    let (len, prefill, back) = (9, 3, 7);
    for task in [Task::Continuation, Task::Accompaniment] {
        for feature_kind in [FeatureKind::Favor, FeatureKind::Relu] {
            for pe in every_encoding() {
                let mut config = PerformerConfig::tiny(task, VOCAB, pe.clone());
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
                    Task::Accompaniment => Inputs::Rolls(Tensor::from_data(
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
                            Task::Accompaniment => {
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
    let mut softmax = PerformerConfig::tiny(Task::Continuation, VOCAB, PeConfig::new(PeKind::None));
    softmax.attention = crate::model::config::AttentionKind::Softmax;
    let model = Performer::new(&softmax, 1, &device).unwrap();
    assert!(
        pollster::block_on(model.stepping(&device))
            .unwrap()
            .decoder
            .is_none()
    );
}

/// Bad input to a step is an error in words, on both paths.
#[test]
fn a_step_refuses_what_the_model_does_not_read() {
    let device = Device::flex();
    let config = PerformerConfig::tiny(Task::Continuation, VOCAB, PeConfig::new(PeKind::SineSpe));
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
