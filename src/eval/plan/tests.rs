use super::*;
use Token as T;

fn chord(s: &str) -> Option<Chord> {
    Chord::parse_any(s).unwrap()
}

/// `Bos`, then bars of 4/4 with a chord at the bar line and notes `pitches[bar]` on beats.
fn song(bars: &[(&str, &[u8])]) -> Vec<u32> {
    let mut ids = vec![T::Bos.id()];
    for (name, pitches) in bars {
        ids.push(T::Bar.id());
        ids.extend([T::Position(0).id(), T::Chord(chord(name)).id()]);
        for (k, &p) in pitches.iter().enumerate() {
            if k > 0 {
                ids.push(T::Position(4 * k as u8).id());
            }
            ids.extend([T::Pitch(p).id(), T::Velocity(20).id(), T::Duration(4).id()]);
        }
    }
    ids
}

#[test]
fn token_bars_carry_chords_per_beat_and_onsets() {
    let mut ids = song(&[("C", &[60, 64]), ("Am", &[57])]);
    // A change at the half of bar 2, then a bar without chord token.
    ids.extend([T::Position(8).id(), T::Chord(chord("F")).id(), T::Bar.id()]);
    let bars = token_bars(&ids);
    assert_eq!(bars.len(), 3);
    assert_eq!(bars[0].onsets, [(0, 60), (4, 64)]);
    assert_eq!(bars[0].chords, vec![Some(chord("C")); 4]);
    let (am, f) = (Some(chord("Am")), Some(chord("F")));
    assert_eq!(bars[1].chords, [am, am, f, f]);
    assert_eq!(bars[2].chords, vec![f; 4], "carried over the bar line");
    assert!(bars[2].onsets.is_empty());
}

#[test]
fn chord_tones_count_onsets_in_the_planned_chord_of_their_beat() {
    let bars = token_bars(&song(&[("C", &[60, 62, 64, 65])]));
    let plan = vec![vec![chord("C"), chord("C"), chord("G"), None]];
    // 60 in C, 62 not in C, 64 not in G; 65 on a no-chord beat is left out.
    assert_eq!(chord_tones(&bars, &plan), Some(1.0 / 3.0));
    assert_eq!(chord_tones(&bars, &[vec![None; 4]]), None);
}

#[test]
fn echo_pairs_join_a_repeated_phrase_to_its_first_occurrence() {
    // A A | B B | A A (two bars each), prompt of two bars.
    let p = |letter: char, index: u16, bar: u16| {
        Some(PhraseLabel {
            letter,
            index,
            bar,
            bars: 2,
        })
    };
    let phrases = [
        p('A', 0, 0),
        p('A', 0, 1),
        p('B', 1, 0),
        p('B', 1, 1),
        p('A', 2, 0),
        p('A', 2, 1),
        None,
    ];
    assert_eq!(echo_pairs(&phrases, 2), [(0, 4), (1, 5)]);
    assert_eq!(echo_pairs(&phrases, 5), [(1, 5)]);
    // An intro that comes back is no melodic repeat.
    let intro = [p('i', 0, 0), p('A', 1, 0), p('i', 2, 0)];
    assert_eq!(echo_pairs(&intro, 1), []);
}

/// A song with `n` bars: a C–Am–F–G loop, melody varying by bar.
fn looped(n: usize) -> (Vec<u32>, Vec<Option<PhraseLabel>>) {
    let names = ["C", "Am", "F", "G"];
    let melodies: [&[u8]; 4] = [&[60, 64, 67], &[57, 60], &[65, 69, 72, 65], &[67, 71]];
    let bars: Vec<(&str, &[u8])> = (0..n).map(|b| (names[b % 4], melodies[b % 4])).collect();
    // Phrases of four bars, A B A B …
    let phrases = (0..n)
        .map(|b| {
            Some(PhraseLabel {
                letter: if (b / 4) % 2 == 0 { 'A' } else { 'B' },
                index: (b / 4) as u16,
                bar: (b % 4) as u16,
                bars: 4,
            })
        })
        .collect();
    (song(&bars), phrases)
}

#[test]
fn the_songs_own_continuation_scores_as_the_song() {
    let (ids, phrases) = looped(30);
    let case = PlanCase::of("loop", &ids, &phrases, 8).unwrap();
    assert_eq!(case.real.len(), 8 + PLAN_BARS);
    assert_eq!(case.own_plan()[0], vec![chord("C"); 4]);
    // The real next bars, as a model would have written them.
    let start = (0..ids.len())
        .filter(|&i| ids[i] == T::Bar.id())
        .nth(8)
        .unwrap();
    let end = (0..ids.len())
        .filter(|&i| ids[i] == T::Bar.id())
        .nth(8 + PLAN_BARS)
        .unwrap();
    let s = score_plan(&case, "own", &case.own_plan(), &ids[start..end], true);
    assert_eq!(s.bars, PLAN_BARS);
    assert!((s.note_rate.unwrap() - 1.0).abs() < 1e-9);
    assert_eq!(s.key, s.song_key);
    assert_eq!(s.chord_tones, s.song_chord_tones);
    assert_eq!(
        s.chord_tones,
        Some(1.0),
        "every note of the loop is a chord tone"
    );
    assert_eq!(s.echo, Some(1.0), "the loop repeats itself exactly");
    assert_eq!(s.echo, s.song_echo);
    // Every repeated phrase of the loop was first heard in the prompt.
    assert_eq!((s.echo_of_prompt, s.echo_of_new), (Some(1.0), None));
    // Silence instead: no notes, no key, no tones.
    let bars_only: Vec<u32> = vec![T::Bar.id(); PLAN_BARS];
    let quiet = score_plan(&case, "own", &case.own_plan(), &bars_only, true);
    assert_eq!(quiet.note_rate, Some(0.0));
    assert_eq!((quiet.key, quiet.chord_tones), (None, None));
    assert!(quiet.echo.unwrap() < 1.0);
    assert_eq!(
        quiet.echo_of_prompt,
        Some(0.0),
        "the prompt's bars did not come back"
    );
    assert_eq!(quiet.song_echo_of_prompt, Some(1.0));
}

#[test]
fn a_substituted_plan_is_another_songs_progression_in_this_key() {
    let (ids, phrases) = looped(30);
    let case = PlanCase::of("loop", &ids, &phrases, 8).unwrap();
    // The same loop a whole tone up, started on its second bar (Dm–…): moved back down by 2.
    let up: Vec<u32> = ids
        .iter()
        .map(|&id| match Token::from_id(id) {
            Some(T::Pitch(p)) => T::Pitch(p + 2).id(),
            Some(T::Chord(Some(c))) => T::Chord(Some(Chord {
                root: (c.root + 2) % 12,
                ..c
            }))
            .id(),
            _ => id,
        })
        .collect();
    let bar_two = (0..up.len())
        .filter(|&i| up[i] == T::Bar.id())
        .nth(1)
        .unwrap();
    let mut shifted = vec![T::Bos.id()];
    shifted.extend_from_slice(&up[bar_two..]);
    let other = PlanCase::of("other", &shifted, &phrases[1..], 8).unwrap();
    let plan = case.substituted_plan(&other).unwrap();
    assert_eq!(plan[0], vec![chord("Am"); 4], "{plan:?}");
    assert_eq!(plan[1], vec![chord("F"); 4]);
    // A song's own progression is no substitute for itself.
    assert!(case.substituted_plan(&case).is_none());
}

#[test]
fn the_summary_counts_songs_over_the_note_rate_limit() {
    let s = |song: &str, rate: f64, echo: Option<f64>| PlanScores {
        song: song.into(),
        plan: "own".into(),
        bars: 16,
        note_rate: Some(rate),
        prompt_ratio: Some(rate / 2.0),
        key: Some(0.9),
        song_key: Some(0.95),
        chord_tones: Some(0.8),
        song_chord_tones: Some(0.9),
        echo,
        song_echo: echo.map(|_| 0.5),
        echo_of_prompt: echo.map(|e| e + 0.1),
        song_echo_of_prompt: echo.map(|_| 0.5),
        echo_of_new: None,
        song_echo_of_new: Some(0.5),
    };
    let samples = [
        s("a", 1.0, Some(0.4)),
        s("b", 2.0, None),
        s("c", 0.9, Some(0.5)),
    ];
    let sum = PlanSummary::of("own", &samples);
    assert_eq!(sum.samples, 3);
    assert!((sum.note_rate - 1.3).abs() < 1e-9);
    assert_eq!(sum.note_rate_max, 2.0);
    assert_eq!(sum.note_rate_over, 1);
    // Over the prompt: 0.5, 1 and 0.45; the 10th and 90th percentiles of three are the ends.
    assert!((sum.prompt_ratio - 1.95 / 3.0).abs() < 1e-9);
    assert_eq!((sum.prompt_ratio_low, sum.prompt_ratio_high), (0.45, 1.0));
    assert!((sum.key_ratio - 0.9 / 0.95).abs() < 1e-9);
    assert!((sum.echo_ratio - 0.9).abs() < 1e-9);
    assert_eq!(sum.echo_samples, 2);
    assert!((sum.echo_ratio_of_prompt - 1.1).abs() < 1e-9);
    assert_eq!(sum.echo_samples_of_prompt, 2);
    assert_eq!(sum.echo_samples_of_new, 0, "a ratio needs both");
    assert_eq!(PlanSummary::of("substituted", &samples).samples, 0);
}
