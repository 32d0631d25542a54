//! The native CLI as a user runs it.
#![cfg(not(target_arch = "wasm32"))]

use std::process::Command;

fn pianoformer() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pianoformer"))
}

#[test]
fn check_on_the_cpu_reports_json_with_a_falling_loss() {
    let out = pianoformer()
        .args(["check", "--backend", "cpu", "--json"])
        .output()
        .expect("run pianoformer");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(report["backend"]["kind"], "cpu");
    let losses = report["check"]["fit"]["losses"].as_array().expect("losses");
    let first = losses[0].as_f64().unwrap();
    let last = losses.last().unwrap().as_f64().unwrap();
    assert!(last < 0.3 * first, "{first} -> {last}");
}

#[test]
fn an_unknown_backend_is_a_plain_error() {
    let out = pianoformer()
        .args(["check", "--backend", "tpu"])
        .output()
        .expect("run pianoformer");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown backend 'tpu'"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// A MIDI file made by the project's own writer: | C | G | in 4/4, one bar each.
fn two_bar_song() -> Vec<u8> {
    two_bar_song_pedalled(Vec::new())
}

/// [`two_bar_song`] with its piano's `pedal` events (tick, controller, value).
fn two_bar_song_pedalled(pedal: Vec<(u64, u8, u8)>) -> Vec<u8> {
    use pianoformer::music::midi::{Note, Pedal, Song, TempoChange, Track, write_midi};
    let triad = |root: u8, bar: u64| {
        [0u8, 4, 7].map(|i| Note {
            pitch: 48 + root + i,
            velocity: 90,
            start: bar * 1920,
            end: (bar + 1) * 1920,
            channel: 0,
        })
    };
    let mut notes = triad(0, 0).to_vec();
    notes.extend(triad(7, 1));
    write_midi(&Song {
        ppq: 480,
        tempos: vec![TempoChange {
            tick: 0,
            micros_per_quarter: 500_000,
        }],
        time_signatures: vec![],
        key_signatures: vec![],
        tracks: vec![Track {
            pedal: pedal
                .into_iter()
                .map(|(tick, controller, value)| Pedal {
                    tick,
                    controller,
                    value,
                    channel: 0,
                })
                .collect(),
            name: "Piano".into(),
            program: Some(0),
            notes,
            ..Default::default()
        }],
    })
}

#[test]
fn inspect_shows_tracks_and_chords() {
    let dir = std::env::temp_dir().join(format!("pianoformer-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("two-bars.mid");
    std::fs::write(&file, two_bar_song()).unwrap();
    let out = pianoformer()
        .arg("inspect")
        .arg(&file)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["tracks"][0]["name"], "Piano");
    assert_eq!(s["tracks"][0]["notes"], 6);
    assert_eq!(
        s["chords_per_bar"],
        serde_json::json!([["C", "C", "C", "C"], ["G", "G", "G", "G"]])
    );
    let text = pianoformer().arg("inspect").arg(&file).output().unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("tempo 120.0 bpm"));
    assert!(
        s["tracks"][0]["pedal"].is_null(),
        "no pedal, no pedal figures"
    );
    // The pianist's pedal: down over the first bar, then from the second bar's fourth beat.
    let pedalled = dir.join("pedalled.mid");
    let pedal = vec![(0, 64, 127), (1920, 64, 0), (3400, 64, 100), (3840, 64, 0)];
    std::fs::write(&pedalled, two_bar_song_pedalled(pedal)).unwrap();
    let out = pianoformer()
        .arg("inspect")
        .arg(&pedalled)
        .arg("--json")
        .output()
        .unwrap();
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &s["tracks"][0]["pedal"];
    assert_eq!(
        (p["events"].as_u64(), p["presses"].as_u64()),
        (Some(4), Some(2)),
        "{p}"
    );
    assert!(
        (p["share_down"].as_f64().unwrap() - 2360.0 / 3840.0).abs() < 1e-9,
        "{p}"
    );
    let text = pianoformer()
        .arg("inspect")
        .arg(&pedalled)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("pedal: down 61 % of the time, 1.00 presses a bar"),
        "{text}"
    );

    let bad = dir.join("not-midi.mid");
    std::fs::write(&bad, b"hello, I am a text file").unwrap();
    let out = pianoformer().arg("inspect").arg(&bad).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a MIDI file"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let missing = pianoformer()
        .arg("inspect")
        .arg(dir.join("nope.mid"))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read"));
    std::fs::remove_dir_all(&dir).ok();
}

/// The shipped models are found from any working folder (beside the binary, or the checkout
/// it was built from), `PIANOFORMER_MODELS` points elsewhere, and a manifest that is nowhere
/// is an error that says where it looked.
#[test]
fn generate_finds_the_shipped_models_from_anywhere() {
    let dir = std::env::temp_dir().join(format!("pianoformer-cli-models-{}", std::process::id()));
    let empty = dir.join("no-models-here");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(dir.join("two-bars.mid"), two_bar_song()).unwrap();
    let generate = |models: Option<&std::path::Path>| {
        let mut cmd = pianoformer();
        cmd.current_dir(&dir)
            .args([
                "generate",
                "--task",
                "continuation",
                "--tokens",
                "16",
                "two-bars.mid",
            ])
            .args(["-o", "continued.mid"])
            .env_remove("PIANOFORMER_MODELS");
        if let Some(m) = models {
            cmd.env("PIANOFORMER_MODELS", m);
        }
        cmd.output().unwrap()
    };
    let out = generate(None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(dir.join("continued.mid").is_file());

    // This checkout's, read at run time (see tests/shipped.rs).
    let shipped = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(
            || env!("CARGO_MANIFEST_DIR").into(),
            std::path::PathBuf::from,
        )
        .join("www/models");
    assert!(generate(Some(&shipped)).status.success());

    let out = generate(Some(&empty));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(&empty.join("manifest.json").display().to_string())
            && err.contains("PIANOFORMER_MODELS"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Settings out of range are refused before any music is made, by the same check the page's
/// settings go through (each task's `studio::Asked::check`), naming the flag: every out-of-range case of
/// `tests/options-cases.json` (which the page's tests run too) whose setting is a flag here.
#[test]
fn generate_refuses_settings_out_of_range_naming_the_flag() {
    let dir = std::env::temp_dir().join(format!("pianoformer-cli-settings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("two-bars.mid"), two_bar_song()).unwrap();
    let cases: Vec<serde_json::Value> =
        serde_json::from_str(include_str!("options-cases.json")).unwrap();
    let mut tried = 0;
    for case in &cases {
        let (Some(key), Some(value), Some(problem)) = (
            case["key"].as_str(),
            case["value"].as_f64(),
            case["problem"].as_str(),
        ) else {
            continue;
        };
        // The task that reads the setting and the flag that sets it.
        let (task, flag) = match key {
            "pianoTemperature" => ("accompaniment", "--temperature"),
            "holdTemperature" => ("accompaniment", "--hold-temperature"),
            "threshold" => ("accompaniment", "--threshold"),
            "temperature" => ("continuation", "--temperature"),
            "topP" => ("continuation", "--top-p"),
            "echo" => ("continuation", "--echo"),
            // A fraction for a whole-number flag is the argument parser's to refuse.
            "tokens" if value.fract() == 0.0 => ("continuation", "--tokens"),
            _ => continue,
        };
        tried += 1;
        let out = pianoformer()
            .current_dir(&dir)
            .args([
                "generate",
                "--task",
                task,
                "two-bars.mid",
                "-o",
                "out.mid",
                &format!("{flag}={value}"),
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flag} {value}");
        assert!(
            err.contains(&format!("{flag}: {problem}")),
            "{flag} {value}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert!(!dir.join("out.mid").exists(), "{flag} {value} wrote a file");
    }
    assert!(tried >= 8, "only {tried} cases reached the CLI");
    std::fs::remove_dir_all(&dir).ok();
}

/// `report` averages runs that differ only in their `-seedN` suffix (mean ± population std) and
/// shows what their outputs rest on when the runs measured it.
#[test]
fn report_averages_seeds_and_shows_the_ablations() {
    let dir = std::env::temp_dir().join(format!("pianoformer-cli-report-{}", std::process::id()));
    let runs: Vec<_> = [("acc-x-seed0", 30.0, 0.050), ("acc-x-seed1", 40.0, 0.052)]
        .iter()
        .map(|&(name, cs, loss)| {
            let run = dir.join(name);
            std::fs::create_dir_all(&run).unwrap();
            let eval = serde_json::json!({
                "task": "accompaniment",
                "steps": 500,
                "binarize": {"threshold": 0.05, "gap": 0},
                "ablations": {"loss": loss, "uniform_attention": loss * 1.5,
                              "labels_zero": null, "labels_other": null},
                "test": {"16": {"excerpts": 4, "onset_f1": 0.1,
                    "cs": {"mean": cs, "std": 1.0}, "ssmd": {"mean": 40.0, "std": 1.0},
                    "gs": {"mean": 80.0, "std": 1.0}, "ndd": {"mean": 10.0, "std": 1.0}}},
            });
            std::fs::write(run.join("eval.json"), eval.to_string()).unwrap();
            run
        })
        .collect();
    let out = pianoformer().arg("report").args(&runs).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("| acc-x | 2 | 500 | 0.05 / 0 | 35.000 ± 5.000 |"),
        "{text}"
    );
    assert!(
        text.contains("| acc-x | 2 | 0.05100 ± 0.00100 | 0.07650 ± 0.00150 | — | — |"),
        "{text}"
    );
    let missing = pianoformer()
        .arg("report")
        .arg(dir.join("nope"))
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("run `pianoformer eval` on it first")
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// `generate --bars 5-6` rewrites only bars 5 and 6, with either task's shipped default:
/// everything starting outside them comes back note for note, and the bars get new notes.
/// A range the piece does not have, or a count for an accompaniment, is a sentence.
#[test]
fn generate_rewrites_only_the_bars_asked_for() {
    use pianoformer::music::fixtures;
    use pianoformer::music::midi::{read_midi, write_midi};
    let dir = std::env::temp_dir().join(format!("pianoformer-cli-bars-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let song = fixtures::song(2, 8);
    std::fs::write(dir.join("eight.mid"), write_midi(&song)).unwrap();
    let bar = 4 * song.ppq as u64;
    let (from, to) = (4 * bar, 6 * bar);
    let generate = |task: &str, bars: &str| {
        pianoformer()
            .current_dir(&dir)
            .args(["generate", "--task", task, "eight.mid", "-o", "out.mid"])
            .args(["--bars", bars, "--seed", "5"])
            .output()
            .unwrap()
    };
    // (track, pitch, start, end) of every note, split at the bars.
    let notes = |bytes: &[u8], inside: bool| -> Vec<(String, u8, u64, u64)> {
        let s = read_midi(bytes).unwrap();
        let mut v: Vec<_> = s
            .tracks
            .iter()
            .flat_map(|t| {
                t.notes
                    .iter()
                    .map(move |n| (t.name.clone(), n.pitch, n.start, n.end))
            })
            .filter(|n| (n.2 >= from && n.2 < to) == inside)
            .collect();
        v.sort();
        v
    };
    let original = std::fs::read(dir.join("eight.mid")).unwrap();
    for task in ["continuation", "accompaniment"] {
        let out = generate(task, "5-6");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{task}: {err}");
        assert!(err.contains("bars 5-6 rewritten"), "{err}");
        let made = std::fs::read(dir.join("out.mid")).unwrap();
        let melody = |v: Vec<(String, u8, u64, u64)>| -> Vec<_> {
            v.into_iter().filter(|n| n.0 == "MELODY").collect()
        };
        if task == "continuation" {
            assert_eq!(
                notes(&made, false),
                notes(&original, false),
                "{task}: outside kept"
            );
        } else {
            // The melody everywhere; the piano before the bars keeps its onsets (a note held
            // into them may end at their start) and after them stays whole.
            assert_eq!(melody(notes(&made, false)), melody(notes(&original, false)));
            assert_eq!(melody(notes(&made, true)), melody(notes(&original, true)));
            let after = |v: Vec<(String, u8, u64, u64)>| -> Vec<_> {
                v.into_iter()
                    .filter(|n| n.0 != "MELODY" && n.2 > to)
                    .map(|n| (n.1, n.2, n.3))
                    .collect()
            };
            assert_eq!(
                after(notes(&made, false)),
                after(notes(&original, false)),
                "{task}"
            );
        }
        let new = notes(&made, true);
        assert!(!new.is_empty(), "{task}: the bars have notes");
        assert_ne!(
            new,
            notes(&original, true),
            "{task}: the bars are rewritten"
        );
    }
    for (task, bars, says) in [
        ("continuation", "20-22", "past the end of the piece"),
        ("accompaniment", "4", "the bars to rewrite, e.g. 9-16"),
        ("continuation", "6-5", "the last bar comes before the first"),
        ("continuation", "0-2", "counting from 1"),
    ] {
        let out = generate(task, bars);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{bars}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `generate --task live` plays the file's melody as a take with the model the page plays live
/// with: the piano of bars 5-8 decided step by step from what was heard, the melody kept.
#[test]
fn generate_live_plays_the_melody_as_a_take() {
    use pianoformer::music::fixtures;
    use pianoformer::music::midi::{read_midi, write_midi};
    let dir = std::env::temp_dir().join(format!("pianoformer-cli-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let song = fixtures::song(2, 8);
    std::fs::write(dir.join("eight.mid"), write_midi(&song)).unwrap();
    let out = pianoformer()
        .current_dir(&dir)
        .args(["generate", "--task", "live", "eight.mid", "-o", "live.mid"])
        .args(["--bars", "5-8", "--seed", "2"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("a live take over bars 5-8: "), "{err}");
    assert!(
        err.contains("accompaniment-live"),
        "the page's live model: {err}"
    );
    let made = read_midi(&std::fs::read(dir.join("live.mid")).unwrap()).unwrap();
    let notes = |s: &pianoformer::music::midi::Song, melody: bool| -> Vec<(u8, u64, u64)> {
        let mut v: Vec<_> = s
            .tracks
            .iter()
            .filter(|t| (t.name == "MELODY") == melody)
            .flat_map(|t| t.notes.iter().map(|n| (n.pitch, n.start, n.end)))
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        notes(&made, true),
        notes(&song, true),
        "the melody is the file's"
    );
    let from = 4 * 4 * song.ppq as u64;
    assert!(
        notes(&made, false).iter().any(|n| n.1 >= from),
        "the take plays"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// `--texture NAME` and `--texture-from FILE:BARS` play the bars written like a gallery texture
/// or like bars of a file's piano part: the rest of the piece kept, every mistake refused in
/// words before anything is written.
#[test]
fn generate_plays_like_a_texture_chosen_by_name_or_by_bars() {
    use pianoformer::music::fixtures;
    use pianoformer::music::midi::{read_midi, write_midi};
    let dir = std::env::temp_dir().join(format!("pianoformer-cli-texture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let song = fixtures::song(2, 8);
    std::fs::write(dir.join("eight.mid"), write_midi(&song)).unwrap();
    std::fs::write(dir.join("melody.mid"), {
        let mut m = song.clone();
        m.tracks.retain(|t| t.name == "MELODY");
        write_midi(&m)
    })
    .unwrap();
    let generate = |args: &[&str]| {
        pianoformer()
            .current_dir(&dir)
            .args(["generate", "eight.mid", "-o", "out.mid", "--seed", "3"])
            .args(args)
            .output()
            .unwrap()
    };
    let piano = |bytes: &[u8]| -> Vec<(u8, u64)> {
        let s = read_midi(bytes).unwrap();
        let mut v: Vec<_> = s
            .tracks
            .iter()
            .filter(|t| t.name != "MELODY")
            .flat_map(|t| t.notes.iter().map(|n| (n.pitch, n.start)))
            .collect();
        v.sort();
        v
    };
    let plain = generate(&["--task", "accompaniment", "--bars", "5-8"]);
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    let plain = piano(&std::fs::read(dir.join("out.mid")).unwrap());
    for args in [
        ["--texture", "arpeggio"],
        ["--texture-from", "eight.mid:1-2"],
    ] {
        std::fs::remove_file(dir.join("out.mid")).ok();
        let out = generate(&[&["--task", "accompaniment", "--bars", "5-8"][..], &args].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {err}");
        let made = piano(&std::fs::read(dir.join("out.mid")).unwrap());
        assert!(!made.is_empty(), "{args:?}");
        assert_ne!(made, plain, "{args:?}: the texture changed what was played");
    }
    for (args, says) in [
        (
            vec!["--task", "accompaniment", "--texture", "waltz"],
            "the gallery has ballad, arpeggio",
        ),
        (
            vec!["--task", "accompaniment", "--texture-from", "eight.mid"],
            "give a file and its bars",
        ),
        (
            vec!["--task", "accompaniment", "--texture-from", "eight.mid:3"],
            "FIRST-LAST",
        ),
        (
            vec![
                "--task",
                "accompaniment",
                "--texture-from",
                "missing.mid:1-2",
            ],
            "--texture-from missing.mid",
        ),
        (
            vec![
                "--task",
                "accompaniment",
                "--texture-from",
                "eight.mid:7-12",
            ],
            "not in the piece (8 bars)",
        ),
        (
            vec![
                "--task",
                "accompaniment",
                "--texture-from",
                "melody.mid:1-2",
            ],
            "hold no piano notes",
        ),
        (
            vec!["--task", "continuation", "--texture", "block"],
            "for an accompaniment",
        ),
        (
            vec![
                "--task",
                "accompaniment",
                "--model",
                "accompaniment-sinespe",
                "--texture",
                "block",
            ],
            "cannot play like a texture",
        ),
    ] {
        std::fs::remove_file(dir.join("out.mid")).ok();
        let out = generate(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(says),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert!(!dir.join("out.mid").exists(), "{args:?} wrote a file");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `--chords` is a chord chart as the page's chord dialog reads it (bars separated by `|`,
/// chords sharing a bar by spaces): the command line's old form without bar lines is refused in
/// words before anything loads; a chart reaching past the music plans a continuation's new
/// bars, which play its chords; a melody alone gets the harmonizer's chords, as a file opened
/// in the page does.
#[test]
fn generate_reads_chords_as_the_pages_chart() {
    use pianoformer::music::chords::Chord;
    use pianoformer::music::fixtures;
    use pianoformer::music::midi::{read_midi, write_midi};
    let dir = std::env::temp_dir().join(format!("pianoformer-cli-chart-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Four bars of C G Am F, melody and piano.
    let song = fixtures::song(0, 4);
    std::fs::write(dir.join("four.mid"), write_midi(&song)).unwrap();
    let generate = |file: &str, out: &str, chords: Option<&str>| {
        let mut c = pianoformer();
        c.current_dir(&dir)
            .args(["generate", "--task", "continuation", file, "-o", out])
            .args(["--bars", "4", "--seed", "2"]);
        if let Some(chords) = chords {
            c.args(["--chords", chords]);
        }
        let out = c.output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (ok, err) = generate("four.mid", "old.mid", Some("C G Am F"));
    assert!(!ok, "{err}");
    assert!(
        err.contains("--chords \"C G Am F\": separate the bars with | (\"C | G | Am | F\")"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(!dir.join("old.mid").exists());
    let (ok, err) = generate("four.mid", "x.mid", Some("C | G | Hm"));
    assert!(!ok && err.contains("--chords: bar 3"), "{err}");

    // The music's four bars as they are, then Dm Dm E7 E7 planned.
    let (ok, err) = generate(
        "four.mid",
        "planned.mid",
        Some("| C | G | Am | F | Dm | Dm | E7 | E7 |"),
    );
    assert!(ok, "{err}");
    assert!(err.contains("(4 new bars)"), "{err}");
    let made = read_midi(&std::fs::read(dir.join("planned.mid")).unwrap()).unwrap();
    let bar = 4 * song.ppq as u64;
    let continuation = made
        .tracks
        .iter()
        .find(|t| t.name == "CONTINUATION")
        .expect("a CONTINUATION track, as the page writes");
    let chord = |s: &str| Chord::parse_any(s).unwrap().unwrap();
    let plan = [chord("Dm"), chord("Dm"), chord("E7"), chord("E7")];
    let (mut tones, mut all) = (0, 0);
    for n in &continuation.notes {
        // The last bar of the music may get notes after its last onset.
        let k = (n.start / bar) as usize;
        assert!((3..8).contains(&k), "a note in bar {}", k + 1);
        if k >= 4 {
            all += 1;
            tones += usize::from(plan[k - 4].pitch_classes().any(|pc| pc == n.pitch % 12));
        }
    }
    assert!(all >= 8, "{all} new notes");
    assert!(
        tones * 2 >= all,
        "{tones} of {all} new notes are tones of the planned chords"
    );
    // The file's other tracks come back as they were.
    let sorted = |t: &pianoformer::music::midi::Track| {
        let mut v: Vec<_> = t.notes.iter().map(|n| (n.start, n.pitch, n.end)).collect();
        v.sort();
        (t.name.clone(), v)
    };
    for (a, b) in song.tracks.iter().zip(&made.tracks) {
        assert_eq!(sorted(a), sorted(b));
    }

    // The melody alone: the harmonizer fills the lane before the continuation.
    let mut melody = song.clone();
    melody.tracks.retain(|t| t.name == "MELODY");
    std::fs::write(dir.join("melody.mid"), write_midi(&melody)).unwrap();
    let (ok, err) = generate("melody.mid", "melody-out.mid", None);
    assert!(ok, "{err}");
    assert!(err.contains("chords: proposed by the harmonizer"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A MusicXML lead sheet in (one of OpenEWLD's, else one written by the project's own writer):
/// `inspect` prints the score's own chord symbols; `generate` accompanies it on those chords
/// (no harmonizer asked) and writes a full score or a lead sheet back out, whose symbols are
/// the lane's. A broken score is refused in a sentence.
#[test]
fn musicxml_lead_sheets_go_in_and_out_with_their_chord_symbols() {
    use pianoformer::music::musicxml::{ScoreKind, read_musicxml, read_piece, write_mxl};
    use pianoformer::music::piece::Piece;
    let dir = std::env::temp_dir().join(format!("pianoformer-cli-xml-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let real = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "../shared/data/openewld/dataset/Al_Dubin-Harry_Warren/The_Boulevard_of_Broken_Dreams/The_Boulevard_of_Broken_Dreams.mxl",
    );
    let bytes = if real.is_file() {
        std::fs::read(&real).unwrap()
    } else {
        eprintln!("OpenEWLD is absent: a lead sheet written by pianoformer instead");
        let mut piece =
            Piece::from_song(&pianoformer::music::fixtures::song(2, 8), "x.mid").unwrap();
        piece.tracks.retain(|t| t.name == "MELODY");
        piece.chords[0] = "Dm7 G7".into();
        write_mxl(&piece, ScoreKind::LeadSheet).unwrap()
    };
    std::fs::write(dir.join("lead.mxl"), &bytes).unwrap();
    let read = read_piece(&bytes, "lead.mxl").unwrap();
    let out = pianoformer()
        .current_dir(&dir)
        .args(["inspect", "lead.mxl"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("the score's own chord symbols"), "{text}");
    for (out_name, lead) in [("out.mxl", false), ("lead-out.musicxml", true)] {
        let mut cmd = pianoformer();
        cmd.current_dir(&dir).args([
            "generate",
            "--task",
            "accompaniment",
            "lead.mxl",
            "-o",
            out_name,
        ]);
        if lead {
            cmd.arg("--lead-sheet");
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(!err.contains("chords: proposed by the harmonizer"), "{err}");
        let written = std::fs::read(dir.join(out_name)).unwrap();
        let score = read_musicxml(&written).unwrap();
        assert_eq!(
            score.song.tracks.len(),
            if lead { 1 } else { 2 },
            "{out_name}"
        );
        let back = read_piece(&written, out_name).unwrap();
        let bars = read.chords.len() - 1;
        assert_eq!(
            back.chords[..bars],
            read.chords[..bars],
            "{out_name}: the score's chords"
        );
    }
    std::fs::write(
        dir.join("broken.musicxml"),
        "<score-partwise><part id=\"P1\"><measure>",
    )
    .unwrap();
    let out = pianoformer()
        .current_dir(&dir)
        .args([
            "generate",
            "--task",
            "accompaniment",
            "broken.musicxml",
            "-o",
            "x.mid",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("not well formed"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let out = pianoformer()
        .current_dir(&dir)
        .args([
            "generate",
            "--task",
            "accompaniment",
            "lead.mxl",
            "-o",
            "x.mid",
            "--lead-sheet",
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("--lead-sheet writes MusicXML"));
    std::fs::remove_dir_all(&dir).ok();
}

/// A score whose only part holds chords has no melody the page or the CLI finds: the CLI says
/// so in its own words (the page's name its track list), and `--melody-track` chooses one as
/// the track list does; a track it does not have is listed.
#[test]
fn a_score_without_a_melody_names_the_flag_that_chooses_one() {
    let dir = std::env::temp_dir().join(format!("pianoformer-cli-chords-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let triad = |step: &str| {
        ["", "<chord/>", "<chord/>"]
            .iter()
            .zip([0, 2, 4])
            .map(|(chord, up)| {
                let steps = ["C", "D", "E", "F", "G", "A", "B"];
                let at = steps.iter().position(|s| *s == step).unwrap() + up;
                format!(
                    "<note>{chord}<pitch><step>{}</step><octave>{}</octave></pitch>\
                     <duration>4</duration></note>",
                    steps[at % 7],
                    3 + at / 7
                )
            })
            .collect::<String>()
    };
    let measures: String = ["C", "F", "G", "C"]
        .iter()
        .enumerate()
        .map(|(m, root)| format!("<measure number=\"{}\">{}</measure>", m + 2, triad(root)))
        .collect();
    std::fs::write(
        dir.join("chords.musicxml"),
        format!(
            "<score-partwise><part-list><score-part id=\"P1\"><part-name>Piano</part-name>\
             </score-part></part-list><part id=\"P1\"><measure number=\"1\"><attributes>\
             <divisions>1</divisions><time><beats>4</beats><beat-type>4</beat-type></time>\
             </attributes>{}</measure>{measures}</part></score-partwise>",
            triad("A")
        ),
    )
    .unwrap();
    let generate = |extra: &[&str]| {
        pianoformer()
            .current_dir(&dir)
            .args(["generate", "--task", "accompaniment", "chords.musicxml"])
            .args(["-o", "out.mid", "--harmonizer", "none"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = generate(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("give --melody-track"), "{err}");
    assert!(
        !err.contains("track list") && !err.contains("panicked"),
        "{err}"
    );
    let out = generate(&["--melody-track", "3"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("no such track; the file has 1 Piano (15 notes)"),
        "{err}"
    );
    let out = generate(&["--melody-track", "piano"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("5 bars accompanied"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
