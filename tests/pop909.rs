//! Real-data tests on POP909 (`../shared/data/pop909`, or `$POP909_DIR`). They skip, saying
//! so, when the data is absent.
#![cfg(not(target_arch = "wasm32"))]

use std::path::PathBuf;

use pianoformer::music::midi::read_midi;
use pianoformer::music::pop909::{self, Split};
use pianoformer::music::roll::{Grid, PianoRoll};

fn data_root() -> Option<PathBuf> {
    let root = std::env::var_os("POP909_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/pop909"));
    if root.join("songs").is_dir() {
        Some(root)
    } else {
        pianoformer::note_skipped_test(&format!(
            "POP909 not found at {} (set POP909_DIR)",
            root.display()
        ));
        None
    }
}

fn song_ids(root: &std::path::Path) -> Vec<u32> {
    let mut ids: Vec<u32> = std::fs::read_dir(root.join("songs"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    ids.sort_unstable();
    ids
}

#[test]
fn every_song_and_annotation_parses() {
    let Some(root) = data_root() else { return };
    let ids = song_ids(&root);
    assert!(ids.len() >= 800, "only {} songs", ids.len());
    let offsets =
        pop909::parse_startpos(&pop909::read_text(&root.join("startpos.csv")).unwrap()).unwrap();
    assert!(offsets.len() >= 800);
    let mut splits = [0usize; 3];
    let mut phrase_outliers = Vec::new();
    let mut chord_outliers = Vec::new();
    for &id in &ids {
        let dir = pop909::song_dir(&root, id);
        let read = |name: &str| pop909::read_text(&dir.join(name)).unwrap();
        let bytes = std::fs::read(dir.join(format!("{id:03}.mid"))).unwrap();
        let song = read_midi(&bytes).unwrap_or_else(|e| panic!("song {id}: {e}"));
        let names: Vec<&str> = song.tracks.iter().map(|t| t.name.as_str()).collect();
        assert!(
            names.contains(&"MELODY") && names.contains(&"PIANO"),
            "song {id}: {names:?}"
        );
        assert!(song.ppq > 0, "song {id}"); // 480 for most, 960 for a few (song 471)
        let beats = pop909::parse_beats(&read("beat_midi.txt")).unwrap();
        let chords = pop909::parse_beat_chords(&read("structure_finalized_chord.txt"))
            .unwrap_or_else(|e| panic!("song {id}: {e}"));
        let phrases = pop909::parse_phrases(&read("structure_human_label1.txt"))
            .unwrap_or_else(|e| panic!("song {id}: {e}"));
        pop909::parse_timed_chords(&read("chord_midi.txt")).unwrap();
        // Annotations in beats and bars cover about the same span as the beat track.
        let chord_beats: u32 = chords.iter().map(|c| c.beats).sum();
        let phrase_beats: u32 = phrases.iter().map(|p| p.bars * 4).sum();
        let n = beats.len() as i64;
        // A few songs are annotated at another metrical level than beat_midi.txt's beats
        // (song 62's phrases and song 624's chords count double time): record them rather
        // than fail, and bound how many there are.
        if (chord_beats as i64 - n).abs() > n / 4 + 16 {
            chord_outliers.push(id);
        }
        if (phrase_beats as i64 - n).abs() > n / 4 + 16 {
            phrase_outliers.push(id);
        }
        splits[Split::of(id) as usize] += 1;
    }
    eprintln!(
        "POP909: {} songs; train/validation/test = {splits:?}",
        ids.len()
    );
    eprintln!("phrase lengths far from the beat count: {phrase_outliers:?}");
    eprintln!("chord lengths far from the beat count: {chord_outliers:?}");
    assert!(
        phrase_outliers.len() * 20 < ids.len(),
        "{phrase_outliers:?}"
    );
    assert!(chord_outliers.len() * 20 < ids.len(), "{chord_outliers:?}");
}

#[test]
fn piano_roll_round_trip_keeps_every_note_within_the_grid() {
    let Some(root) = data_root() else { return };
    for id in song_ids(&root).into_iter().step_by(43) {
        let path = pop909::song_dir(&root, id).join(format!("{id:03}.mid"));
        let song = read_midi(&std::fs::read(path).unwrap()).unwrap();
        let grid = Grid::for_song(&song, 4);
        let half_step = song.ppq as u64 / 8;
        for track in &song.tracks {
            let roll = PianoRoll::from_notes(&track.notes, &grid);
            let back = roll.to_notes(&grid, 0, 64);
            // Every original onset has a note of the same pitch starting within half a step.
            for n in &track.notes {
                let hit = back
                    .iter()
                    .any(|b| b.pitch == n.pitch && b.start.abs_diff(n.start) <= half_step);
                assert!(hit, "song {id} {}: note {n:?} lost", track.name);
            }
            assert!(back.len() <= track.notes.len(), "song {id}: notes invented");
        }
    }
}

/// Chord recognition against the human annotations (`chord_midi.txt`) on the validation songs,
/// per beat of `beat_midi.txt`: the figures quoted in the README.
#[test]
fn chord_recognition_accuracy_on_validation_songs() {
    use pianoformer::music::chords::{Chord, RecognizeOptions, recognize};
    let Some(root) = data_root() else { return };
    let (mut beats_total, mut root_ok, mut family_ok, mut exact_ok) =
        (0usize, 0usize, 0usize, 0usize);
    let mut unknown = std::collections::BTreeSet::new();
    for id in song_ids(&root)
        .into_iter()
        .filter(|&id| Split::of(id) == Split::Validation)
    {
        let dir = pop909::song_dir(&root, id);
        let song = read_midi(&std::fs::read(dir.join(format!("{id:03}.mid"))).unwrap()).unwrap();
        let beats =
            pop909::parse_beats(&pop909::read_text(&dir.join("beat_midi.txt")).unwrap()).unwrap();
        let reference =
            pop909::parse_timed_chords(&pop909::read_text(&dir.join("chord_midi.txt")).unwrap())
                .unwrap();
        let ticks: Vec<u64> = beats
            .iter()
            .map(|b| song.tick_at_seconds(b.seconds))
            .collect();
        let notes: Vec<_> = song
            .tracks
            .iter()
            .flat_map(|t| {
                let w = if t.name == "MELODY" { 0.5 } else { 1.0 };
                t.notes.iter().map(move |n| (n, w))
            })
            .collect();
        let predicted = recognize(&notes, &ticks, RecognizeOptions::default());
        for (b, pred) in predicted.iter().enumerate() {
            let mid = (beats[b].seconds + beats[b + 1].seconds) / 2.0;
            let Some(annotated) = reference.iter().find(|c| c.start <= mid && mid < c.end) else {
                continue;
            };
            let truth = match Chord::parse(&annotated.symbol) {
                Ok(Some(c)) => c,
                Ok(None) => continue, // "no chord" beats are not scored
                Err(_) => {
                    unknown.insert(annotated.symbol.clone());
                    continue;
                }
            };
            beats_total += 1;
            if let Some(p) = pred {
                root_ok += (p.root == truth.root) as usize;
                family_ok +=
                    (p.root == truth.root && p.quality.family() == truth.quality.family()) as usize;
                exact_ok += (*p == truth) as usize;
            }
        }
    }
    let pct = |k: usize| 100.0 * k as f64 / beats_total.max(1) as f64;
    eprintln!(
        "chord recognition on {beats_total} validation beats: root {:.1}%, root+family {:.1}%, exact {:.1}%",
        pct(root_ok),
        pct(family_ok),
        pct(exact_ok)
    );
    assert!(unknown.is_empty(), "unparsed chord symbols: {unknown:?}");
    assert!(
        pct(root_ok) > 88.0 && pct(family_ok) > 80.0,
        "recognition got worse"
    );
}

/// One validation song prepared for phrase evaluation: bars from `beat_midi.txt`'s downbeats,
/// chords recognised per beat, the melody track, and the human boundaries as bar indices.
struct PhraseCase {
    melody: Vec<pianoformer::music::midi::Note>,
    /// Beats of `beat_midi.txt`, bars from its downbeats (a pickup bar first when the first
    /// downbeat is not the first beat).
    grid: Grid,
    /// Index of the bar of the first downbeat.
    first_downbeat_bar: usize,
    chords: Vec<Option<pianoformer::music::chords::Chord>>,
    /// Bar where the annotations start (placed with `startpos.csv`) and where they end.
    start: usize,
    end: usize,
    reference: Vec<usize>,
}

fn phrase_cases(root: &std::path::Path, split: Split) -> Vec<PhraseCase> {
    use pianoformer::music::chords::{RecognizeOptions, recognize};
    let offsets: std::collections::HashMap<u32, f64> =
        pop909::parse_startpos(&pop909::read_text(&root.join("startpos.csv")).unwrap())
            .unwrap()
            .into_iter()
            .collect();
    let mut cases = Vec::new();
    for id in song_ids(root)
        .into_iter()
        .filter(|&id| Split::of(id) == split)
    {
        let Some(&offset) = offsets.get(&id) else {
            continue;
        };
        let dir = pop909::song_dir(root, id);
        let song = read_midi(&std::fs::read(dir.join(format!("{id:03}.mid"))).unwrap()).unwrap();
        let beats =
            pop909::parse_beats(&pop909::read_text(&dir.join("beat_midi.txt")).unwrap()).unwrap();
        let phrases = pop909::parse_phrases(
            &pop909::read_text(&dir.join("structure_human_label1.txt")).unwrap(),
        )
        .unwrap();
        let beat_ticks: Vec<u64> = beats
            .iter()
            .map(|b| song.tick_at_seconds(b.seconds))
            .collect();
        let downbeats: Vec<usize> = (0..beats.len()).filter(|&i| beats[i].bar_start).collect();
        if downbeats.len() < 8 {
            continue;
        }
        let mut ticks = beat_ticks.clone();
        ticks.push(beat_ticks.last().unwrap() + song.ppq as u64);
        let grid = Grid::new(ticks, 1, downbeats.clone());
        let first_downbeat_bar = (downbeats[0] > 0) as usize;
        let bar_ticks = grid.bar_ticks();
        let all: Vec<_> = song
            .tracks
            .iter()
            .flat_map(|t| t.notes.iter().map(|n| (n, 1.0)))
            .collect();
        let chords = recognize(&all, &grid.beat_ticks, RecognizeOptions::default());
        let melody: Vec<_> = song
            .tracks
            .iter()
            .filter(|t| t.name == "MELODY")
            .flat_map(|t| t.notes.clone())
            .collect();
        // Where the annotations start, as a bar index.
        let first_note = song
            .tracks
            .iter()
            .flat_map(|t| t.notes.iter().map(|n| n.start))
            .min()
            .unwrap();
        let start_tick = first_note as f64 + offset * song.ppq as f64;
        let start = (0..grid.num_bars())
            .min_by_key(|&k| (bar_ticks[k] as f64 - start_tick).abs() as u64)
            .unwrap();
        let mut reference = Vec::new();
        let mut at = start;
        for p in &phrases[..phrases.len() - 1] {
            at += p.bars as usize;
            reference.push(at);
        }
        let end = at + phrases.last().unwrap().bars as usize;
        cases.push(PhraseCase {
            melody,
            grid,
            first_downbeat_bar,
            chords,
            start,
            end,
            reference,
        });
    }
    cases
}

/// Mean boundary F1 (±1 bar) of the segmentation, of a boundary every 4 bars from the first
/// downbeat (what a tool without annotations could do), and of one every 4 bars from the
/// annotated start (which a segmentation of a user's file does not know).
fn phrase_f1(
    cases: &[PhraseCase],
    options: pianoformer::music::phrases::PhraseOptions,
) -> (f64, f64, f64) {
    use pianoformer::music::phrases::{boundary_f1, segment_phrases};
    let mut sums = (0.0, 0.0, 0.0);
    for c in cases {
        let segments = segment_phrases(&c.melody, &c.grid, &c.chords, options);
        let inside = |b: &usize| *b > c.start && *b < c.end;
        let predicted: Vec<usize> = segments
            .iter()
            .map(|s| s.start_bar)
            .filter(inside)
            .collect();
        let every4: Vec<usize> = (c.first_downbeat_bar + 4..c.end)
            .step_by(4)
            .filter(inside)
            .collect();
        let oracle: Vec<usize> = (c.start + 4..c.end).step_by(4).collect();
        sums.0 += boundary_f1(&predicted, &c.reference, 1).2;
        sums.1 += boundary_f1(&every4, &c.reference, 1).2;
        sums.2 += boundary_f1(&oracle, &c.reference, 1).2;
    }
    let n = cases.len().max(1) as f64;
    (sums.0 / n, sums.1 / n, sums.2 / n)
}

/// Phrase segmentation against `structure_human_label1.txt` on the validation songs: boundary
/// F1 at ±1 bar (songs without a `startpos.csv` offset are left out).
#[test]
fn phrase_boundary_f1_on_validation_songs() {
    let Some(root) = data_root() else { return };
    let cases = phrase_cases(&root, Split::Validation);
    let (f1, baseline, oracle) = phrase_f1(&cases, Default::default());
    eprintln!(
        "phrase boundaries on {} validation songs, F1 at ±1 bar: {f1:.3} \
         (every 4 bars from the first downbeat {baseline:.3}; from the annotated start {oracle:.3})",
        cases.len()
    );
    assert!(cases.len() >= 70);
    assert!(
        f1 > baseline,
        "segmentation no better than a boundary every 4 bars"
    );
}

/// Tuning aid, not a check, on the training songs (the defaults were chosen with it; the
/// validation figure above is reported, not tuned on):
/// `cargo test --test pop909 phrase_sweep -- --ignored --nocapture`.
#[test]
#[ignore]
fn phrase_sweep() {
    use pianoformer::music::phrases::PhraseOptions;
    let Some(root) = data_root() else { return };
    let cases = phrase_cases(&root, Split::Train);
    for boundary_cost in [0.15, 0.3, 0.4, 0.5, 0.6, 0.8] {
        let options = PhraseOptions {
            boundary_cost,
            ..Default::default()
        };
        let (f1, baseline, _) = phrase_f1(&cases, options);
        eprintln!("boundary_cost {boundary_cost:.2}: F1 {f1:.3} (baseline {baseline:.3})");
    }
}

/// Every song loads with per-step labels, and the placement of the annotations holds up: the
/// annotated melody matches the MIDI melody, and the MIDI-time chords of `chord_midi.txt`
/// (made independently) agree with the annotated chords and find the same start on their own.
#[test]
fn per_step_labels_are_aligned_on_every_song() {
    use pianoformer::music::pop909::{Alignment, Pop909};
    let Some(root) = data_root() else { return };
    let data = Pop909::open(&root).unwrap();
    let mut counts = std::collections::BTreeMap::new();
    let (mut same_start, mut melody, mut chords) = (0usize, Vec::new(), Vec::new());
    let (mut annotated_beats, mut all_beats, mut melody_steps) = (0, 0, 0);
    let ids = data.song_ids().unwrap();
    for &id in &ids {
        let s = data
            .load(id, 4)
            .unwrap_or_else(|e| panic!("song {id}: {e}"));
        let n = s.grid.num_steps();
        assert_eq!(s.labels.len(), n, "song {id}");
        assert_eq!(s.rolls.num_steps(), n, "song {id}");
        assert!(s.annotated.end <= n && s.annotated.start <= s.annotated.end);
        annotated_beats += s.annotated.len() / 4;
        all_beats += n / 4;
        for step in s.annotated.clone() {
            melody_steps += (s.labels.melody[step] > 0) as usize;
        }
        *counts.entry(format!("{:?}", s.alignment)).or_insert(0) += 1;
        same_start += (s.start_beat == s.chord_match_beat) as usize;
        melody.push(s.melody_agreement);
        chords.push(s.chord_agreement);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (melody, chords) = (median(&mut melody), median(&mut chords));
    eprintln!(
        "{} songs placed: {counts:?}; median agreement with the MIDI: melody {:.1}% of \
         sixteenths, chords {:.1}% of beats (chord_midi.txt); chord_midi.txt alone finds the \
         same start in {same_start}; annotations cover {:.1}% of beats, the melody sounds on \
         {:.1}% of annotated steps",
        ids.len(),
        100.0 * melody,
        100.0 * chords,
        100.0 * annotated_beats as f64 / all_beats as f64,
        100.0 * melody_steps as f64 / (annotated_beats * 4) as f64,
    );
    // startpos.csv is followed for most songs; on about one in six (145 here) the annotated
    // melody and chord_midi.txt both put the start one to a few beats away from it.
    assert!(counts[&format!("{:?}", Alignment::StartPos)] >= 600);
    assert!(melody > 0.8 && chords > 0.8, "labels do not match the MIDI");
    assert!(
        same_start * 10 >= ids.len() * 9,
        "chord_midi.txt disagrees too often"
    );
    assert!(annotated_beats * 10 >= all_beats * 8);
}

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

/// The metrics on real data against the anchors F-StrIPE's Table I implies: an (almost) empty
/// prediction of a 16-bar test window scores CS ≈ 0–3, SSMD ≈ 29, GS ≈ 6–8 and NDD ≈ 94. Ours
/// give CS 0, GS 5.9 and NDD 90.9 for an empty one, but SSMD 42.8: the paper's SSMD is lower
/// than its definition gives on these songs (see reports/labels-and-metrics.md). The bridge
/// track played as if it were the piano part is a weak but real "prediction".
#[test]
fn metrics_on_test_windows_match_the_papers_anchors() {
    use pianoformer::music::metrics::{
        accompaniment_scores, beat_notes, mean_std, style_similarity,
    };
    use pianoformer::music::pop909::{Pop909, Split};
    use pianoformer::music::roll::PianoRoll;
    let Some(root) = data_root() else { return };
    let data = Pop909::open(&root).unwrap();
    let window = 16 * 4 * 4; // 16 bars of 4 beats, 4 steps a beat
    let (mut empty, mut bridge, mut style) = (Vec::new(), Vec::new(), Vec::new());
    for id in data.split_ids(Split::Test).unwrap() {
        let s = data.load(id, 4).unwrap();
        let mut start = s.annotated.start;
        while start + window <= s.annotated.end {
            let crop = |r: &PianoRoll| {
                let mut out = PianoRoll::new(window);
                for t in 0..window {
                    for p in 0..128 {
                        if r.sustain(start + t, p) {
                            out.set(t, p, r.onset(start + t, p), true, 64);
                        }
                    }
                }
                out
            };
            let target = crop(&s.rolls.piano);
            empty.push(accompaniment_scores(&PianoRoll::new(window), &target, 4));
            bridge.push(accompaniment_scores(&crop(&s.rolls.bridge), &target, 4));
            start += window;
        }
        let track = |name: &str| s.song.tracks.iter().find(|t| t.name == name).unwrap();
        let (od, tp) = style_similarity(
            &beat_notes(&track("PIANO").notes, &s.grid),
            &beat_notes(&track("MELODY").notes, &s.grid),
        );
        style.push((od.unwrap_or(0.0), tp.unwrap_or(0.0)));
    }
    let summary = |v: &[pianoformer::music::metrics::AccompanimentScores]| {
        let f = |g: fn(&pianoformer::music::metrics::AccompanimentScores) -> f64| {
            mean_std(&v.iter().map(g).collect::<Vec<_>>()).0
        };
        (f(|s| s.cs), f(|s| s.ssmd), f(|s| s.gs), f(|s| s.ndd))
    };
    let e = summary(&empty);
    let b = summary(&bridge);
    eprintln!(
        "{} test windows of 16 bars. Empty prediction: CS {:.2} SSMD {:.2} GS {:.2} NDD {:.2}; \
         bridge as prediction: CS {:.2} SSMD {:.2} GS {:.2} NDD {:.2}; style similarity of piano \
         to melody: onset-duration {:.3}, time-pitch {:.3}",
        empty.len(),
        e.0,
        e.1,
        e.2,
        e.3,
        b.0,
        b.1,
        b.2,
        b.3,
        mean_std(&style.iter().map(|s| s.0).collect::<Vec<_>>()).0,
        mean_std(&style.iter().map(|s| s.1).collect::<Vec<_>>()).0,
    );
    assert!(empty.len() >= 300);
    assert_eq!(e.0, 0.0);
    assert!((20.0..50.0).contains(&e.1), "SSMD of nothing {}", e.1);
    assert!(e.2 < 15.0 && e.3 > 85.0);
    assert!(
        b.0 > e.0 && b.2 > e.2 && b.3 < e.3,
        "the bridge should beat nothing"
    );
}

/// The three rolls of a song back to a type-1 MIDI file (tempo map and PPQ kept, one named
/// track per role on its own channel) and read again: the same notes.
#[test]
fn multi_track_rolls_round_trip_through_midi() {
    use pianoformer::music::midi::{Song, write_midi};
    use pianoformer::music::pop909::Pop909;
    let Some(root) = data_root() else { return };
    let data = Pop909::open(&root).unwrap();
    for id in data.song_ids().unwrap().into_iter().step_by(43) {
        let s = data.load(id, 4).unwrap();
        let tracks = s.rolls.to_tracks(&s.grid, 64);
        let out = Song {
            ppq: s.song.ppq,
            tempos: s.song.tempos.clone(),
            time_signatures: vec![],
            key_signatures: vec![],
            tracks: tracks.clone(),
        };
        let back = read_midi(&write_midi(&out)).unwrap();
        assert_eq!(back.ppq, s.song.ppq);
        assert_eq!(back.tempos, s.song.tempos, "song {id}");
        let names: Vec<&str> = back.tracks.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["MELODY", "BRIDGE", "PIANO"], "song {id}");
        for (a, b) in tracks.iter().zip(&back.tracks) {
            assert_eq!(a.notes, b.notes, "song {id} {}", a.name);
            assert_eq!(b.program, Some(0));
        }
    }
}

fn pianoformer() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_pianoformer"))
}

fn run_ok(cmd: &mut std::process::Command) -> String {
    let out = cmd.output().expect("run pianoformer");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// The whole path on real songs at toy scale: train a tiny step-by-step F-StrIPE
/// accompaniment model on a few POP909 songs, evaluate it (temperature chosen on validation,
/// the panel on whole test songs, scores on test excerpts), and accompany a test song's melody
/// with the chords it was given.
#[test]
fn train_eval_and_generate_on_pop909_at_toy_scale() {
    let Some(root) = data_root() else { return };
    let dir = std::env::temp_dir().join(format!("pianoformer-pop909-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = dir.join("run");
    let err = run_ok(
        pianoformer()
            .args(["train", "--task", "accompaniment", "--preset", "tiny"])
            .args(["--pe", "fstripe", "--levels", "chord", "--steps", "12"])
            .args(["--batch", "2", "--window", "128", "--eval-every", "6"])
            .args(["--limit", "4", "--data"])
            .arg(&root)
            .arg("--out")
            .arg(&run),
    );
    assert!(
        err.contains("POP909 (4 train, 4 validation, 4 test)"),
        "{err}"
    );
    run_ok(
        pianoformer()
            .args([
                "eval",
                "--task",
                "accompaniment",
                "--bars",
                "16",
                "--per-song",
                "1",
            ])
            .args(["--limit", "3", "--model"])
            .arg(&run)
            .arg("--data")
            .arg(&root),
    );
    let eval: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("eval.json")).unwrap()).unwrap();
    // The default model plays step by step: a temperature chosen on validation excerpts and
    // the panel on whole test songs (label following included).
    assert_eq!(eval["decoding"], "step by step, sampled", "{eval}");
    assert!(eval["temperature"].as_f64().unwrap() > 0.0, "{eval}");
    assert!(eval["hold_temperature"].as_f64().unwrap() > 0.0, "{eval}");
    assert!(
        eval["panel"]["sounding_ratio"].as_f64().unwrap() > 0.0,
        "{eval}"
    );
    assert!(eval["panel"]["songs"].as_u64().unwrap() > 0, "{eval}");
    assert!(
        eval["panel"]["density_ratio"].as_f64().unwrap() > 0.0,
        "{eval}"
    );
    assert!(
        eval["panel"]["changed_share"].as_f64().unwrap() > 0.0,
        "{eval}"
    );
    let test = &eval["test"]["16"];
    assert_eq!(test["excerpts"], 3, "{eval}");
    assert!(test["onset_f1"].as_f64().unwrap() > 0.0, "{eval}");
    assert!(
        test["cs"]["mean"].as_f64().unwrap() > 0.0,
        "some notes: {eval}"
    );
    // What the outputs rest on: attention and, since the model reads the lanes, the labels.
    let ablations = &eval["ablations"];
    for k in ["loss", "uniform_attention", "labels_zero", "labels_other"] {
        assert!(ablations[k].as_f64().unwrap() > 0.0, "{k}: {eval}");
    }
    // Measured again on its own, the rest of eval.json is kept.
    let err = run_ok(
        pianoformer()
            .args(["eval", "--task", "accompaniment", "--ablations-only"])
            .args(["--per-song", "1", "--limit", "2", "--model"])
            .arg(&run)
            .arg("--data")
            .arg(&root),
    );
    assert!(err.contains("with uniform attention"), "{err}");
    let again: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("eval.json")).unwrap()).unwrap();
    assert_eq!(again["panel"], eval["panel"]);
    assert!(
        again["ablations"]["labels_other"].as_f64().unwrap() > 0.0,
        "{again}"
    );

    let prompt = root.join("songs/010/010.mid");
    let out_file = dir.join("010-accompanied.mid");
    let err = run_ok(
        pianoformer()
            .args(["generate", "--task", "accompaniment", "--model"])
            .arg(&run)
            .arg(&prompt)
            .arg("-o")
            .arg(&out_file),
    );
    assert!(err.contains("bars accompanied"), "{err}");
    let made = read_midi(&std::fs::read(&out_file).unwrap()).unwrap();
    let names: Vec<&str> = made.tracks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["MELODY", "BRIDGE", "PIANO"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// What a continuation plays when sampled, at toy scale: a tiny model trained for a few steps
/// continues the first bars of two test songs; the scores by quarter land in samples.json and
/// `report` draws them.
#[test]
fn continuations_are_scored_by_what_they_play() {
    let Some(root) = data_root() else { return };
    let dir = std::env::temp_dir().join(format!("pianoformer-sampled-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = dir.join("cont-seed0");
    run_ok(
        pianoformer()
            .args(["train", "--task", "continuation", "--preset", "tiny"])
            .args(["--steps", "4", "--batch", "2", "--window", "64"])
            .args(["--eval-every", "4", "--limit", "3", "--data"])
            .arg(&root)
            .arg("--out")
            .arg(&run),
    );
    let sample = |extra: &[&str]| {
        let mut cmd = pianoformer();
        cmd.args(["eval", "--task", "continuation", "--sample", "--limit", "2"])
            .args(["--threads", "1", "--data"])
            .arg(&root)
            .arg("--model")
            .arg(&run)
            .args(extra);
        if !extra.contains(&"--prompt-bars") {
            cmd.args(["--prompt-bars", "2"]);
        }
        cmd
    };
    let err = run_ok(&mut sample(&[]));
    assert!(err.contains("onset-duration"), "{err}");
    let scores: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("samples.json")).unwrap()).unwrap();
    assert_eq!(scores["length"], 4 * 64, "4x the training window: {scores}");
    assert_eq!(scores["split"], "test");
    let samples = scores["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 2, "{scores}");
    for s in samples {
        assert_eq!(
            s["prompt_tokens"].as_u64().unwrap() + s["generated_tokens"].as_u64().unwrap(),
            256
        );
        assert_eq!(s["onset_duration"].as_array().unwrap().len(), 4);
    }
    let g = scores["summary"]["grammatical_bars"].as_f64();
    assert!(g.is_none_or(|g| g > 0.0 && g < 1.0), "{scores}");

    let svg = dir.join("style.svg");
    let out = pianoformer()
        .arg("report")
        .arg(&run)
        .arg("--style-svg")
        .arg(&svg)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(table.contains("| cont | 1 | 2 |"), "{table}");
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(
        drawn.contains("<polyline") && drawn.contains("time–pitch"),
        "{drawn}"
    );

    // Mistakes get a sentence.
    for (extra, says) in [
        (&["--split", "train"][..], "--split is valid or test"),
        (
            &["--prompt-bars", "0"][..],
            "--prompt-bars must be positive",
        ),
        (&["--top-p", "0"][..], "--top-p must be above 0"),
    ] {
        let out = sample(extra).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(says),
            "{extra:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    let out = pianoformer()
        .args([
            "eval",
            "--task",
            "continuation",
            "--sample",
            "--model",
            "default",
            "--data",
        ])
        .arg(&root)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("say where the scores go with --out"), "{err}");
    let out = pianoformer()
        .args(["eval", "--task", "accompaniment", "--sample", "--data"])
        .arg(&root)
        .arg("--model")
        .arg(&run)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--sample is for continuation models"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
