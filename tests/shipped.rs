//! The models in `www/models/`: every manifest entry loads (size, sha256, config and parameter
//! count checked), each task has one default, and the defaults make music through the CLI.
#![cfg(not(target_arch = "wasm32"))]

use std::path::PathBuf;

use burn::tensor::Device;
use pianoformer::model::config::Task;
use pianoformer::model::pe::PeKind;
use pianoformer::models::{Manifest, load_entry};

// Where this checkout is, read when the test runs (cargo sets it): a path compiled in would be
// another checkout's when two share the target dir (CI clones do), and the tests would read
// that one's files.
fn models_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
        .join("www/models")
}

#[test]
fn every_shipped_model_loads_and_each_task_has_a_default() {
    let text = std::fs::read_to_string(models_dir().join("manifest.json")).unwrap();
    let manifest = Manifest::parse(&text).unwrap();
    let device = Device::flex();
    for entry in &manifest.models {
        let bytes = std::fs::read(models_dir().join(&entry.file)).unwrap();
        assert!(bytes.len() <= 5 << 20, "{} is over 5 MB", entry.file);
        let model = load_entry(entry, &bytes, &device).unwrap();
        assert_eq!(model.config, entry.config);
        assert!(
            entry.training["command"]
                .as_str()
                .is_some_and(|c| c.contains("train")),
            "{}: the training command is recorded",
            entry.name
        );
        // Every entry carries its evaluation on the held-out songs: the test excerpts (and,
        // for a model that plays step by step, the panel over whole test songs), the loss by
        // quarter and what it plays when sampled, or the harmonizer's test scores.
        let m = &entry.metrics;
        let has = |key: &str| m[key].is_object() || m[key].is_array();
        let evaluated = match entry.task {
            Task::Accompaniment => {
                has("test") && (!model.config.is_autoregressive() || has("panel"))
            }
            Task::Continuation => has("quarters") && m["sampled"]["split"] == "test",
            Task::Harmonization | Task::Melody => has("test"),
        };
        assert!(evaluated, "{}: no evaluation in the manifest", entry.name);
        // An accompaniment model carries how to decode it, chosen on validation songs: the
        // sampling temperatures (notes and holds) of one that plays step by step, else its note
        // threshold.
        if entry.task == Task::Accompaniment {
            if model.config.is_autoregressive() {
                assert!(
                    entry.defaults.temperature.is_some()
                        && entry.defaults.hold_temperature.is_some(),
                    "{}: no temperature or hold temperature",
                    entry.name
                );
            } else {
                assert!(
                    entry.defaults.binarize.is_some(),
                    "{}: no threshold",
                    entry.name
                );
            }
        }
    }
    // The continuation default is judged by what it plays when sampled (eval --sample): its
    // entry carries the scores by quarter, on test songs, to 4x its training window.
    let cont = manifest
        .models
        .iter()
        .find(|m| m.task == Task::Continuation && m.default)
        .expect("a continuation default");
    let sampled = &cont.metrics["sampled"];
    assert_eq!(sampled["split"], "test", "{}", cont.name);
    assert_eq!(
        sampled["length"].as_u64(),
        cont.training["options"]["window"].as_u64().map(|w| 4 * w),
        "{sampled}"
    );
    let quarters = sampled["summary"]["onset_duration"].as_array().unwrap();
    assert_eq!(quarters.len(), 4, "{sampled}");
    assert!(quarters.iter().all(|q| q.as_f64().is_some_and(|v| v > 0.0)));
    // As the page and `generate` play it (reading at most its window), it keeps its style to
    // 4x the window, in its key, never silent for 2 bars (issue 16's figures).
    let played = &cont.metrics["sampled_in_context"];
    assert_eq!(played["split"], "test", "{played}");
    assert_eq!(
        played["context"], cont.training["options"]["window"],
        "{played}"
    );
    let s = &played["summary"];
    let figure = |key: &str| s[key].as_f64().unwrap_or(f64::NAN);
    assert!(figure("onset_duration_kept") >= 0.9, "{s}");
    assert!(figure("time_pitch_kept") >= 0.9, "{s}");
    assert!(figure("key_consistency") >= 0.8, "{s}");
    assert!(figure("no_long_silence_share") >= 0.95, "{s}");
    // convSPE, the SPE paper's extrapolator, is shipped finished: its loss in the last quarter
    // of 4x its window stays within 0.4 nats of the first, and it was sampled like the default.
    let conv = manifest
        .models
        .iter()
        .find(|m| m.task == Task::Continuation && m.config.pe.kind == PeKind::ConvSpe)
        .expect("a convSPE continuation model");
    assert_eq!(
        conv.training["steps"], conv.training["options"]["steps"],
        "{}: unfinished",
        conv.name
    );
    let q = conv.metrics["quarters"].as_array().unwrap();
    let (first, last) = (q[0].as_f64().unwrap(), q[3].as_f64().unwrap());
    assert!(last - first <= 0.4, "{}: {q:?}", conv.name);
    for key in ["sampled", "sampled_in_context"] {
        assert_eq!(conv.metrics[key]["split"], "test", "{}: {key}", conv.name);
    }
    // The harmonizer carries how its probabilities become chords (the harmonic rhythm counted in
    // the training songs, the weight chosen on validation), its test scores, and stays small.
    let harmonizer = manifest
        .models
        .iter()
        .find(|m| m.task == Task::Harmonization && m.default)
        .expect("a default harmonizer");
    let decode = harmonizer
        .defaults
        .harmony
        .expect("the harmonizer's decoding");
    decode.check().unwrap();
    assert!(
        harmonizer.bytes <= 2 << 20,
        "{} is over 2 MB",
        harmonizer.name
    );
    let test = &harmonizer.metrics["test"];
    let root = |row: &str| {
        test[row]["scores"]["accuracy"][0]
            .as_f64()
            .unwrap_or(f64::NAN)
    };
    assert!(
        root("harmonizer") > root("detector_melody_and_bridge"),
        "{test}"
    );
    for task in [
        Task::Accompaniment,
        Task::Continuation,
        Task::Harmonization,
        Task::Melody,
    ] {
        let defaults = manifest
            .models
            .iter()
            .filter(|m| m.task == task && m.default)
            .count();
        assert_eq!(defaults, 1, "{task:?}");
    }
}

#[test]
fn the_default_models_accompany_and_continue_a_song() {
    use pianoformer::music::midi::{Note, Song, TempoChange, Track, read_midi, write_midi};
    let dir = std::env::temp_dir().join(format!("pianoformer-shipped-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Eight bars of a melody on C, G, Am, F chord tones, named as POP909 names it.
    let mut notes = Vec::new();
    for bar in 0..8u64 {
        let root = [60u8, 67, 69, 65][bar as usize % 4];
        for (k, i) in [0u8, 4, 7, 12].iter().enumerate() {
            let start = bar * 1920 + k as u64 * 480;
            notes.push(Note {
                pitch: root + i,
                velocity: 90,
                start,
                end: start + 480,
                channel: 0,
            });
        }
    }
    let song = Song {
        ppq: 480,
        tempos: vec![TempoChange {
            tick: 0,
            micros_per_quarter: 500_000,
        }],
        time_signatures: vec![],
        key_signatures: vec![],
        tracks: vec![Track {
            pedal: Vec::new(),
            name: "MELODY".into(),
            program: Some(0),
            notes,
            ..Default::default()
        }],
    };
    let prompt = dir.join("melody.mid");
    std::fs::write(&prompt, write_midi(&song)).unwrap();
    let manifest = models_dir().join("manifest.json");
    for (task, extra) in [
        ("accompaniment", vec![]),
        ("continuation", vec!["--tokens", "600"]),
    ] {
        let out_file = dir.join(format!("{task}.mid"));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pianoformer"))
            .args(["generate", "--task", task, "--manifest"])
            .arg(&manifest)
            .arg(&prompt)
            .arg("-o")
            .arg(&out_file)
            .args(extra)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{task}: {err}");
        let made = read_midi(&std::fs::read(&out_file).unwrap()).unwrap();
        assert!(
            made.note_count() > song.note_count(),
            "{task}: {} notes from a {}-note prompt ({err})",
            made.note_count(),
            song.note_count()
        );
    }
    // The chord lane steers the default accompaniment: the same melody with a progression a
    // major third up (E B C#m A) is played differently, mostly on the given chords' tones.
    let piano_at = |chords: &str, density: &str| {
        let out_file = dir.join(format!("chords-{}-{density}.mid", chords.len()));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pianoformer"))
            .args(["generate", "--task", "accompaniment", "--manifest"])
            .arg(&manifest)
            .arg(&prompt)
            .arg("-o")
            .arg(&out_file)
            .args(["--chords", chords, "--seed", "3", "--density", density])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let made = read_midi(&std::fs::read(&out_file).unwrap()).unwrap();
        let piano = made.tracks.iter().find(|t| t.name == "PIANO").unwrap();
        piano.notes.clone()
    };
    // The melody alone gets the harmonizer's chords: a progression on the melody's chords
    // (C G Am F), not the detector's sus chords fitted to one or two notes a beat.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pianoformer"))
        .args(["inspect", "--json"])
        .arg(&prompt)
        .env("PIANOFORMER_MODELS", models_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["chord_source"], "harmonizer", "{summary}");
    let beats: Vec<&str> = summary["chords_per_bar"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|bar| bar.as_array().unwrap().iter().map(|c| c.as_str().unwrap()))
        .collect();
    let sus = beats.iter().filter(|c| c.contains("sus")).count();
    assert!(sus * 10 <= beats.len(), "sus chords: {beats:?}");
    let roots = ["C", "G", "A", "F"];
    let right = beats
        .iter()
        .enumerate()
        .filter(|(b, c)| c.starts_with(roots[(b / 4) % 4]) && !c[1..].starts_with(['#', 'b']))
        .count();
    assert!(
        right * 2 >= beats.len(),
        "{right} of {} beats on the melody's roots: {beats:?}",
        beats.len()
    );
    // Alternatives to audition: the first is the lane, the others differ from it and are
    // each less likely than it under the harmonizer's decode.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pianoformer"))
        .args(["inspect", "--json", "--suggest", "4"])
        .arg(&prompt)
        .env("PIANOFORMER_MODELS", models_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let suggested: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let list = suggested["suggestions"].as_array().unwrap();
    assert!(list.len() >= 2 && list.len() <= 4, "{list:?}");
    assert_eq!(list[0]["chords_per_bar"], summary["chords_per_bar"]);
    let first = list[0]["log_prob"].as_f64().unwrap();
    for other in &list[1..] {
        assert_ne!(other["chords_per_bar"], list[0]["chords_per_bar"]);
        let p = other["log_prob"].as_f64().unwrap();
        assert!(p < first && p < 0.0, "{p} against {first}");
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pianoformer"))
        .args(["inspect", "--suggest", "9"])
        .arg(&prompt)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 to 8"));
    // The continuation plays as busy as asked: half and twice the prompt's notes a beat (a
    // note a beat) over eight new bars, the model choosing which notes.
    let continued = |density: &str| {
        let out_file = dir.join(format!("density-{density}.mid"));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pianoformer"))
            .args(["generate", "--task", "continuation", "--manifest"])
            .arg(&manifest)
            .arg(&prompt)
            .arg("-o")
            .arg(&out_file)
            .args(["--bars", "8", "--tokens", "3000", "--density", density])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let made = read_midi(&std::fs::read(&out_file).unwrap()).unwrap();
        let new: usize = made
            .tracks
            .iter()
            .flat_map(|t| &t.notes)
            .filter(|n| n.start >= 8 * 1920)
            .count();
        new as f64 / 32.0
    };
    let (sparse, busy) = (continued("0.5"), continued("2"));
    eprintln!("continuation at density 0.5: {sparse:.2} notes a beat, at 2: {busy:.2}");
    assert!(
        (0.3..0.75).contains(&sparse),
        "asked 0.5: {sparse:.2} a beat"
    );
    assert!((1.4..2.7).contains(&busy), "asked 2: {busy:.2} a beat");
    let piano_of = |chords: &str| piano_at(chords, "1");
    // The accompaniment's density: fewer notes at 0.5, more at 2 (over the test songs about
    // 0.44x and 2x; one 8-bar sample here).
    let progression = "C | G | Am | F | C | G | Am | F";
    let [sparse, own, busy] = ["0.5", "1", "2"].map(|d| piano_at(progression, d).len() as f64);
    eprintln!(
        "accompaniment at density 0.5: {:.2}x its own notes, at 2: {:.2}x",
        sparse / own,
        busy / own
    );
    assert!(
        sparse < 0.8 * own,
        "asked 0.5: {sparse} notes against {own}"
    );
    assert!(
        busy > 1.05 * own && busy > 2.0 * sparse,
        "asked 2: {busy} notes against {own}"
    );
    let given = piano_of("C | G | Am | F | C | G | Am | F");
    let moved = piano_of("E | B | C#m | A | E | B | C#m | A");
    assert_ne!(given, moved, "the chord lane changes the accompaniment");
    let tones: [&[u8]; 4] = [&[4, 8, 11], &[11, 3, 6], &[1, 4, 8], &[9, 1, 4]];
    let fit = moved
        .iter()
        .filter(|n| tones[(n.start / 1920) as usize % 4].contains(&(n.pitch % 12)))
        .count();
    assert!(
        fit as f64 >= 0.7 * moved.len() as f64,
        "{fit} of {} notes are tones of the given chords",
        moved.len()
    );
    // Alternatives: OUT.1.mid and OUT.2.mid, the second what --seed 4 alone writes.
    let generate = |extra: &[&str], out: &std::path::Path| {
        let done = std::process::Command::new(env!("CARGO_BIN_EXE_pianoformer"))
            .args(["generate", "--task", "accompaniment", "--manifest"])
            .arg(&manifest)
            .arg(&prompt)
            .arg("-o")
            .arg(out)
            .args(["--chords", progression])
            .args(extra)
            .output()
            .unwrap();
        assert!(
            done.status.success(),
            "{}",
            String::from_utf8_lossy(&done.stderr)
        );
        String::from_utf8_lossy(&done.stderr).to_string()
    };
    let said = generate(
        &["--seed", "3", "--alternatives", "2"],
        &dir.join("alt.mid"),
    );
    assert!(said.contains("mean pairwise onset F1"), "{said}");
    generate(&["--seed", "4"], &dir.join("alone.mid"));
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    assert_eq!(
        read("alt.2.mid"),
        read("alone.mid"),
        "each alternative is its seed's"
    );
    assert_ne!(read("alt.1.mid"), read("alt.2.mid"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The velocity model the accompaniments' dynamics come from: it loads (size and checksum
/// checked), was fitted by `pianoformer dynamics`, and carries its test figures, for the
/// pianists' own notes and for the piano the default model writes.
#[test]
fn the_shipped_velocity_model_loads_with_its_figures() {
    let text = std::fs::read_to_string(models_dir().join("manifest.json")).unwrap();
    let manifest = Manifest::parse(&text).unwrap();
    let entry = manifest
        .dynamics
        .as_ref()
        .expect("the manifest ships a velocity model (pianoformer dynamics)");
    let model = entry.load(&models_dir()).unwrap();
    assert!(model.noise >= 0.0 && model.residual > 0.0);
    assert!(
        entry.training["command"]
            .as_str()
            .is_some_and(|c| c.starts_with("pianoformer dynamics"))
    );
    for panel in ["model", "pianists", "one_velocity"] {
        assert!(
            entry.metrics["test"][panel]["spread_ratio"].is_number(),
            "{panel}"
        );
    }
    assert!(entry.metrics["test_written"]["written"]["songs_melody_corr_positive"].is_number());
}

/// The live take's pedal: it loads (size and checksum checked), reads each step causally (a
/// take decides its pedal as it plays), was fitted by `pianoformer pedal --causal`, and its
/// test figures beat the chord-change rule's; the written piano's pedal is another model.
#[test]
fn the_shipped_live_pedal_is_causal_and_carries_its_figures() {
    let text = std::fs::read_to_string(models_dir().join("manifest.json")).unwrap();
    let manifest = Manifest::parse(&text).unwrap();
    let entry = manifest
        .pedal_live
        .as_ref()
        .expect("the manifest ships a live pedal (pianoformer pedal --causal)");
    let model = entry.load_pedal(&models_dir()).unwrap();
    assert!(
        model.causal,
        "a live take's pedal reads only what was played"
    );
    assert!(
        entry.training["command"]
            .as_str()
            .is_some_and(|c| c.starts_with("pianoformer pedal") && c.contains("--causal"))
    );
    let test = &entry.metrics["test"];
    let f1 = |panel: &str| test[panel]["f1"].as_f64().unwrap();
    assert!(f1("learnt") > f1("rule"), "{test}");
    let written = manifest.pedal.as_ref().unwrap().load_pedal(&models_dir());
    assert!(
        !written.unwrap().causal,
        "the written piano's pedal reads the whole part"
    );
}

/// The default melody model follows the chords it is given: a plan of 16 bars under a
/// progression in C and under a substituted one (another key, other functions), four seeds
/// each, its onsets at chord changes and strong beats on tones of the planned chords at least
/// as often as its test songs' figure in the manifest less 0.05 (reports/melody.md).
#[test]
fn the_default_melody_follows_a_substituted_progression() {
    use pianoformer::data::melody::melody_steps;
    use pianoformer::eval::melody::{MelodyCounts, count_melody};
    use pianoformer::generate::piece_input;
    use pianoformer::music::piece::Piece;
    use pianoformer::studio::{Common, MelodyOptions, melody_piece};
    let text = std::fs::read_to_string(models_dir().join("manifest.json")).unwrap();
    let manifest = Manifest::parse(&text).unwrap();
    let Some(entry) = manifest
        .models
        .iter()
        .find(|m| m.task == Task::Melody && m.default)
    else {
        panic!("no default melody model in the manifest");
    };
    let bytes = std::fs::read(models_dir().join(&entry.file)).unwrap();
    let device = Device::flex();
    let model = load_entry(entry, &bytes, &device).unwrap();
    let defaults = &entry.defaults;
    let figure = entry.metrics["test"]["written"]["chord_tones"]
        .as_f64()
        .unwrap();
    for chart in [
        ["C", "G", "Am", "F", "C", "G", "F", "G"],
        ["Eb", "Cm", "Ab", "Bb", "Gm", "Cm", "Fm", "Bb"],
    ] {
        let mut counts = MelodyCounts::default();
        for seed in 0..4 {
            let mut plan = Piece::from_plan("plan", 16, 4, 4, 100.0).unwrap();
            for (bar, cell) in plan.chords.iter_mut().enumerate() {
                *cell = chart[bar % 8].into();
            }
            plan.phrases = vec![('A', 8), ('B', 8)];
            let options = MelodyOptions {
                common: Common {
                    seed,
                    ..Common::default()
                },
                ..MelodyOptions::default()
            };
            let sung = pollster::block_on(melody_piece(
                &model,
                defaults,
                &plan,
                &options,
                &device,
                |_| async { true },
            ))
            .unwrap();
            let grid = sung.plan_grid();
            let input = piece_input(&sung, grid, true).unwrap();
            let sheet = &input.sheet;
            let steps = melody_steps(&sheet.rolls.melody, &sheet.labels.melody, 0);
            counts.add(&count_melody(
                &steps,
                &sheet.labels,
                &sheet.grid,
                0..16 * 16,
            ));
        }
        let f = counts.figures();
        eprintln!(
            "{}: chord tones {:.3}, {:.2} notes a bar (test songs: {figure:.3})",
            chart.join(" "),
            f.chord_tones,
            f.onsets_per_bar
        );
        assert!(
            f.chord_tones >= figure - 0.05,
            "{chart:?}: chord tones {:.3} (test songs: {figure:.3})",
            f.chord_tones
        );
        assert!(
            f.onsets_per_bar >= 2.0,
            "{chart:?}: {:.2} notes a bar",
            f.onsets_per_bar
        );
    }
}

/// The default accompaniment ships the texture echo's lean, and plays it where the phrase lane
/// repeats a letter: the bars before the repeat are as without it, the repeat differs and
/// plays more like its first occurrence.
#[test]
fn the_default_accompaniment_echoes_a_repeated_phrase() {
    use pianoformer::music::midi::{Note, Song, TempoChange, Track, read_midi, write_midi};
    let manifest = models_dir().join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let parsed = pianoformer::models::Manifest::parse(&text).unwrap();
    let default = parsed
        .models
        .iter()
        .find(|m| m.task == pianoformer::model::config::Task::Accompaniment && m.default)
        .expect("a default accompaniment");
    let echo_lean = default
        .defaults
        .texture_echo
        .expect("the default ships a lean");
    let lean = echo_lean.lean;
    // A lean that keeps a phrase's texture through it leans from each phrase's second bar
    // (`EchoLean::kept`); any lean leaves the song's first bar alone, and one that does not
    // keep leaves everything before the repeat.
    let alone_bars: u64 = if echo_lean.kept.is_some() { 1 } else { 8 };
    for by_chord in lean {
        for register in by_chord {
            assert!(register[2] > 0.0 && register[0] < 0.0, "{lean:?}");
        }
    }
    let dir = std::env::temp_dir().join(format!("pianoformer-echo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Twelve bars of a melody on C, G, Am, F chord tones, a different tune in bars 5-8.
    let mut notes = Vec::new();
    for bar in 0..12u64 {
        let root = [60u8, 67, 69, 65][bar as usize % 4];
        let steps: &[u8] = if (4..8).contains(&bar) {
            &[7, 4]
        } else {
            &[0, 4, 7, 12]
        };
        let len = 1920 / steps.len() as u64;
        for (k, i) in steps.iter().enumerate() {
            let start = bar * 1920 + k as u64 * len;
            notes.push(Note {
                pitch: root + i,
                velocity: 90,
                start,
                end: start + len,
                channel: 0,
            });
        }
    }
    let song = Song {
        ppq: 480,
        tempos: vec![TempoChange {
            tick: 0,
            micros_per_quarter: 500_000,
        }],
        time_signatures: vec![],
        key_signatures: vec![],
        tracks: vec![Track {
            pedal: Vec::new(),
            name: "MELODY".into(),
            program: Some(0),
            notes,
            ..Default::default()
        }],
    };
    let prompt = dir.join("aba.mid");
    std::fs::write(&prompt, write_midi(&song)).unwrap();
    let piano = |echo: &str| {
        let out_file = dir.join(format!("echo-{echo}.mid"));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pianoformer"))
            .args(["generate", "--task", "accompaniment", "--manifest"])
            .arg(&manifest)
            .arg(&prompt)
            .arg("-o")
            .arg(&out_file)
            .args(["--phrases", "A4B4A4", "--seed", "5", "--texture-echo", echo])
            // The CPU draws both (an echo is drawn there; without one a GPU's fused steps
            // might round a probability otherwise).
            .args(["--backend", "cpu"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let made = read_midi(&std::fs::read(&out_file).unwrap()).unwrap();
        let piano = made.tracks.iter().find(|t| t.name == "PIANO").unwrap();
        piano.notes.clone()
    };
    let (plain, echoed) = (piano("0"), piano("2"));
    let before = |notes: &[Note]| -> Vec<(u8, u64)> {
        notes
            .iter()
            .filter(|n| n.start < alone_bars * 1920)
            .map(|n| (n.pitch, n.start))
            .collect()
    };
    assert_eq!(
        before(&plain),
        before(&echoed),
        "nothing answers an earlier bar in the first {alone_bars}"
    );
    // Onsets per (register, sixteenth of a 4-bar phrase) in bars `from..from + 4`.
    let onsets = |notes: &[Note], from: u64| -> std::collections::BTreeSet<(u8, u64)> {
        let register = |p: u8| (p >= 48) as u8 + (p >= 64) as u8;
        notes
            .iter()
            .filter(|n| (from * 1920..(from + 4) * 1920).contains(&n.start))
            .map(|n| (register(n.pitch), (n.start - from * 1920) / 120))
            .collect()
    };
    let shared = |notes: &[Note]| onsets(notes, 0).intersection(&onsets(notes, 8)).count();
    assert!(
        shared(&echoed) > shared(&plain),
        "the second A shares {} of the first A's onsets with the echo, {} without",
        shared(&echoed),
        shared(&plain)
    );
}

/// Lead sheets without labels (the project's fixture song written as a MusicXML lead sheet, in
/// two keys) are accompanied as the page accompanies them and scored by ILS against their
/// detected phrases, with the texture echo and without: with the echo a repeated letter's
/// segments are more alike than the model's own. A folder without lead sheets is refused in
/// words.
#[test]
fn the_lead_sheet_panel_scores_the_echo_against_detected_phrases() {
    use pianoformer::music::fixtures;
    use pianoformer::music::musicxml::{ScoreKind, write_musicxml};
    use pianoformer::music::piece::Piece;
    let dir = std::env::temp_dir().join(format!("pianoformer-lead-sheets-{}", std::process::id()));
    let sheets = dir.join("sheets");
    std::fs::create_dir_all(sheets.join("nested")).unwrap();
    for key in [0u8, 5] {
        let piece = Piece::from_song(&fixtures::song(key, 16), "fixture.mid").unwrap();
        let xml = write_musicxml(&piece, ScoreKind::LeadSheet).unwrap();
        std::fs::write(
            sheets.join("nested").join(format!("key{key}.musicxml")),
            xml,
        )
        .unwrap();
    }
    let out_file = dir.join("panel.json");
    let run = |data: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_pianoformer"))
            .args([
                "eval",
                "--task",
                "accompaniment",
                "--texture",
                "--lead-sheets",
            ])
            .args([
                "--model",
                "default",
                "--threads",
                "1",
                "--seed-per-song",
                "--data",
            ])
            .arg(data)
            .arg("--out")
            .arg(&out_file)
            .env("PIANOFORMER_MODELS", models_dir())
            .output()
            .unwrap()
    };
    let out = run(&sheets);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("texture echo (the page's)"), "{stdout}");
    let panel: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out_file).unwrap()).unwrap();
    assert_eq!(panel["sheets"].as_array().unwrap().len(), 2);
    assert!(
        panel["echo"]["ils"].as_f64().is_some(),
        "a returning letter: {panel}"
    );
    // The fixture's phrases all share one letter (ILS is then 1 either way): the echo shows in
    // how alike the same letter's segments are.
    let same = |row: &str| -> f64 {
        let sheets = panel["sheets"].as_array().unwrap();
        sheets
            .iter()
            .map(|s| s[row]["ils"]["same"].as_f64().unwrap())
            .sum()
    };
    assert!(same("echo") > same("plain"), "{panel}");
    assert!(
        panel["sheets"][0]["phrases"]
            .as_str()
            .unwrap()
            .starts_with('A')
    );
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = run(&empty);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("holds no MusicXML lead sheets"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The manifest reads and writes back byte for byte (objects keep their keys' order), so the
/// commands that rewrite it (`pianoformer pedal`, `dynamics`, `eval --record`) change only the
/// entry they mean to.
#[test]
fn the_manifest_writes_back_as_it_was_read() {
    let text = std::fs::read_to_string(models_dir().join("manifest.json")).unwrap();
    let manifest = Manifest::parse(&text).unwrap();
    let back = serde_json::to_string_pretty(&manifest).unwrap() + "\n";
    let first = text.lines().zip(back.lines()).position(|(a, b)| a != b);
    assert!(
        back == text,
        "first differing line {:?}: {:?}",
        first,
        first.map(|i| (text.lines().nth(i), back.lines().nth(i)))
    );
}
