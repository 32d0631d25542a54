//! Songs as REMI prompts and back: a song's tokens, the last of them cut at a bar line, and a
//! song from tokens.

use super::GenerateError;
use crate::data::corpus::song_tokens;
use crate::music::chords::Chord;
use crate::music::grid::Grid;
use crate::music::labels::detect_structure;
use crate::music::midi::Song;
use crate::music::tokens::{self, STEPS_PER_BEAT, Token};

/// The REMI tokens of `song` (every pitched track; chords detected), without the final `Eos`
/// and without a last bar that notes only ring into (see `music_end`).
pub fn prompt_tokens(song: &Song) -> Result<Vec<u32>, GenerateError> {
    prompt_tokens_with(song, None)
}

/// [`prompt_tokens`] with the chord lane as a person sees it: `bar_chords` (cells from bar 0,
/// as [`crate::music::piece::Piece::bar_chords`] gives them) replace the detected chords on the
/// bars they cover; cells past the music are left out (they plan, see
/// [`super::continue_tokens`]).
pub fn prompt_tokens_with(
    song: &Song,
    bar_chords: Option<&[Vec<Option<Chord>>]>,
) -> Result<Vec<u32>, GenerateError> {
    let grid = Grid::for_song(song, STEPS_PER_BEAT);
    if song.note_count() == 0 || grid.num_steps() == 0 {
        return Err(GenerateError::EmptyPrompt);
    }
    // The lane as given wherever it reaches (detecting chords only for bars it stops short of).
    let mut chords = match bar_chords {
        Some(cells) if cells.len() >= grid.num_bars() => vec![None; grid.num_beats()],
        _ => detect_structure(song, &grid).chords,
    };
    if let Some(cells) = bar_chords {
        super::accompany::lay_cells(&mut chords, &grid, cells);
    }
    let mut ids =
        song_tokens(song, &grid, &chords).map_err(|e| GenerateError::Tokens(e.to_string()))?;
    if ids.last() == Some(&Token::Eos.id()) {
        ids.pop();
    }
    let end = grid.beat_at(song.end_tick());
    ids.truncate(music_end(&ids, end));
    Ok(ids)
}

/// Where the music of `ids` (a song's tokens, without `Eos`) ends: after its last bar that
/// starts a note and the bars after it that its notes (ending on beat `end`) fill at least
/// half of. A bar that notes only ring a little into (an export of "bars 1–8" keeps the
/// release of the last chord) is not music a continuation should come after: its new bars
/// start there.
fn music_end(ids: &[u32], end: f64) -> usize {
    let Some(last_note) = ids
        .iter()
        .rposition(|&id| matches!(Token::from_id(id), Some(Token::Pitch(_))))
    else {
        return ids.len();
    };
    // Each bar: its `Bar` token's index, first beat and length.
    let mut bars: Vec<(usize, usize, usize)> = Vec::new();
    let mut grammar = tokens::Grammar::new();
    for (i, &id) in ids.iter().enumerate() {
        let Some(token) = Token::from_id(id) else {
            return ids.len();
        };
        if grammar.advance(token).is_err() {
            return ids.len();
        }
        match token {
            Token::Bar => {
                let beat = bars.last().map_or(0, |&(_, b, len)| b + len);
                bars.push((i, beat, grammar.bar_beats()));
            }
            Token::Meter(_) => {
                if let Some(bar) = bars.last_mut() {
                    bar.2 = grammar.bar_beats();
                }
            }
            _ => {}
        }
    }
    // The bars after the last note's are kept only while the notes fill half of each.
    if let Some(&(i, ..)) = bars
        .iter()
        .find(|&&(i, beat, len)| i > last_note && beat as f64 + len as f64 / 2.0 > end + 1e-9)
    {
        return i;
    }
    ids.len()
}

/// The last `max_tokens` of `prompt` (ids from [`prompt_tokens`]) cut at a bar line so they
/// stay grammatical, with the bar length in force there restated, and the index of the first
/// bar kept (the tempo falls back to 120 bpm until the next tempo token).
pub fn cut_prompt(prompt: &[u32], max_tokens: usize) -> (Vec<u32>, usize) {
    if prompt.len() <= max_tokens {
        return (prompt.to_vec(), 0);
    }
    let bar = Token::Bar.id();
    let cut = prompt.len().saturating_sub(max_tokens);
    let start = (cut..prompt.len())
        .find(|&i| prompt[i] == bar)
        .unwrap_or(prompt.len());
    let bars_before = prompt[..start].iter().filter(|&&id| id == bar).count();
    let mut kept = vec![Token::Bos.id()];
    kept.extend_from_slice(&prompt[start..]);
    let meter = prompt[..start]
        .iter()
        .rev()
        .find_map(|&id| match Token::from_id(id) {
            Some(Token::Meter(m)) => Some(m),
            _ => None,
        });
    let restated = kept
        .get(2)
        .is_some_and(|&id| matches!(Token::from_id(id), Some(Token::Meter(_))));
    if let Some(m) = meter
        && m as usize != tokens::DEFAULT_BAR_BEATS
        && kept.len() > 1
        && !restated
    {
        kept.insert(2, Token::Meter(m).id());
    }
    (kept, bars_before)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::music::tokens::Grammar;

    fn grammatical(ids: &[u32]) -> bool {
        let mut g = Grammar::new();
        ids.iter()
            .all(|&id| Token::from_id(id).is_some_and(|t| g.advance(t).is_ok()))
    }

    #[test]
    fn a_cut_prompt_starts_at_a_bar_line_and_counts_the_bars_left_out() {
        let song = crate::music::fixtures::song(2, 12);
        let ids = prompt_tokens(&song).unwrap();
        assert!(grammatical(&ids));
        assert_eq!(cut_prompt(&ids, ids.len()), (ids.clone(), 0));
        let (kept, before) = cut_prompt(&ids, ids.len() / 2);
        assert_eq!(kept[0], Token::Bos.id());
        assert_eq!(kept[1], Token::Bar.id());
        assert!(kept.len() <= ids.len() / 2 + 1, "{} tokens", kept.len());
        // The kept tokens are the prompt's end, and the bars before them are counted.
        assert!(ids.ends_with(&kept[1..]));
        let bars = |ids: &[u32]| ids.iter().filter(|&&id| id == Token::Bar.id()).count();
        assert_eq!(before + bars(&kept), bars(&ids));
        assert!(before > 0 && grammatical(&kept));
    }

    #[test]
    fn a_cut_prompt_restates_a_meter_other_than_four_beats() {
        let t = |tokens: &[Token]| tokens.iter().map(|t| t.id()).collect::<Vec<_>>();
        let note = [
            Token::Position(0),
            Token::Pitch(60),
            Token::Velocity(4),
            Token::Duration(2),
        ];
        let mut tokens = vec![Token::Bos, Token::Bar, Token::Meter(3)];
        tokens.extend(note);
        for _ in 0..5 {
            tokens.push(Token::Bar);
            tokens.extend(note);
        }
        let ids = t(&tokens);
        assert!(grammatical(&ids));
        let (kept, before) = cut_prompt(&ids, 12);
        assert_eq!(before, 4);
        assert_eq!(kept[..3], t(&[Token::Bos, Token::Bar, Token::Meter(3)]));
        assert!(grammatical(&kept));
        // Cut where the meter is already stated (the first bar): nothing is added.
        let (whole, _) = cut_prompt(&ids, ids.len() - 1);
        assert_eq!(
            whole
                .iter()
                .filter(|&&id| id == Token::Meter(3).id())
                .count(),
            1
        );
    }

    /// `song` with its last note (the latest to start) ending at beat `end`.
    fn ringing_to(mut song: Song, end: f64) -> Song {
        let ppq = song.ppq as f64;
        let last = song
            .tracks
            .iter_mut()
            .flat_map(|t| t.notes.iter_mut())
            .max_by_key(|n| n.start)
            .unwrap();
        last.end = (end * ppq) as u64;
        song
    }

    #[test]
    fn a_prompt_ends_with_its_music_in_its_meter() {
        let count = |ids: &[u32], t: Token| ids.iter().filter(|&&id| id == t.id()).count();
        let meters = |ids: &[u32]| {
            ids.iter()
                .filter(|&&id| matches!(Token::from_id(id), Some(Token::Meter(_))))
                .count()
        };
        let song = crate::music::fixtures::song(0, 8);
        let full = prompt_tokens(&song).unwrap();
        assert_eq!((count(&full, Token::Bar), meters(&full)), (8, 0));
        // The last chord rings a beat into bar 9: eight bars of 4/4 still (it was a bar of 1/4,
        // in which a continuation went on).
        let ids = prompt_tokens(&ringing_to(song.clone(), 33.0)).unwrap();
        assert_eq!((count(&ids, Token::Bar), meters(&ids)), (8, 0));
        assert!(grammatical(&ids));
        // Rung through most of bar 9, it is the prompt's ninth bar.
        let ids = prompt_tokens(&ringing_to(song, 35.0)).unwrap();
        assert_eq!((count(&ids, Token::Bar), meters(&ids)), (9, 0));
    }

    #[test]
    fn a_song_comes_back_from_its_tokens() {
        let song = crate::music::fixtures::song(0, 4);
        let ids = prompt_tokens(&song).unwrap();
        let tokens: Vec<Token> = ids.iter().filter_map(|&id| Token::from_id(id)).collect();
        let back = tokens::decode(&tokens, 480, 0).unwrap();
        assert_eq!(back.notes.len(), song.note_count());
        let empty = Song {
            tracks: Vec::new(),
            ..song
        };
        assert_eq!(prompt_tokens(&empty), Err(GenerateError::EmptyPrompt));
    }
}
