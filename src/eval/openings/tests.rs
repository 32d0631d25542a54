use super::*;
use crate::generate::prompt_tokens;
use crate::music::fixtures;

fn fixture(bars: usize) -> Excerpt {
    let song = fixtures::song(0, bars as u64);
    Excerpt {
        song: "fixture".into(),
        place: Place::Opening,
        from_bar: 0,
        bars,
        prompt: song.clone(),
        next: song,
    }
}

/// Bar `k` of `ids`: its `Bar` token and what follows up to the next.
fn bar_tokens(ids: &[u32], k: usize) -> Vec<u32> {
    let bar = Token::Bar.id();
    let starts: Vec<usize> = (0..ids.len()).filter(|&i| ids[i] == bar).collect();
    ids[starts[k]..starts.get(k + 1).copied().unwrap_or(ids.len())].to_vec()
}

#[test]
fn a_continuation_like_its_prompt_keeps_its_bars_pace_register_and_key() {
    let e = fixture(4);
    let prompt = prompt_tokens(&e.prompt).unwrap();
    let added: Vec<u32> = (0..4).flat_map(|k| bar_tokens(&prompt, k)).collect();
    let s = score(&e, &prompt, &added, 10_000).unwrap();
    assert_eq!(
        (
            s.bars_written,
            s.beats_written,
            s.meter_changes,
            s.token_limit
        ),
        (4, 16, 0, false)
    );
    let rate = s.rate().unwrap();
    assert!((0.9..=1.0).contains(&rate), "{rate}");
    assert!(s.above().unwrap() <= 0);
    assert!((s.key_cosine.unwrap() - 1.0).abs() < 1e-9);
    // The prompt's own bars again: their notes sit on their chords as much as the prompt's.
    let tones = s.chord_tones.unwrap();
    assert!(tones > 0.5 && tones <= 1.0, "{tones}");
    let summary = OpeningSummary::of(Place::Opening, &[s]);
    assert_eq!(
        (summary.songs, summary.bars_and_meter, summary.rate_in_band),
        (1, 1.0, 1.0)
    );
    assert_eq!(summary.register_kept, 1.0);
}

#[test]
fn bars_in_another_meter_and_a_token_limit_are_counted() {
    let e = fixture(4);
    let prompt = prompt_tokens(&e.prompt).unwrap();
    let note = |p: u8| {
        [
            Token::Position(0),
            Token::Pitch(p),
            Token::Velocity(4),
            Token::Duration(4),
        ]
    };
    let mut added = vec![Token::Bar, Token::Meter(1)];
    added.extend(note(100));
    added.push(Token::Bar);
    added.extend(note(101));
    let added: Vec<u32> = added.iter().map(|t| t.id()).collect();
    let s = score(&e, &prompt, &added, 10_000).unwrap();
    assert_eq!(
        (s.bars_written, s.beats_written, s.meter_changes),
        (2, 2, 2)
    );
    // Two notes in two beats, far above the prompt and out of its key.
    assert_eq!(s.notes_per_beat, 1.0);
    assert_eq!(s.highest, Some(101));
    assert!(s.above().unwrap() > REGISTER_MARGIN);
    // Stopped by the token limit: the last bar is not whole.
    let cut = score(&e, &prompt, &added, added.len()).unwrap();
    assert_eq!((cut.bars_written, cut.token_limit), (1, true));
    let summary = OpeningSummary::of(Place::Opening, &[s, cut]);
    assert_eq!((summary.bars_and_meter, summary.token_limit), (0.0, 0.5));
    assert_eq!(summary.register_kept, 0.0);
}
