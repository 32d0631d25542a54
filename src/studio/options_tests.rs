//! The one options type the page and the CLI fill: its checks, in words, and the model's
//! defaults it fills in.

use super::*;
use crate::generate::PianoSampling;
use crate::generate::binarize::Binarize;

#[test]
fn options_are_checked_in_words_and_fill_in_the_models_defaults() {
    let bad = |o: Options| {
        let bad = o.check().unwrap_err();
        assert!(
            serde_json::to_value(Options::default())
                .unwrap()
                .get(bad.field)
                .is_some(),
            "{} is not a setting",
            bad.field
        );
        GenerateError::from(bad).to_string()
    };
    let base = Options::default;
    assert!(base().check().is_ok());
    for (options, words) in [
        (
            Options {
                temperature: Some(0.0),
                ..base()
            },
            "the continuation's temperature",
        ),
        (
            Options {
                piano_temperature: Some(11.0),
                ..base()
            },
            "the piano's temperature",
        ),
        (
            Options {
                hold_temperature: Some(f32::NAN),
                ..base()
            },
            "the piano's hold temperature",
        ),
        (
            Options {
                top_p: 1.5,
                ..base()
            },
            "top-p",
        ),
        (
            Options {
                threshold: Some(0.0),
                ..base()
            },
            "the note threshold",
        ),
        (
            Options {
                region: Some([4, 4]),
                ..base()
            },
            "at least one bar",
        ),
        (
            Options {
                tokens: Some(0),
                ..base()
            },
            "the token limit",
        ),
        (
            Options {
                bars: Some(0),
                ..base()
            },
            "the length",
        ),
        (
            Options {
                context: Some(8),
                ..base()
            },
            "at least 32 tokens",
        ),
    ] {
        let said = bad(options);
        assert!(said.contains(words), "{said:?} should mention {words:?}");
    }

    // What is not given comes from the model; what is given wins.
    let model = PianoSampling::of_model(Some(0.8), Some(0.5));
    let given = Options {
        seed: 7,
        piano_temperature: Some(1.2),
        ..base()
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
    assert_eq!(base().binarize(Some(model_rule)), model_rule);
    let own = Options {
        threshold: Some(0.2),
        ..base()
    }
    .binarize(Some(model_rule));
    assert_eq!((own.threshold, own.gap), (0.2, 2));
    // A length in bars (8 by default) with a token limit of 256 a bar, unless one is given.
    assert_eq!((base().bars, base().tokens), (Some(8), None));
    assert_eq!(base().length().tokens, 8 * crate::studio::TOKENS_A_BAR);
    let given_limit = Options {
        tokens: Some(100),
        ..base()
    };
    assert_eq!(given_limit.length().tokens, 100);
    let no_bars = Options {
        bars: None,
        ..base()
    };
    assert_eq!(
        (no_bars.length().tokens, no_bars.length().bars),
        (512, None)
    );
    let many = Options {
        bars: Some(1000),
        ..base()
    };
    assert_eq!(many.length().tokens, crate::studio::MAX_TOKENS);
    assert_eq!(given.sampling().seed, 7);
    // A continuation holds the prompt's pace on bars nobody planned unless another density
    // is asked, which then holds on every bar.
    assert_eq!(
        base().sampling().density,
        Some(crate::generate::DEFAULT_DENSITY)
    );
    assert!(!base().sampling().density_on_plan);
    let sparse = Options {
        density: Some(0.5),
        ..base()
    };
    assert_eq!(sparse.sampling().density, Some(0.5));
    assert!(sparse.sampling().density_on_plan);
    // And its key, unless the hold is set (0: as the model plays).
    assert_eq!(base().sampling().key, crate::generate::DEFAULT_KEY);
    const { assert!(crate::generate::DEFAULT_KEY > 0.0) };
    let free = Options {
        key: Some(0.0),
        ..base()
    };
    assert_eq!(free.sampling().key, 0.0);
}

/// `value` set as the setting `key` of otherwise default options.
fn options_with(key: &str, value: f64) -> Options {
    let mut json = serde_json::to_value(Options::default()).expect("options serialise");
    json[key] = if value.fract() == 0.0 && value.abs() < 9.0e15 {
        serde_json::json!(value as i64)
    } else {
        serde_json::json!(value)
    };
    serde_json::from_value(json).unwrap_or_else(|e| panic!("{key} = {value}: {e}"))
}

/// The cases the page's tests run too (`tests/options-cases.json`), through the options the
/// Worker and the CLI fill, where the value fits the field.
#[test]
fn the_shared_cases_give_the_same_words_through_the_options() {
    for case in crate::generate::limits::tests::cases() {
        let fits = case.value.fract() == 0.0 && case.value >= 0.0
            || !crate::generate::limits::limit(&case.key).integer;
        if fits && case.value.is_finite() {
            let checked = options_with(&case.key, case.value).check();
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
