//! The family of model kinds, as `model/pe/family.rs` is the family of encodings and
//! `studio/family.rs` the family of generation tasks: what each kind of model reads and learns
//! from ([`Kind`]), and the one table that lists every kind (`kinds!`, below).
//!
//! Adding a kind of model is its name in [`Task`] (`model/config.rs`: what configs and
//! manifests call it), one file here that implements [`Kind`] (its sizes, its default windows,
//! its loss, what a piece needs to teach it, and its windows), its data code (the features it
//! reads), a studio row for the task it serves, and one row of the table:
//!
//! ```text
//! kinds! {
//!     ...
//!     MyKind => my_kind::MyKind;
//! }
//! ```
//!
//! The table derives [`Task`]'s methods from the rows; training, fine-tuning, the corpora and
//! the model's checks reach each kind through them, and nowhere else matches on the kind.

use rand::rngs::StdRng;

use super::corpus::{Batch, Corpus, Piece, WindowSpec};
use crate::model::config::{Conditioning, PerformerConfig, Task};

mod accompaniment;
mod continuation;
mod harmonization;
mod melody;

/// What a file needs to teach a kind when a person fine-tunes on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// A melody track (the kind reads the melody).
    Melody,
    /// A melody track and a piano track (it learns the piano under the melody).
    MelodyAndPiano,
    /// Notes of either (it learns the music as it goes on).
    Notes,
}

impl Needs {
    /// What a file with `melody` melody notes and `accompaniment` piano notes lacks, in words.
    pub fn lacking(self, melody: usize, accompaniment: usize) -> Option<String> {
        let reads_melody = self != Needs::Notes;
        if reads_melody && melody == 0 {
            Some("no track is marked as the melody: choose the melody track for this file".into())
        } else if self == Needs::MelodyAndPiano && accompaniment == 0 {
            Some(
                "it has no accompaniment to learn from: besides the melody it needs a track \
                 marked piano"
                    .into(),
            )
        } else if self == Needs::Notes && melody + accompaniment == 0 {
            Some("it has no melody or piano notes to learn from".into())
        } else {
            None
        }
    }
}

/// One kind of model: how many values it reads and writes a step, how it is trained, and the
/// windows of a corpus it learns from.
pub trait Kind {
    /// Inputs and outputs per step (`vocab`: the token vocabulary, for a kind that reads
    /// tokens; `conditioning`: what a conditioned kind reads besides).
    fn sizes(vocab: usize, conditioning: Option<Conditioning>) -> (usize, usize);

    /// The input width a config of this kind may have besides `sized` (a harmonizer without
    /// the context).
    fn input_width(_config: &PerformerConfig, sized: usize) -> usize {
        sized
    }

    /// Whether it reads an accompaniment's conditioning (the lanes, the piano's step before).
    const CONDITIONED: bool = false;
    /// A training run's window by default, and fine-tuning's (in its steps: sixteenths, beats
    /// or tokens).
    const TRAIN_WINDOW: usize;
    const TUNE_WINDOW: usize;
    /// Whether a step's target is one class of many (else one bit per pitch, or a token).
    const CLASSES: bool = false;
    /// What a file needs to teach it.
    const NEEDS: Needs;

    /// Whether `piece` gives windows of `len` to learn from.
    fn learns_from(piece: &Piece, len: usize) -> bool;

    /// Why none of `corpus`'s pieces does, in words.
    fn none_to_learn(corpus: &Corpus, len: usize) -> String;

    /// Where its windows of `len` may start in `piece`.
    fn starts(piece: &Piece, len: usize) -> Vec<usize>;

    /// The window of `piece` at `start`, transposed by `shift`; `rng` draws what a training
    /// window varies (none for fixed held-out windows).
    fn window(
        piece: &Piece,
        spec: &WindowSpec,
        start: usize,
        shift: i32,
        rng: Option<&mut StdRng>,
    ) -> Batch;

    /// The longest window `piece` gives, in [`Kind::UNIT`]s.
    fn longest(piece: &Piece) -> usize {
        piece.range.len()
    }

    /// What [`Kind::longest`] counts, in words.
    const UNIT: &'static str = "steps";
}

/// The table of kinds: `Variant => file::Type;` per row, a variant of [`Task`] each. Derives
/// `Task`'s dispatch to each kind's [`Kind`].
macro_rules! kinds {
    ($( $kind:ident => $ty:ty ;)*) => {
        impl Task {
            /// Every kind, in the table's order.
            pub const ALL: &'static [Task] = &[$(Task::$kind),*];

            /// Inputs and outputs per step ([`Kind::sizes`]).
            pub fn sizes(self, vocab: usize, conditioning: Option<Conditioning>) -> (usize, usize) {
                match self { $( Task::$kind => <$ty>::sizes(vocab, conditioning), )* }
            }

            /// [`Kind::input_width`].
            pub fn input_width(self, config: &PerformerConfig, sized: usize) -> usize {
                match self { $( Task::$kind => <$ty>::input_width(config, sized), )* }
            }

            /// [`Kind::CONDITIONED`].
            pub fn conditioned(self) -> bool {
                match self { $( Task::$kind => <$ty>::CONDITIONED, )* }
            }

            /// [`Kind::TRAIN_WINDOW`].
            pub fn train_window(self) -> usize {
                match self { $( Task::$kind => <$ty>::TRAIN_WINDOW, )* }
            }

            /// [`Kind::TUNE_WINDOW`].
            pub fn tune_window(self) -> usize {
                match self { $( Task::$kind => <$ty>::TUNE_WINDOW, )* }
            }

            /// [`Kind::CLASSES`].
            pub fn learns_classes(self) -> bool {
                match self { $( Task::$kind => <$ty>::CLASSES, )* }
            }

            /// [`Kind::NEEDS`].
            pub fn needs(self) -> Needs {
                match self { $( Task::$kind => <$ty>::NEEDS, )* }
            }

            /// [`Kind::learns_from`].
            pub fn learns_from(self, piece: &Piece, len: usize) -> bool {
                match self { $( Task::$kind => <$ty>::learns_from(piece, len), )* }
            }

            /// [`Kind::none_to_learn`].
            pub fn none_to_learn(self, corpus: &Corpus, len: usize) -> String {
                match self { $( Task::$kind => <$ty>::none_to_learn(corpus, len), )* }
            }

            /// [`Kind::starts`].
            pub fn starts(self, piece: &Piece, len: usize) -> Vec<usize> {
                match self { $( Task::$kind => <$ty>::starts(piece, len), )* }
            }

            /// [`Kind::window`].
            pub fn window(
                self,
                piece: &Piece,
                spec: &WindowSpec,
                start: usize,
                shift: i32,
                rng: Option<&mut StdRng>,
            ) -> Batch {
                match self { $( Task::$kind => <$ty>::window(piece, spec, start, shift, rng), )* }
            }

            /// [`Kind::longest`].
            pub fn longest(self, piece: &Piece) -> usize {
                match self { $( Task::$kind => <$ty>::longest(piece), )* }
            }

            /// [`Kind::UNIT`].
            pub fn unit(self) -> &'static str {
                match self { $( Task::$kind => <$ty>::UNIT, )* }
            }
        }
    };
}

// Every kind of model, one row each (a variant of `Task` and its file here).
kinds! {
    Accompaniment => accompaniment::Accompaniment;
    Continuation => continuation::Continuation;
    Harmonization => harmonization::Harmonization;
    Melody => melody::Melody;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::pe::{PeConfig, PeKind};
    use crate::music::tokens::VOCAB_SIZE;

    #[test]
    fn every_kind_is_a_row_and_its_presets_fit_its_sizes() {
        for &task in Task::ALL {
            let name = serde_json::to_value(task).unwrap();
            let parsed: Task = name.as_str().unwrap().parse().unwrap();
            assert_eq!(parsed, task, "{name} reads back");
            let config = PerformerConfig::tiny(task, VOCAB_SIZE, PeConfig::new(PeKind::SineSpe));
            config.validate_for(VOCAB_SIZE).unwrap();
            assert_eq!(
                (config.input_dim, config.output_dim),
                task.sizes(VOCAB_SIZE, None)
            );
            assert!(task.train_window() >= task.tune_window() && task.tune_window() >= 16);
            // Only a conditioned kind keeps the conditioning it is given.
            let conditioned = config.with_inputs(Some(Conditioning::AUTOREGRESSIVE));
            assert_eq!(conditioned.conditioning.is_some(), task.conditioned());
        }
        assert_eq!(Task::ALL.len(), 4);
        assert!(Task::Continuation.reads_tokens() && !Task::Melody.reads_tokens());
    }

    #[test]
    fn what_a_file_lacks_is_said_for_what_the_kind_needs() {
        let lacks = |needs: Needs, melody, piano| needs.lacking(melody, piano);
        assert!(
            lacks(Needs::Melody, 0, 40)
                .unwrap()
                .contains("melody track")
        );
        assert_eq!(lacks(Needs::Melody, 10, 0), None);
        assert!(
            lacks(Needs::MelodyAndPiano, 10, 0)
                .unwrap()
                .contains("piano")
        );
        assert_eq!(lacks(Needs::MelodyAndPiano, 10, 5), None);
        assert_eq!(lacks(Needs::Notes, 0, 5), None);
        assert!(
            lacks(Needs::Notes, 0, 0)
                .unwrap()
                .contains("no melody or piano notes")
        );
        assert_eq!(Task::Accompaniment.needs(), Needs::MelodyAndPiano);
        assert_eq!(Task::Continuation.needs(), Needs::Notes);
    }
}
