//! The Performer's forms agree, every positional-encoding parameter learns, weights round-trip.

use burn::tensor::{Device, Int, Tensor, TensorData};

use super::*;
use crate::model::config::{ACCOMPANIMENT_INPUTS, ACCOMPANIMENT_OUTPUTS, PerformerConfig, Task};
use crate::model::features::FeatureKind;
use crate::model::pe::{PeConfig, PeKind, StructureLevel};
use crate::model::testing::{close, random, to_vec};

pub(super) const VOCAB: usize = 20;

/// A tiny config of `task` at sizes the model core knows as numbers: the accompaniment's
/// rolls, `vocab` tokens both ways, or a harmonizer's 124 values per beat and 169 chord
/// classes (what the feeding layer writes today; any widths serve these tests).
pub(crate) fn tiny(task: Task, vocab: usize, pe: PeConfig) -> PerformerConfig {
    let (i, o) = match task {
        Task::Accompaniment => (ACCOMPANIMENT_INPUTS, ACCOMPANIMENT_OUTPUTS),
        Task::Continuation => (vocab, vocab),
        Task::Harmonization => (124, 169),
        Task::Melody => (203, 66),
    };
    PerformerConfig::tiny_sized(task, i, o, pe)
}

pub(super) fn tokens(len: usize, device: &Device) -> Tensor<2, Int> {
    let ids: Vec<i64> = (0..2 * len).map(|i| ((i * 7 + 3) % VOCAB) as i64).collect();
    Tensor::from_data(TensorData::new(ids, vec![2, len]), device)
}

pub(super) fn labels(config: &PerformerConfig, len: usize, device: &Device) -> Option<Tensor<3>> {
    config.pe.is_structural().then(|| {
        // Integer-valued coordinates with repeats, like real labels.
        let c = config.pe.coordinates();
        let v: Vec<f32> = (0..2 * len * c).map(|i| ((i * 5) % 7) as f32).collect();
        Tensor::from_data(TensorData::new(v, vec![2, len, c]), device)
    })
}

pub(crate) fn every_encoding() -> Vec<PeConfig> {
    let mut out = Vec::new();
    for kind in PeKind::ALL {
        let levels = [StructureLevel::Melody, StructureLevel::Chord];
        out.push(PeConfig::new(*kind).with_levels(&levels));
        if PeConfig::new(*kind).acts_on_attention() {
            out.push(PeConfig::new(*kind).with_gate(true).with_levels(&levels));
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
        let config = tiny(Task::Continuation, VOCAB, pe);
        let model = Performer::new(&config, 1, &device).unwrap();
        let plain = pollster::block_on(model.pe.plain()).unwrap();
        assert!(plain.is_some());
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
        let tensor = run(&mut model.start(9, false, &device));
        let stepping = Stepping {
            plain: plain.clone(),
            decoder: None,
        };
        let fast = run(&mut model.start(9, false, &device).stepping(&stepping));
        assert!(close(&tensor, &fast, 1e-4), "gated {gated}");
    }
    // Off the CPU, other encodings read nothing for their steps.
    let sine = tiny(Task::Continuation, VOCAB, PeConfig::new(PeKind::SineSpe));
    let model = Performer::new(&sine, 1, &device).unwrap();
    let relative = model.pe.relative().unwrap();
    assert!(!relative.plain_steps());
}

/// Token by token (the recurrent form), a prefill then steps, and the whole sequence at once
/// (the chunked parallel form) give the same logits, for every encoding and feature map.
#[test]
fn parallel_and_recurrent_forms_agree_for_every_encoding() {
    let device = Device::flex();
    let len = 11;
    for feature_kind in [FeatureKind::Favor, FeatureKind::Relu] {
        for pe in every_encoding() {
            let mut config = tiny(Task::Continuation, VOCAB, pe.clone());
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
    let mut config = tiny(Task::Continuation, VOCAB, PeConfig::new(PeKind::Ape));
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
    let config = tiny(Task::Continuation, VOCAB, PeConfig::new(PeKind::SineSpe));
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
    let config = tiny(Task::Accompaniment, 0, pe);
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
    let other = tiny(Task::Accompaniment, 0, PeConfig::new(PeKind::SineSpe));
    assert!(Performer::from_bytes(&other, &bytes, &device).is_err());
    assert!(Performer::from_bytes(&config, &bytes[..bytes.len() / 2], &device).is_err());
    // Loading builds on zeros, not on drawn weights: every encoding and task still comes back
    // whole, and a zero model is not the model.
    for pe in every_encoding() {
        for (task, vocab) in [
            (Task::Accompaniment, 0),
            (Task::Continuation, VOCAB),
            (Task::Harmonization, 0),
        ] {
            let config = tiny(task, vocab, pe.clone());
            let model = Performer::new(&config, 9, &device).unwrap();
            let rolls = random::<3>(&[2, 5, config.input_dim], 4, &device).abs();
            let input = || match task {
                Task::Accompaniment | Task::Harmonization | Task::Melody => {
                    Inputs::Rolls(rolls.clone())
                }
                Task::Continuation => Inputs::Tokens(tokens(5, &device)),
            };
            let labels = labels(&config, 5, &device);
            let out = |m: &Performer| {
                let mut state = m.start(2, false, &device);
                to_vec(
                    m.forward(input(), labels.clone(), &mut state, None)
                        .unwrap(),
                )
            };
            let loaded =
                Performer::from_bytes(&config, &model.clone().to_bytes().unwrap(), &device)
                    .unwrap();
            assert_eq!(out(&loaded), out(&model), "{:?} {task:?}", pe.kind);
            let zeros = Performer::build(&config, 0, false, &device).unwrap();
            assert_ne!(out(&zeros), out(&model), "{:?} {task:?}", pe.kind);
        }
    }
}

#[test]
fn wrong_inputs_are_errors_in_words() {
    let device = Device::flex();
    let config = tiny(Task::Continuation, VOCAB, PeConfig::new(PeKind::Fstripe));
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
        &tiny(Task::Continuation, VOCAB, PeConfig::new(PeKind::SineSpe)),
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
    let mut conv = tiny(Task::Continuation, VOCAB, PeConfig::new(PeKind::ConvSpe));
    conv.pe.taps = 0;
    assert!(Performer::new(&conv, 0, &device).is_err());
}

#[test]
fn the_config_is_saved_as_json_beside_the_weights() {
    let config = PerformerConfig::small_sized(
        Task::Accompaniment,
        ACCOMPANIMENT_INPUTS,
        ACCOMPANIMENT_OUTPUTS,
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

/// Weights saved before the encodings became one family (`pe.sine.*`, `pe.conv.*`,
/// `pe.fstripe.*`: every model shipped before then) load into today's `pe.kernel.<Kind>.*`
/// and give the same outputs; today's files name the kernel by its kind.
#[test]
fn weights_saved_with_the_legacy_encoding_paths_load() {
    let device = Device::flex();
    for pe in every_encoding()
        .into_iter()
        .filter(PeConfig::acts_on_attention)
    {
        let config = tiny(Task::Continuation, VOCAB, pe.clone());
        let model = Performer::new(&config, 3, &device).unwrap();
        let out = |m: &Performer| {
            let mut state = m.start(2, false, &device);
            let labels = labels(&config, 5, &device);
            to_vec(
                m.forward(Inputs::Tokens(tokens(5, &device)), labels, &mut state, None)
                    .unwrap(),
            )
        };
        let bytes = model.clone().to_bytes().unwrap();
        let variant = crate::model::pe::Kernel::variant(pe.kind).unwrap();
        let old = match pe.kind {
            PeKind::SineSpe => "sine",
            PeKind::ConvSpe => "conv",
            _ => "fstripe",
        };
        let new_prefix = format!("pe.kernel.{variant}.");
        let reader =
            burn_pack::Reader::from_bytes(burn::tensor::Bytes::from_bytes_vec(bytes)).unwrap();
        let mut renamed = 0;
        let tensors: Vec<burn_pack::Tensor> = reader
            .into_tensors()
            .unwrap()
            .into_iter()
            .map(|t| {
                let (path, dtype, shape, id, data) = t.into_parts().unwrap();
                let path = match path.strip_prefix(&new_prefix) {
                    Some(rest) => {
                        renamed += 1;
                        format!("pe.{old}.{rest}")
                    }
                    None => path,
                };
                burn_pack::Tensor::new(path, dtype, shape, id, data)
            })
            .collect();
        assert!(renamed >= 2, "{:?}: the kernel under {new_prefix}", pe.kind);
        let legacy = burn_pack::Writer::new(tensors)
            .into_bytes()
            .unwrap()
            .to_vec();
        let loaded = Performer::from_bytes(&config, &legacy, &device).unwrap();
        assert_eq!(out(&loaded), out(&model), "{:?}", pe.kind);
    }
}
