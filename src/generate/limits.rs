//! Every generation setting's range and default, written once in `settings/options.json` and read
//! here (the generators, the Worker boundary through each task's settings, `studio::Asked`, the CLI) and by the
//! page (`www/options.js`: its inputs' limits and the same messages). Tests run the same cases
//! through both (`tests/options-cases.json`).

use std::sync::LazyLock;

use serde::Deserialize;

/// One setting's range.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Limit {
    /// Its name in the settings' JSON (the page's, and each task's settings in `studio`).
    pub key: String,
    /// The CLI's flag for it.
    pub flag: String,
    /// The page's input for it, if any.
    pub input: Option<String>,
    /// What it is, in the words of its messages ("the piano's temperature").
    pub what: String,
    /// Its unit, after the bounds ("tokens").
    #[serde(default)]
    pub unit: Option<String>,
    pub min: f64,
    pub max: Option<f64>,
    /// The bounds themselves are excluded.
    #[serde(default)]
    pub above: bool,
    #[serde(default)]
    pub below: bool,
    /// Whole numbers only.
    #[serde(default)]
    pub integer: bool,
    pub step: f64,
    /// The value the page and the CLI start from (`None`: the model's own).
    pub default: Option<f64>,
}

#[derive(Deserialize)]
struct File {
    options: Vec<Limit>,
}

static LIMITS: LazyLock<Vec<Limit>> = LazyLock::new(|| {
    serde_json::from_str::<File>(include_str!("../../settings/options.json"))
        .expect("settings/options.json is valid (a test checks it)")
        .options
});

/// Every setting's range, in the file's order.
pub fn all() -> &'static [Limit] {
    &LIMITS
}

/// The range of the setting called `key` in the settings' JSON.
///
/// # Panics
/// When `settings/options.json` has no such setting (a programming error; a test checks every key
/// the code asks for).
pub fn limit(key: &str) -> &'static Limit {
    LIMITS
        .iter()
        .find(|l| l.key == key)
        .unwrap_or_else(|| panic!("settings/options.json has no setting `{key}`"))
}

/// The default of the setting called `key` (`None`: the model's own).
pub fn default(key: &str) -> Option<f64> {
    limit(key).default
}

/// A number as the messages write it: no trailing zeros, thousands apart.
fn number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() >= 10_000.0 {
        let digits = format!("{}", x.abs() as u64);
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(' ');
            }
            out.push(c);
        }
        if x < 0.0 { format!("-{out}") } else { out }
    } else {
        format!("{x}")
    }
}

impl Limit {
    /// What a value must be, in words: "the piano's temperature must be above 0 and at
    /// most 10".
    pub fn message(&self) -> String {
        let unit = self
            .unit
            .as_ref()
            .map_or(String::new(), |u| format!(" {u}"));
        let low = format!(
            "{} {}",
            if self.above { "above" } else { "at least" },
            number(self.min)
        );
        match self.max {
            Some(max) if self.integer && !self.above && !self.below => format!(
                "{} must be a whole number from {} to {}{unit}",
                self.what,
                number(self.min),
                number(max)
            ),
            Some(max) => format!(
                "{} must be {low} and {} {}{unit}",
                self.what,
                if self.below { "below" } else { "at most" },
                number(max)
            ),
            None => format!("{} must be {low}{unit}", self.what),
        }
    }

    /// Whether `value` is in range.
    pub fn allows(&self, value: f64) -> bool {
        let low = if self.above {
            value > self.min
        } else {
            value >= self.min
        };
        let high = self
            .max
            .is_none_or(|m| if self.below { value < m } else { value <= m });
        value.is_finite() && low && high && (!self.integer || value.fract() == 0.0)
    }

    /// [`Limit::check`] for a flag of the CLI: the message names the flag and the value given
    /// ("--echo 12: the echo must be at least 0 and at most 10").
    pub fn check_flag(&self, value: f64) -> Result<(), String> {
        self.check(value)
            .map_err(|m| format!("{} {}: {m}", self.flag, number(value)))
    }

    /// `Ok` when `value` is in range, else [`Limit::message`].
    pub fn check(&self, value: f64) -> Result<(), String> {
        if self.allows(value) {
            Ok(())
        } else {
            Err(self.message())
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
