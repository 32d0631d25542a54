//! The continuation model: REMI tokens in, the next token out.

use rand::rngs::StdRng;

use super::{Kind, Needs};
use crate::data::corpus::{Batch, Corpus, Piece, WindowSpec};
use crate::model::config::Conditioning;

pub struct Continuation;

impl Kind for Continuation {
    fn sizes(vocab: usize, _conditioning: Option<Conditioning>) -> (usize, usize) {
        (vocab, vocab)
    }

    /// Tokens; 256 for fine-tuning.
    const TRAIN_WINDOW: usize = 512;
    const TUNE_WINDOW: usize = 256;
    const NEEDS: Needs = Needs::Notes;

    /// At least `len + 1` tokens after some bar line.
    fn learns_from(piece: &Piece, len: usize) -> bool {
        piece
            .token_bars
            .first()
            .is_some_and(|&b| piece.tokens.len() > b + len)
    }

    fn none_to_learn(corpus: &Corpus, len: usize) -> String {
        let longest = corpus
            .pieces
            .iter()
            .map(|p| p.tokens.len())
            .max()
            .unwrap_or(0);
        format!("no piece is long enough for windows of {len} tokens (the longest has {longest})")
    }

    /// Its bar lines with `len + 1` tokens after them.
    fn starts(piece: &Piece, len: usize) -> Vec<usize> {
        piece
            .token_bars
            .iter()
            .copied()
            .filter(|&b| b + len < piece.tokens.len())
            .collect()
    }

    fn window(
        piece: &Piece,
        spec: &WindowSpec,
        start: usize,
        shift: i32,
        _rng: Option<&mut StdRng>,
    ) -> Batch {
        let (ids, coordinates) = piece.token_window(spec, start, shift);
        Batch::Tokens {
            ids: vec![ids],
            coordinates: coordinates.into_iter().collect(),
        }
    }

    const UNIT: &'static str = "tokens";

    /// Its tokens after the first bar line.
    fn longest(piece: &Piece) -> usize {
        let first = piece
            .token_bars
            .first()
            .copied()
            .unwrap_or(piece.tokens.len());
        piece.tokens.len().saturating_sub(first + 1)
    }
}
