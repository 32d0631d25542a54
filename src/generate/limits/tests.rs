//! The ranges file parses, and the cases the page's tests run too (`tests/options-cases.json`)
//! give the same words here (and through each task's `studio::Asked::check`: its tests).

use super::*;

/// One of `tests/options-cases.json`'s cases.
#[derive(Deserialize)]
pub(crate) struct Case {
    pub key: String,
    pub value: f64,
    /// The message, or `None` when the value is allowed.
    pub problem: Option<String>,
}

/// Every case of `tests/options-cases.json`.
pub(crate) fn cases() -> Vec<Case> {
    serde_json::from_str(include_str!("../../../tests/options-cases.json")).expect("cases")
}

#[test]
fn the_shared_cases_give_the_same_words_as_the_page() {
    let cases = cases();
    assert!(cases.len() >= 10);
    for case in cases {
        let said = limit(&case.key).check(case.value).err();
        assert_eq!(said, case.problem, "{} = {}", case.key, case.value);
    }
}

#[test]
fn every_setting_parses_with_sensible_bounds() {
    assert!(!all().is_empty());
    for l in all() {
        assert!(l.max.is_none_or(|m| m > l.min), "{}", l.key);
        assert!(l.step > 0.0, "{}", l.key);
        if let Some(d) = l.default {
            assert!(l.allows(d), "{}'s default {d} is out of its range", l.key);
        }
        assert!(l.flag.starts_with("--"), "{}", l.key);
        assert_eq!(limit(&l.key), l);
    }
}
