//! The family of generation tasks, as `model/pe/family.rs` is the family of encodings: what a
//! task provides ([`Studio`]), and the one table that lists every task the page, its Worker and
//! the CLI can ask for (`tasks!`, invoked in `studio.rs`).
//!
//! Adding a task is one studio file that implements [`Studio`] (its options, what it reads of
//! the model's defaults, generate with its alternatives, its attention map and its report in
//! words), its data and generate code, and one row of the table:
//!
//! ```text
//! tasks! {
//!     ...
//!     MyTask = "my-task" => my_task::MyTask;
//! }
//! ```
//!
//! The row names the task as the Worker's `generate` request and the CLI's `--task` say it, and
//! the table derives [`super::TaskKind`] and its [`Family`] dispatch from it; the Session's one
//! `generate` and one `attention`, and the CLI's `generate`, reach every task through
//! [`generate_json`], [`Family::generate`] and [`attention`], each task reading its settings
//! from the same JSON object ([`parse_options`]). A test adds a toy task the
//! same way (`studio/family_tests.rs`). The live take is a row too (`studio/take.rs`: a
//! written melody played as a take); while a person plays, the page streams the same take
//! through the Session's `liveStart`, `liveStep` and `liveStop`.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::future::Future;
use std::rc::Rc;

use burn::tensor::Device;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{BadOption, Harmonized, Progress};
use crate::generate::{GenerateError, MapFeatures};
use crate::model::config::Task;
use crate::model::performer::Performer;
use crate::models::ModelDefaults;
use crate::music::dynamics::Dynamics;
use crate::music::piece::Piece;

/// What a task runs with: the model, its own defaults (chosen on validation songs, from its
/// manifest entry or run), the device, and the side models that give written piano its
/// dynamics and its pedal.
#[derive(Clone, Copy)]
pub struct Run<'a> {
    pub model: &'a Performer,
    pub defaults: &'a ModelDefaults,
    pub device: &'a Device,
    pub dynamics: Option<&'a Rc<Dynamics>>,
    /// The learnt pedal for written piano (the Session's or the CLI's; `None`: no pedal where
    /// it would be learnt).
    pub pedal: Option<&'a Rc<crate::music::pedal::model::PedalModel>>,
}

/// What a caller keeps for one model between generations: each task's own cache
/// ([`Studio::Cache`]: the harmonizer's probabilities for the last melody it read), made when
/// first asked for. (The features of its last attention map are kept apart, in a
/// [`MapFeatures`]: a generation never reads them, and a map drawn while one runs keeps its.)
#[derive(Default)]
pub struct Kept {
    caches: HashMap<TypeId, Box<dyn Any>>,
}

impl Kept {
    /// The cache of type `C`, made empty the first time.
    pub fn cache<C: Default + 'static>(&mut self) -> &mut C {
        self.caches
            .entry(TypeId::of::<C>())
            .or_insert_with(|| Box::new(C::default()))
            .downcast_mut()
            .expect("a cache is stored under its own type")
    }
}

/// One piece a generation wrote, and for a continuation the tokens behind it.
#[derive(Clone, Debug)]
pub struct Written {
    pub piece: Piece,
    /// A continuation's tokens: those the model read first and those it added.
    pub tokens: Option<Tokens>,
}

/// The tokens of a continuation ([`super::Continued`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tokens {
    pub prompt: Vec<u32>,
    pub added: Vec<u32>,
}

impl From<Piece> for Written {
    fn from(piece: Piece) -> Self {
        Self {
            piece,
            tokens: None,
        }
    }
}

/// What a generation gave back, whatever the task.
#[derive(Clone, Debug)]
pub enum Generated {
    /// One piece for each alternative asked (the first the seed's own).
    Pieces(Vec<Written>),
    /// Chord cells for the chord lane (the harmonizer).
    Chords(Harmonized),
}

impl Generated {
    /// Pieces from plain pieces.
    pub fn pieces(pieces: Vec<Piece>) -> Self {
        Self::Pieces(pieces.into_iter().map(Written::from).collect())
    }

    /// As the page reads it: a piece when one was written, `{alternatives: [piece, …]}` for
    /// several, the chords as [`Harmonized`].
    pub fn to_json(&self) -> Result<String, GenerateError> {
        #[derive(Serialize)]
        struct Alternatives<'a> {
            alternatives: Vec<&'a Piece>,
        }
        let text = match self {
            Generated::Pieces(pieces) if pieces.len() == 1 => {
                serde_json::to_string(&pieces[0].piece)
            }
            Generated::Pieces(pieces) => serde_json::to_string(&Alternatives {
                alternatives: pieces.iter().map(|w| &w.piece).collect(),
            }),
            Generated::Chords(chords) => serde_json::to_string(chords),
        };
        text.map_err(|e| GenerateError::Read(format!("the result could not be written: {e}")))
    }

    /// The pieces written (none for chords).
    pub fn into_pieces(self) -> Vec<Written> {
        match self {
            Generated::Pieces(pieces) => pieces,
            Generated::Chords(_) => Vec::new(),
        }
    }
}

/// One generation task. Its futures run on the page's one thread (and under `pollster` in the
/// CLI), so nothing here needs to be `Send`.
#[allow(async_fn_in_trait)]
pub trait Studio {
    /// The kind of model it runs (a model of another kind is refused in words).
    const MODEL: Task;
    /// Its settings, read from the settings' JSON: the page's for this task, or the one the
    /// CLI's flags fill for any task in the page's words (a task reads what it knows of it).
    type Options: DeserializeOwned;
    /// What its settings are called in the words of an error ("the chord settings").
    const SETTINGS: &'static str = "the generation settings";
    /// What it does with a piece's music, in the words of an error ("give the MIDI file to
    /// accompany").
    const VERB: &'static str = "work from";
    /// Whether it can write from the lanes alone (a plan of chords and phrases), without a
    /// piece's music.
    const WRITES_FROM_A_PLAN: bool = false;
    /// What it keeps for a model between calls ([`Kept::cache`]).
    type Cache: Default + 'static;

    /// What is wrong with its settings, in words, and which setting it is (the CLI asks first,
    /// to name its flag; `generate` and `attention` check them as they start).
    fn check(_options: &Self::Options) -> Result<(), BadOption> {
        Ok(())
    }

    /// What it writes for `piece`: every alternative the options ask for (the k-th with seed
    /// `seed + k`, each the piece that seed writes alone), with progress (return `false` to
    /// cancel).
    async fn generate<F, Fut>(
        run: &Run<'_>,
        piece: &Piece,
        options: &Self::Options,
        cache: &mut Self::Cache,
        on_progress: F,
    ) -> Result<Generated, GenerateError>
    where
        F: FnMut(Progress) -> Fut,
        Fut: Future<Output = bool>;

    /// The watched head's attention over `piece` as it stands, sent as rows through
    /// `on_progress` (`map`: the features kept from the last pass); returns the positions
    /// mapped. `None`: this task draws no map.
    async fn attention<F, Fut>(
        _run: &Run<'_>,
        _piece: &Piece,
        _options: &Self::Options,
        _map: &mut MapFeatures,
        _on_progress: F,
    ) -> Option<Result<usize, GenerateError>>
    where
        F: FnMut(Progress) -> Fut,
        Fut: Future<Output = bool>,
    {
        None
    }

    /// What `written` holds that `before` did not, in words (the CLI's report line).
    fn describe(before: &Piece, written: &Written, options: &Self::Options) -> String;
}

/// The dispatch the table derives for its kind enum: every call the Session and the CLI make,
/// by task.
#[allow(async_fn_in_trait)]
pub trait Family: Copy + std::str::FromStr<Err = String> + 'static {
    /// The task's name (the table's).
    fn name(self) -> &'static str;

    /// The kind of model it runs.
    fn model(self) -> Task;

    /// [`Studio::VERB`].
    fn verb(self) -> &'static str;

    /// [`Studio::WRITES_FROM_A_PLAN`].
    fn writes_from_a_plan(self) -> bool;

    /// The first task of the table that runs models of `task` (the attention map's: a map is
    /// drawn for a model).
    fn for_model(task: Task) -> Option<Self>;

    /// What is wrong with `settings` (the settings' JSON) for this task, in words, and which
    /// setting it is (`field` "settings" where they are not readable).
    fn check(self, settings: &Value) -> Result<(), BadOption>;

    /// [`Studio::generate`] with the task's options read from `settings` (the settings' JSON).
    async fn generate<F, Fut>(
        self,
        run: &Run<'_>,
        piece: &Piece,
        settings: &Value,
        kept: &mut Kept,
        on_progress: F,
    ) -> Result<Generated, GenerateError>
    where
        F: FnMut(Progress) -> Fut,
        Fut: Future<Output = bool>;

    /// [`Studio::attention`] (`map`: the features the model's last map kept), in words where
    /// the task draws no map.
    async fn attention<F, Fut>(
        self,
        run: &Run<'_>,
        piece: &Piece,
        settings: &Value,
        map: &mut MapFeatures,
        on_progress: F,
    ) -> Result<usize, GenerateError>
    where
        F: FnMut(Progress) -> Fut,
        Fut: Future<Output = bool>;

    /// [`Studio::describe`] with the task's options read from `settings`.
    fn describe(self, before: &Piece, written: &Written, settings: &Value) -> String;
}

/// Refuses a model of another kind than `T`'s, in words.
pub fn check_model<T: Studio>(model: &Performer) -> Result<(), GenerateError> {
    if model.config.task == T::MODEL {
        Ok(())
    } else {
        Err(GenerateError::WrongTask {
            model: model.config.task,
            wanted: T::MODEL,
        })
    }
}

/// Task `T` over `piece` with its `options`: the model's kind checked, its cache from `kept`.
/// What every row's `generate` comes to.
pub async fn run_task<T: Studio, F, Fut>(
    run: &Run<'_>,
    piece: &Piece,
    options: &T::Options,
    kept: &mut Kept,
    on_progress: F,
) -> Result<Generated, GenerateError>
where
    F: FnMut(Progress) -> Fut,
    Fut: Future<Output = bool>,
{
    check_model::<T>(run.model)?;
    T::generate(run, piece, options, kept.cache::<T::Cache>(), on_progress).await
}

/// Reads task `T`'s options from the settings' JSON, saying in words where they are not
/// readable (their ranges are the task's to check, once, when it runs: [`Studio::check`]).
pub fn parse_options<T: Studio>(settings: &Value) -> Result<T::Options, BadOption> {
    T::Options::deserialize(settings).map_err(|e| BadOption {
        field: "settings",
        message: format!("{} are not readable: {e}", T::SETTINGS),
    })
}

/// The settings' JSON text as the page sends it, read, in words where it is not JSON.
pub fn read_settings(text: &str) -> Result<Value, GenerateError> {
    serde_json::from_str(text)
        .map_err(|e| GenerateError::Read(format!("the settings are not readable: {e}")))
}

/// `names` in words: "a, b or c".
pub fn or_list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_string(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// The Session's `generate`: the task named `task` of the table `T` over `piece` with the
/// page's settings (JSON), its result as the page reads it (JSON).
pub async fn generate_json<T: Family, F, Fut>(
    task: &str,
    run: &Run<'_>,
    piece: &Piece,
    settings: &str,
    kept: &mut Kept,
    on_progress: F,
) -> Result<String, GenerateError>
where
    F: FnMut(Progress) -> Fut,
    Fut: Future<Output = bool>,
{
    let kind: T = task.parse().map_err(GenerateError::Read)?;
    let settings = read_settings(settings)?;
    kind.generate(run, piece, &settings, kept, on_progress)
        .await?
        .to_json()
}

/// The Session's `attention`: the map of the task that runs `run.model`'s kind, with the page's
/// settings (JSON).
pub async fn attention<T: Family, F, Fut>(
    run: &Run<'_>,
    piece: &Piece,
    settings: &str,
    map: &mut MapFeatures,
    on_progress: F,
) -> Result<usize, GenerateError>
where
    F: FnMut(Progress) -> Fut,
    Fut: Future<Output = bool>,
{
    let task = run.model.config.task;
    let kind = T::for_model(task).ok_or_else(|| {
        GenerateError::Read(format!("no task of this page runs a {task:?} model"))
    })?;
    let settings = read_settings(settings)?;
    kind.attention(run, piece, &settings, map, on_progress)
        .await
}

/// The table of tasks: `Kind = "name" => file::Type;` per row. Derives `TaskKind` (every task,
/// in the table's order, named as the Worker and the CLI name it) and its [`Family`] dispatch.
#[macro_export]
#[doc(hidden)]
macro_rules! tasks {
    ($( $(#[$doc:meta])* $kind:ident = $name:literal => $ty:ty ;)*) => {
        /// Every generation task, as the table lists them.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum TaskKind {
            $( $(#[$doc])* $kind, )*
        }

        impl TaskKind {
            /// Every task, in the table's order.
            pub const ALL: &'static [TaskKind] = &[$(TaskKind::$kind),*];
        }

        impl std::str::FromStr for TaskKind {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $( $name => Ok(TaskKind::$kind), )*
                    _ => Err(format!(
                        "unknown task `{s}`: use {}",
                        [$($name),*].join(", ")
                    )),
                }
            }
        }

        impl $crate::studio::family::Family for TaskKind {
            fn name(self) -> &'static str {
                match self {
                    $( TaskKind::$kind => $name, )*
                }
            }

            fn model(self) -> $crate::model::config::Task {
                match self {
                    $( TaskKind::$kind => <$ty as $crate::studio::family::Studio>::MODEL, )*
                }
            }

            fn verb(self) -> &'static str {
                match self {
                    $( TaskKind::$kind => <$ty as $crate::studio::family::Studio>::VERB, )*
                }
            }

            fn writes_from_a_plan(self) -> bool {
                match self {
                    $( TaskKind::$kind => <$ty as $crate::studio::family::Studio>::WRITES_FROM_A_PLAN, )*
                }
            }

            fn for_model(task: $crate::model::config::Task) -> Option<Self> {
                Self::ALL.iter().copied().find(|k| k.model() == task)
            }

            fn check(
                self,
                settings: &serde_json::Value,
            ) -> Result<(), $crate::studio::BadOption> {
                use $crate::studio::family::parse_options;
                match self {
                    $( TaskKind::$kind => {
                        <$ty as $crate::studio::family::Studio>::check(&parse_options::<$ty>(settings)?)
                    } )*
                }
            }

            async fn generate<F, Fut>(
                self,
                run: &$crate::studio::family::Run<'_>,
                piece: &$crate::music::piece::Piece,
                settings: &serde_json::Value,
                kept: &mut $crate::studio::family::Kept,
                on_progress: F,
            ) -> Result<$crate::studio::family::Generated, $crate::generate::GenerateError>
            where
                F: FnMut($crate::studio::Progress) -> Fut,
                Fut: std::future::Future<Output = bool>,
            {
                use $crate::studio::family::{check_model, parse_options, run_task};
                match self {
                    $( TaskKind::$kind => {
                        check_model::<$ty>(run.model)?;
                        let options = parse_options::<$ty>(settings)?;
                        run_task::<$ty, _, _>(run, piece, &options, kept, on_progress).await
                    } )*
                }
            }

            async fn attention<F, Fut>(
                self,
                run: &$crate::studio::family::Run<'_>,
                piece: &$crate::music::piece::Piece,
                settings: &serde_json::Value,
                map: &mut $crate::generate::MapFeatures,
                on_progress: F,
            ) -> Result<usize, $crate::generate::GenerateError>
            where
                F: FnMut($crate::studio::Progress) -> Fut,
                Fut: std::future::Future<Output = bool>,
            {
                use $crate::studio::family::{Studio, check_model, or_list, parse_options};
                let drawn = match self {
                    $( TaskKind::$kind => {
                        check_model::<$ty>(run.model)?;
                        let options = parse_options::<$ty>(settings)?;
                        <$ty as Studio>::attention(run, piece, &options, map, on_progress).await
                    } )*
                };
                drawn.unwrap_or_else(|| {
                    let others: Vec<&str> = Self::ALL
                        .iter()
                        .filter(|k| **k != self)
                        .map(|k| k.name())
                        .collect();
                    Err($crate::generate::GenerateError::Read(format!(
                        "a {} model's attention is not shown: pick a model of another task ({})",
                        self.name(),
                        or_list(&others)
                    )))
                })
            }

            fn describe(
                self,
                before: &$crate::music::piece::Piece,
                written: &$crate::studio::family::Written,
                settings: &serde_json::Value,
            ) -> String {
                use $crate::studio::family::{Studio, parse_options};
                match self {
                    $( TaskKind::$kind => match parse_options::<$ty>(settings) {
                        Ok(options) => <$ty as Studio>::describe(before, written, &options),
                        Err(bad) => bad.message,
                    }, )*
                }
            }
        }
    };
}
