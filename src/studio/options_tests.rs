//! Each task's settings, read from JSON (the page's for the task, the CLI's for any): their checks, in
//! words, the model's defaults they fill in, and the shared cases read through the tasks.

use super::*;
use crate::generate::PianoSampling;
use crate::generate::binarize::Binarize;

/// The words of what `checked` found wrong, after checking that its field is a setting of
/// `json` (the task's settings as JSON).
fn words(checked: Result<(), BadOption>, json: serde_json::Value) -> String {
    let bad = checked.unwrap_err();
    assert!(
        bad.field == "region" || json.get(bad.field).is_some(),
        "{} is not a setting",
        bad.field
    );
    GenerateError::from(bad).to_string()
}

#[test]
fn options_are_checked_in_words_and_fill_in_the_models_defaults() {
    let piano = |o: AccompanyOptions| words(o.check(), serde_json::to_value(o).unwrap());
    let tokens = |o: ContinueOptions| words(o.check(), serde_json::to_value(o).unwrap());
    let acc = AccompanyOptions::default;
    let cont = ContinueOptions::default;
    assert!(acc().check().is_ok() && cont().check().is_ok());
    assert!(MelodyOptions::default().check().is_ok());
    let region = |region| Common {
        region,
        ..Common::default()
    };
    for (said, words) in [
        (
            tokens(ContinueOptions {
                temperature: Some(0.0),
                ..cont()
            }),
            "the temperature of a continuation or a melody",
        ),
        (
            piano(AccompanyOptions {
                piano_temperature: Some(11.0),
                ..acc()
            }),
            "the piano's temperature",
        ),
        (
            piano(AccompanyOptions {
                hold_temperature: Some(f32::NAN),
                ..acc()
            }),
            "the piano's hold temperature",
        ),
        (
            tokens(ContinueOptions {
                top_p: 1.5,
                ..cont()
            }),
            "top-p",
        ),
        (
            piano(AccompanyOptions {
                threshold: Some(0.0),
                ..acc()
            }),
            "the note threshold",
        ),
        (
            piano(AccompanyOptions {
                common: region(Some([4, 4])),
                ..acc()
            }),
            "at least one bar",
        ),
        (
            tokens(ContinueOptions {
                common: region(Some([4, 4])),
                ..cont()
            }),
            "at least one bar",
        ),
        (
            tokens(ContinueOptions {
                tokens: Some(0),
                ..cont()
            }),
            "the token limit",
        ),
        (
            tokens(ContinueOptions {
                bars: Some(0),
                ..cont()
            }),
            "the length",
        ),
        (
            tokens(ContinueOptions {
                context: Some(8),
                ..cont()
            }),
            "at least 32 tokens",
        ),
    ] {
        assert!(said.contains(words), "{said:?} should mention {words:?}");
    }

    // What is not given comes from the model; what is given wins.
    let model = PianoSampling::of_model(Some(0.8), Some(0.5));
    let given = AccompanyOptions {
        common: Common {
            seed: 7,
            ..Common::default()
        },
        piano_temperature: Some(1.2),
        ..acc()
    };
    assert_eq!(
        given.piano_sampling(model),
        PianoSampling {
            temperature: 1.2,
            threshold: None,
            hold_temperature: 0.5,
            seed: 7,
            density: 1.0,
        }
    );
    let model_rule = Binarize {
        threshold: 0.4,
        gap: 2,
    };
    assert_eq!(acc().binarize(Some(model_rule)), model_rule);
    let own = AccompanyOptions {
        threshold: Some(0.2),
        ..acc()
    }
    .binarize(Some(model_rule));
    assert_eq!((own.threshold, own.gap), (0.2, 2));
    // A length in bars (8 by default) with a token limit of 256 a bar, unless one is given.
    assert_eq!((cont().bars, cont().tokens), (Some(8), None));
    assert_eq!(cont().length().tokens, 8 * crate::studio::TOKENS_A_BAR);
    let given_limit = ContinueOptions {
        tokens: Some(100),
        ..cont()
    };
    assert_eq!(given_limit.length().tokens, 100);
    let no_bars = ContinueOptions {
        bars: None,
        ..cont()
    };
    assert_eq!(
        (no_bars.length().tokens, no_bars.length().bars),
        (512, None)
    );
    let many = ContinueOptions {
        bars: Some(1000),
        ..cont()
    };
    assert_eq!(many.length().tokens, crate::studio::MAX_TOKENS);
    let seeded = ContinueOptions {
        common: given.common.clone(),
        ..cont()
    };
    assert_eq!(seeded.sampling().seed, 7);
    // A continuation holds the prompt's pace on bars nobody planned unless another density
    // is asked, which then holds on every bar.
    assert_eq!(
        cont().sampling().density,
        Some(crate::generate::DEFAULT_DENSITY)
    );
    assert!(!cont().sampling().density_on_plan);
    let sparse = ContinueOptions {
        density: Some(0.5),
        ..cont()
    };
    assert_eq!(sparse.sampling().density, Some(0.5));
    assert!(sparse.sampling().density_on_plan);
    // And its key, unless the hold is set (0: as the model plays).
    assert_eq!(cont().sampling().key, crate::generate::DEFAULT_KEY);
    const { assert!(crate::generate::DEFAULT_KEY > 0.0) };
    let free = ContinueOptions {
        key: Some(0.0),
        ..cont()
    };
    assert_eq!(free.sampling().key, 0.0);
}

/// One settings object, as the page sends it, is read by every task: each takes what it knows
/// and its own defaults for the rest, and a setting another task knows is no error.
#[test]
fn one_settings_object_is_read_by_every_task() {
    let settings = serde_json::json!({
        "seed": 5, "region": [1, 3], "alternatives": 2, "threshold": 0.4, "temperature": 0.9,
        "bars": 4, "pitchTemperature": 0.5, "melodyRange": [60, 72], "textureEcho": 0.5,
        "pedal": "off", "fromBar": 2,
    });
    let acc = AccompanyOptions::deserialize(&settings).unwrap();
    assert_eq!(
        (acc.common.seed, acc.common.region, acc.common.alternatives),
        (5, Some([1, 3]), Some(2))
    );
    assert_eq!((acc.threshold, acc.texture_echo), (Some(0.4), Some(0.5)));
    assert_eq!(acc.pedal, PedalMode::Off);
    let cont = ContinueOptions::deserialize(&settings).unwrap();
    assert_eq!(
        (cont.temperature, cont.bars, cont.common.seed),
        (Some(0.9), Some(4), 5)
    );
    assert_eq!(cont.top_p, ContinueOptions::default().top_p);
    let melody = MelodyOptions::deserialize(&settings).unwrap();
    assert_eq!(
        (melody.pitch_temperature, melody.melody_range),
        (Some(0.5), Some([60, 72]))
    );
    let take = TakeOptions::deserialize(&settings).unwrap();
    assert_eq!(
        (take.live.from_bar, take.region, take.live.seed),
        (2, Some([1, 3]), 5)
    );
    for kind in TaskKind::ALL
        .iter()
        .filter(|k| **k != TaskKind::Harmonization)
    {
        assert!(kind.check(&settings).is_ok(), "{}", kind.name());
    }
    // A setting out of its range is named by the task that reads it, and only by it.
    let busy = serde_json::json!({ "density": 9 });
    let bad = TaskKind::Accompaniment.check(&busy).unwrap_err();
    assert_eq!(bad.field, "density");
    assert!(TaskKind::Melody.check(&busy).is_ok());
    // The take reads the same words: its settings checked, a continuation's `bars: null`
    // (a token limit alone) no error.
    let take = TaskKind::Live.check(&serde_json::json!({ "pianoTemperature": 20 }));
    assert_eq!(take.unwrap_err().field, "pianoTemperature");
    assert!(
        TaskKind::Live
            .check(&serde_json::json!({ "bars": null, "tokens": 64 }))
            .is_ok()
    );
    let backwards = TaskKind::Live.check(&serde_json::json!({ "region": [4, 2] }));
    assert_eq!(backwards.unwrap_err().field, "region");
    let unreadable = serde_json::json!({ "seed": "one" });
    let bad = TaskKind::Continuation.check(&unreadable).unwrap_err();
    assert_eq!(bad.field, "settings");
    assert!(bad.message.contains("not readable"), "{}", bad.message);
}

/// `value` set as the setting `key` of a task's otherwise default settings: the first task
/// whose settings have it (`None`: no task's).
fn checked_with(key: &str, value: f64) -> Option<Result<(), BadOption>> {
    let number = if value.fract() == 0.0 && value.abs() < 9.0e15 {
        serde_json::json!(value as i64)
    } else {
        serde_json::json!(value)
    };
    let defaults = [
        (
            TaskKind::Accompaniment,
            serde_json::to_value(AccompanyOptions::default()),
        ),
        (
            TaskKind::Continuation,
            serde_json::to_value(ContinueOptions::default()),
        ),
        (
            TaskKind::Melody,
            serde_json::to_value(MelodyOptions::default()),
        ),
    ];
    defaults.into_iter().find_map(|(kind, json)| {
        let mut json = json.expect("options serialise");
        json.get(key)?;
        json[key] = number.clone();
        Some(kind.check(&json))
    })
}

/// The cases the page's tests run too (`tests/options-cases.json`), through the settings of the
/// task that reads each, where the value fits the field.
#[test]
fn the_shared_cases_give_the_same_words_through_the_options() {
    for case in crate::generate::limits::tests::cases() {
        let fits = case.value.fract() == 0.0 && case.value >= 0.0
            || !crate::generate::limits::limit(&case.key).integer;
        if fits && case.value.is_finite() {
            let checked = checked_with(&case.key, case.value)
                .unwrap_or_else(|| panic!("no task reads the setting {}", case.key));
            match &case.problem {
                None => assert!(
                    checked.is_ok(),
                    "{} = {}: {checked:?}",
                    case.key,
                    case.value
                ),
                Some(p) => {
                    let bad = checked.expect_err(&case.key);
                    assert_eq!(
                        (bad.field, bad.message.as_str()),
                        (case.key.as_str(), p.as_str())
                    );
                }
            }
        }
    }
}
