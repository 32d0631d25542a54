//! The path a person takes with a song's opening: the first bars of test songs, cut as MIDI
//! files of their own (`pianoformer::eval::openings`), read in their meter and continued by
//! the shipped default model for the bars asked, through the CLI.

use pianoformer::eval::openings::{Place, excerpt, prompt_grid};
use pianoformer::generate::prompt_tokens;
use pianoformer::music::grid::Grid;
use pianoformer::music::metrics::cosine;
use pianoformer::music::midi::{read_midi, write_midi};
use pianoformer::music::pop909::{Pop909, Split};
use pianoformer::music::tokens::{STEPS_PER_BEAT, Token};

use super::data_root;

/// The openings of the first `n` test songs that have 8 + 8 whole bars of 4/4.
fn openings(n: usize) -> Option<Vec<pianoformer::eval::openings::Excerpt>> {
    let root = data_root()?;
    let pop = Pop909::open(&root).unwrap();
    let ids = pop.split_ids(Split::Test).unwrap();
    Some(
        ids.iter()
            .filter_map(|&id| excerpt(&pop.load(id, STEPS_PER_BEAT).unwrap(), Place::Opening, 8))
            .take(n)
            .collect(),
    )
}

#[test]
fn an_opening_reads_as_whole_bars_of_its_meter() {
    let Some(openings) = openings(6) else { return };
    assert_eq!(openings.len(), 6);
    for e in &openings {
        let grid = prompt_grid(e);
        assert!(grid.num_bars() >= 8, "{}: {} bars", e.song, grid.num_bars());
        for b in 0..grid.num_bars() {
            assert_eq!(grid.bar_beats(b).len(), 4, "{} bar {}", e.song, b + 1);
        }
        // The prompt's tokens: no change of meter, and the eight bars (a bar that the last
        // notes fill more than half of would be a ninth).
        let ids = prompt_tokens(&e.prompt).unwrap();
        let meters = ids
            .iter()
            .filter(|&&id| matches!(Token::from_id(id), Some(Token::Meter(_))))
            .count();
        let bars = ids.iter().filter(|&&id| id == Token::Bar.id()).count();
        assert_eq!(meters, 0, "{}", e.song);
        assert!((8..=9).contains(&bars), "{}: {bars} bars", e.song);
        // The song's next bars are there to compare with.
        assert!(e.next.note_count() > 0, "{}", e.song);
    }
}

/// `generate --task continuation --bars 8` on three test openings: eight new bars, in 4/4,
/// the bars counted from the last bar the prompt's music fills; and their pitch classes those
/// of the prompt, more so than with the key hold off (`--key 0`: the model as it plays).
#[test]
fn the_cli_continues_three_openings_for_the_bars_asked_in_their_meter() {
    let Some(openings) = openings(3) else { return };
    let dir = std::env::temp_dir().join(format!("pianoformer-openings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let runs: Vec<_> = openings
        .iter()
        .enumerate()
        .flat_map(|(k, e)| [(k, e, None), (k, e, Some("0"))])
        .map(|(k, e, key)| {
            let prompt = dir.join(format!("prompt-{k}.mid"));
            let out = dir.join(format!("out-{k}-{}.mid", key.unwrap_or("default")));
            // Written once, before either run reads it.
            if key.is_none() {
                std::fs::write(&prompt, write_midi(&e.prompt)).unwrap();
            }
            let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_pianoformer"));
            command
                .args(["generate", "--task", "continuation", "--bars", "8"])
                .arg(&prompt)
                .arg("--out")
                .arg(&out);
            if let Some(key) = key {
                command.args(["--key", key]);
            }
            let child = command
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("run pianoformer");
            (e, key, prompt, out, child)
        })
        .collect();
    // Key cosine of the new bars to the prompt, with the hold and without.
    let (mut held, mut free) = (Vec::new(), Vec::new());
    for (e, key, prompt, out, child) in runs {
        let done = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&done.stderr);
        assert!(done.status.success(), "{}: {err}", e.song);
        assert!(err.contains("(8 new bars)"), "{}: {err}", e.song);
        assert!(!err.contains("safety limit"), "{}: {err}", e.song);
        let written = read_midi(&std::fs::read(&out).unwrap()).unwrap();
        // Every bar of the file is a bar of 4/4: no time signature but four beats.
        assert!(
            written
                .time_signatures
                .iter()
                .all(|t| t.numerator == 4 && t.denominator == 4),
            "{}: {:?}",
            e.song,
            written.time_signatures
        );
        let prompt_bars = prompt_tokens(&read_midi(&std::fs::read(&prompt).unwrap()).unwrap())
            .unwrap()
            .iter()
            .filter(|&&id| id == Token::Bar.id())
            .count();
        let grid = Grid::for_song(&written, STEPS_PER_BEAT);
        assert!(
            grid.num_bars() >= prompt_bars + 8,
            "{}: {} bars after a {prompt_bars}-bar prompt",
            e.song,
            grid.num_bars()
        );
        // New notes start in the eight new bars (none beyond them).
        let (from, end) = (
            grid.bar_ticks()[prompt_bars],
            grid.bar_ticks()[prompt_bars + 8],
        );
        let notes = || written.tracks.iter().flat_map(|t| &t.notes);
        let last_start = notes().map(|n| n.start).max().unwrap();
        assert!(
            last_start < end,
            "{}: a note starts after bar {}",
            e.song,
            prompt_bars + 8
        );
        let classes = |pitches: &mut dyn Iterator<Item = u8>| {
            let mut h = [0.0; 12];
            pitches.for_each(|p| h[p as usize % 12] += 1.0);
            h
        };
        let new = classes(&mut notes().filter(|n| n.start >= from).map(|n| n.pitch));
        let old = classes(
            &mut e
                .prompt
                .tracks
                .iter()
                .flat_map(|t| &t.notes)
                .map(|n| n.pitch),
        );
        let cos = cosine(&new, &old);
        eprintln!(
            "{} key {}: key cosine {cos:.3}",
            e.song,
            key.unwrap_or("default")
        );
        if key.is_none() { &mut held } else { &mut free }.push(cos);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (held, free) = (mean(&held), mean(&free));
    assert!(
        held >= 0.9 && held > free,
        "key cosine {held:.3}, without the hold {free:.3}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
