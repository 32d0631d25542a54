//! REMI tokens on real songs.

use super::data_root;

/// REMI tokens on real songs: every sequence is grammatical, and decoding gives back every
/// note at its grid step, with its pitch and quantised length.
#[test]
fn remi_tokens_round_trip_on_real_songs() {
    use pianoformer::music::pop909::Pop909;
    use pianoformer::music::tokens::{MAX_DURATION, STEPS_PER_BEAT, check_grammar, decode, encode};
    let Some(root) = data_root() else { return };
    let data = Pop909::open(&root).unwrap();
    let (mut songs, mut notes, mut tokens_total) = (0, 0, 0);
    for id in data.song_ids().unwrap().into_iter().step_by(17) {
        let s = data.load(id, STEPS_PER_BEAT).unwrap();
        let all: Vec<_> = s.song.tracks.iter().flat_map(|t| t.notes.clone()).collect();
        let tokens = encode(&all, &s.grid, &s.labels.beat_chords(), &s.song.tempos).unwrap();
        check_grammar(&tokens).unwrap_or_else(|e| panic!("song {id}: {e}"));
        let d = decode(&tokens, s.song.ppq, 0).unwrap();
        // What the tokens should hold: one note per (step, pitch), the longest, clipped.
        let mut expected = std::collections::BTreeMap::new();
        for n in &all {
            let start = s.grid.step_at(n.start);
            if start >= s.grid.num_steps() {
                continue;
            }
            let len = (s.grid.step_at(n.end).max(start + 1) - start).min(MAX_DURATION);
            let e = expected.entry((start, n.pitch)).or_insert(0);
            *e = len.max(*e);
        }
        let step_ticks = s.song.ppq as u64 / STEPS_PER_BEAT as u64;
        let got: std::collections::BTreeMap<(usize, u8), usize> = d
            .notes
            .iter()
            .map(|n| {
                let start = (n.start / step_ticks) as usize;
                ((start, n.pitch), ((n.end - n.start) / step_ticks) as usize)
            })
            .collect();
        assert_eq!(got, expected, "song {id}");
        assert_eq!(d.grid.bar_starts, s.grid.bar_starts, "song {id}");
        assert_eq!(
            &d.beat_chords[..s.grid.num_beats()],
            &s.labels.beat_chords()[..],
            "song {id}"
        );
        songs += 1;
        notes += all.len();
        tokens_total += tokens.len();
    }
    eprintln!(
        "REMI round trip on {songs} songs: {notes} notes, {:.0} tokens a song, {:.2} tokens a note",
        tokens_total as f64 / songs as f64,
        tokens_total as f64 / notes as f64
    );
}
