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
            "the temperature",
        ),
        (
            Options {
                piano_temperature: Some(11.0),
                ..base()
            },
            "the temperature",
        ),
        (
            Options {
                hold_temperature: Some(f32::NAN),
                ..base()
            },
            "the hold temperature",
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
                tokens: 0,
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
    assert_eq!(base().length().tokens, base().tokens);
    assert_eq!(given.sampling().seed, 7);
}
