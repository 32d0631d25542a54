//! `pianoformer train`, `generate` and their errors, as a user runs them, on a folder of small
//! songs written by the project's own MIDI writer (tiny preset: seconds, and the loss must
//! fall). POP909 runs are in `tests/pop909/`.
#![cfg(not(target_arch = "wasm32"))]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pianoformer::music::fixtures::song;
use pianoformer::music::midi::{read_midi, write_midi};

fn pianoformer() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pianoformer"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "pianoformer-training-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Ten songs in ten keys (the tenth file is held out for validation).
fn song_folder(dir: &Path) -> PathBuf {
    let data = dir.join("songs");
    std::fs::create_dir_all(&data).unwrap();
    for key in 0..10u8 {
        std::fs::write(
            data.join(format!("song{key:02}.mid")),
            write_midi(&song(key, 16)),
        )
        .unwrap();
    }
    data
}

fn ok(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn fails_plainly(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "should fail: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.starts_with("error: ") || err.contains("\nerror: "),
        "{err}"
    );
    err
}

/// The (step, loss) lines of a run's log.
fn losses(run: &Path) -> Vec<(u64, f64)> {
    std::fs::read_to_string(run.join("log.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| Some((v["step"].as_u64()?, v["loss"].as_f64()?)))
        .collect()
}

fn train(data: &Path, out: &Path, task: &str, extra: &[&str]) -> Output {
    train_command(data, out, task, extra)
        .output()
        .expect("run pianoformer")
}

fn train_command(data: &Path, out: &Path, task: &str, extra: &[&str]) -> Command {
    let window = if task == "accompaniment" { "64" } else { "48" };
    let mut cmd = pianoformer();
    cmd.args(["train", "--task", task, "--preset", "tiny", "--batch", "4"]);
    if !extra.contains(&"--window") {
        cmd.args(["--window", window]);
    }
    cmd.args(["--lr", "3e-3", "--warmup", "5"])
        .args(["--eval-every", "10", "--checkpoint-every", "10"])
        .arg("--data")
        .arg(data)
        .arg("--out")
        .arg(out)
        .args(extra);
    cmd
}

#[test]
fn accompaniment_training_lowers_the_loss_checkpoints_and_generates() {
    let dir = scratch("accompaniment");
    let data = song_folder(&dir);
    let run = dir.join("run");
    let err = ok(&train(
        &data,
        &run,
        "accompaniment",
        &[
            "--pe",
            "fstripe",
            "--levels",
            "chord,position",
            "--chord-encoding",
            "id",
            "--pe-lr-scale",
            "5",
            "--feature-map",
            "relu",
            "--steps",
            "40",
        ],
    ));
    assert!(err.contains("9 train, 1 validation"), "{err}");
    let config = std::fs::read_to_string(run.join("config.json")).unwrap();
    assert!(config.contains("\"chord_id\""), "{config}");
    assert!(config.contains("\"feature_kind\": \"relu\""), "{config}");
    let l = losses(&run);
    assert_eq!(l.len(), 40, "one log line per step");
    let first: f64 = l[..5].iter().map(|x| x.1).sum::<f64>() / 5.0;
    let last: f64 = l[35..].iter().map(|x| x.1).sum::<f64>() / 5.0;
    assert!(last < 0.5 * first, "{first} -> {last}");
    let log = std::fs::read_to_string(run.join("log.jsonl")).unwrap();
    assert!(log.contains("valid_loss"), "validation was logged");
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    assert_eq!(state["step"], 40);
    assert_eq!(state["options"]["pe_lr_scale"], 5.0);
    assert!(state["valid_loss"].as_f64().is_some());
    for f in ["model.bpk", "optim.bpk", "config.json"] {
        assert!(run.join(f).is_file(), "{f}");
    }

    // The same folder again without --resume: refused, nothing overwritten.
    let before = std::fs::read(run.join("model.bpk")).unwrap();
    let err = fails_plainly(&train(&data, &run, "accompaniment", &["--steps", "5"]));
    assert!(err.contains("--resume"), "{err}");
    assert_eq!(before, std::fs::read(run.join("model.bpk")).unwrap());

    // A melody alone in, a file with a PIANO track out, longer than the training windows.
    let prompt = dir.join("melody.mid");
    let mut melody_only = song(2, 24);
    melody_only.tracks.truncate(1);
    std::fs::write(&prompt, write_midi(&melody_only)).unwrap();
    let out_file = dir.join("accompanied.mid");
    let err = ok(&pianoformer()
        .args(["generate", "--task", "accompaniment", "--model"])
        .arg(&run)
        .arg(&prompt)
        .arg("-o")
        .arg(&out_file)
        .args([
            "--chords",
            "D | A | Bm | G",
            "--phrases",
            "A8B8A8",
            "--threshold",
            "0.3",
        ])
        .output()
        .unwrap());
    assert!(err.contains("24 bars accompanied"), "{err}");
    let made = read_midi(&std::fs::read(&out_file).unwrap()).unwrap();
    let names: Vec<&str> = made.tracks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["MELODY", "PIANO"]);
    assert_eq!(made.tracks[0].notes, melody_only.tracks[0].notes);
    assert!(!made.tracks[1].notes.is_empty(), "the piano plays");

    // Asking the accompaniment run for a continuation is refused in words.
    let err = fails_plainly(
        &pianoformer()
            .args(["generate", "--task", "continuation", "--model"])
            .arg(&run)
            .arg(&prompt)
            .arg("-o")
            .arg(dir.join("x.mid"))
            .output()
            .unwrap(),
    );
    assert!(err.contains("Accompaniment model"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_interrupted_run_resumes_exactly_where_it_stopped() {
    let dir = scratch("resume");
    let data = song_folder(&dir);
    let straight = dir.join("straight");
    let interrupted = dir.join("interrupted");
    let common = ["--pe", "sine_spe", "--gated", "--steps", "16"];
    ok(&train(&data, &straight, "accompaniment", &common));
    let mut first_half = common.to_vec();
    first_half.extend(["--stop-after", "7"]);
    let err = ok(&train(&data, &interrupted, "accompaniment", &first_half));
    assert!(err.contains("stopped at step 7 of 16"), "{err}");
    // Another folder with fewer songs is not the run's data: refused in words.
    let fewer = dir.join("fewer");
    std::fs::create_dir_all(&fewer).unwrap();
    for entry in std::fs::read_dir(&data).unwrap().skip(1) {
        let path = entry.unwrap().path();
        std::fs::copy(&path, fewer.join(path.file_name().unwrap())).unwrap();
    }
    let err = fails_plainly(&train(&fewer, &interrupted, "accompaniment", &["--resume"]));
    assert!(err.contains("resume it with the same data"), "{err}");
    // The same songs moved elsewhere (another machine, another directory) resume, and a CPU run
    // never opens the GPU, even where wgpu's default adapter cannot be had (Burn reads the
    // optimiser state onto its default device).
    let moved = dir.join("moved");
    std::fs::rename(&data, &moved).unwrap();
    let out = train_command(&moved, &interrupted, "accompaniment", &["--resume"])
        .env("CUBECL_WGPU_DEFAULT_DEVICE", "DiscreteGpu(99)")
        .env_remove("BURN_DEVICE")
        .output()
        .unwrap();
    let err = ok(&out);
    assert!(err.contains("resuming at step 7"), "{err}");
    assert!(err.contains("holds the same songs"), "{err}");
    let (a, b) = (losses(&straight), losses(&interrupted));
    assert_eq!(a.len(), 16);
    assert_eq!(b.len(), 16, "the log holds each step once: {b:?}");
    for ((sa, la), (sb, lb)) in a.iter().zip(&b) {
        assert_eq!(sa, sb);
        assert!(
            (la - lb).abs() <= 1e-4 * la.abs().max(1.0),
            "step {sa}: {la} straight, {lb} resumed"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A melody model trained on the song folder (its chords detected, its phrases found) learns,
/// then sings a plan of chords and phrases alone, goes on from a file over bars planned past
/// its end, and says plainly what it cannot do.
#[test]
fn melody_training_lowers_the_loss_and_sings_a_plan() {
    let dir = scratch("melody");
    let data = song_folder(&dir);
    let run = dir.join("run");
    let err = ok(&train(
        &data,
        &run,
        "melody",
        &[
            "--pe", "sine_spe", "--gated", "--steps", "40", "--window", "64",
        ],
    ));
    assert!(err.contains("Melody"), "{err}");
    let l = losses(&run);
    let first: f64 = l[..5].iter().map(|x| x.1).sum::<f64>() / 5.0;
    let last: f64 = l[35..].iter().map(|x| x.1).sum::<f64>() / 5.0;
    assert!(last < 0.7 * first, "{first} -> {last}");

    let sung = dir.join("sung.mid");
    let generate = |args: &[&str]| {
        pianoformer()
            .args(["generate", "--task", "melody", "--model"])
            .arg(&run)
            .arg("-o")
            .arg(&sung)
            .args(args)
            .output()
            .unwrap()
    };
    let err = ok(&generate(&[
        "--chords",
        "C | G | Am | F",
        "--phrases",
        "A2A2",
        "--range",
        "60-79",
    ]));
    assert!(err.contains("bars 1-4 sung"), "{err}");
    let made = read_midi(&std::fs::read(&sung).unwrap()).unwrap();
    let melody = &made
        .tracks
        .iter()
        .find(|t| t.name == "MELODY")
        .unwrap()
        .notes;
    assert!(!melody.is_empty());
    assert!(melody.iter().all(|n| (60..=79).contains(&n.pitch)));
    assert!(melody.iter().all(|n| n.end <= 4 * 4 * made.ppq as u64));
    // Two alternatives of the plan: sung.1.mid is what the seed alone sings, sung.2.mid the
    // next seed's.
    let plan = [
        "--chords",
        "C | G | Am | F",
        "--phrases",
        "A2A2",
        "--seed",
        "7",
    ];
    ok(&generate(&plan));
    let alone = std::fs::read(&sung).unwrap();
    let err = ok(&generate(&[&plan[..], &["--alternatives", "2"]].concat()));
    let [first, second] = [1, 2].map(|k| std::fs::read(dir.join(format!("sung.{k}.mid"))).unwrap());
    assert_eq!(first, alone, "{err}");
    assert_ne!(first, second);
    // From a file: its 2 bars kept, 2 more sung.
    let prompt = dir.join("prompt.mid");
    std::fs::write(&prompt, write_midi(&song(0, 2))).unwrap();
    let err = ok(&generate(&[prompt.to_str().unwrap(), "--bars", "2"]));
    assert!(err.contains("bars 3-4 sung"), "{err}");
    let made = read_midi(&std::fs::read(&sung).unwrap()).unwrap();
    let bar = 4 * made.ppq as u64;
    let melody = &made
        .tracks
        .iter()
        .find(|t| t.name == "MELODY")
        .unwrap()
        .notes;
    let before: Vec<_> = song(0, 2).tracks[0]
        .notes
        .iter()
        .map(|n| (n.pitch, n.start))
        .collect();
    let kept: Vec<_> = melody
        .iter()
        .filter(|n| n.start < 2 * bar)
        .map(|n| (n.pitch, n.start))
        .collect();
    assert_eq!(kept, before);
    assert!(melody.iter().any(|n| n.start >= 2 * bar));
    for (args, says) in [
        (&[][..], "needs a plan"),
        (&["--chords", "C | G", "--range", "80-60"][..], "--range"),
        (&["--chords", "C | G", "--meter", "four"][..], "--meter"),
        (&[prompt.to_str().unwrap()][..], "has a melody already"),
    ] {
        let err = fails_plainly(&generate(args));
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn continuation_training_lowers_the_loss_and_generates_past_its_window() {
    let dir = scratch("continuation");
    let data = song_folder(&dir);
    let run = dir.join("run");
    ok(&train(
        &data,
        &run,
        "continuation",
        &["--pe", "sine_spe", "--gated", "--steps", "40"],
    ));
    let l = losses(&run);
    let first: f64 = l[..5].iter().map(|x| x.1).sum::<f64>() / 5.0;
    let last: f64 = l[35..].iter().map(|x| x.1).sum::<f64>() / 5.0;
    assert!(last < 0.7 * first, "{first} -> {last}");

    let prompt = dir.join("prompt.mid");
    std::fs::write(&prompt, write_midi(&song(0, 2))).unwrap();
    let out_file = dir.join("continued.mid");
    // 300 new tokens: six times the 48-token training window.
    let err = ok(&pianoformer()
        .args(["generate", "--task", "continuation", "--model"])
        .arg(&run)
        .arg(&prompt)
        .arg("-o")
        .arg(&out_file)
        .args(["--tokens", "300", "--seed", "3"])
        .output()
        .unwrap());
    assert!(err.contains("300 new tokens"), "{err}");
    let made = read_midi(&std::fs::read(&out_file).unwrap()).unwrap();
    let prompt_notes = song(0, 2).note_count();
    assert!(
        made.note_count() > prompt_notes,
        "{} notes after a {prompt_notes}-note prompt",
        made.note_count()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_data_paths_options_and_files_are_plain_errors() {
    let dir = scratch("errors");
    let missing = dir.join("nowhere");
    let err = fails_plainly(&train(&missing, &dir.join("r1"), "accompaniment", &[]));
    assert!(err.contains("does not exist"), "{err}");

    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let err = fails_plainly(&train(&empty, &dir.join("r2"), "accompaniment", &[]));
    assert!(err.contains("holds no .mid files"), "{err}");

    let junk = dir.join("junk");
    std::fs::create_dir_all(&junk).unwrap();
    std::fs::write(junk.join("a.mid"), b"not a midi file").unwrap();
    let err = fails_plainly(&train(&junk, &dir.join("r3"), "accompaniment", &[]));
    assert!(err.contains("could be used"), "{err}");

    let data = song_folder(&dir);
    let err = fails_plainly(&train(
        &data,
        &dir.join("r4"),
        "accompaniment",
        &["--pe", "rope"],
    ));
    assert!(err.contains("unknown positional encoding `rope`"), "{err}");
    let err = fails_plainly(&train(&data, &dir.join("r5"), "drums", &[]));
    assert!(err.contains("unknown task"), "{err}");
    let err = fails_plainly(&train(
        &data,
        &dir.join("r5m"),
        "melody",
        &["--pe", "fstripe", "--levels", "melody,phrase"],
    ));
    assert!(err.contains("writes the melody"), "{err}");
    let err = fails_plainly(&train(
        &data,
        &dir.join("r6"),
        "continuation",
        &["--pe", "fstripe", "--levels", "melody,time"],
    ));
    assert!(err.contains("no melody part"), "{err}");
    let err = fails_plainly(&train(
        &data,
        &dir.join("r6c"),
        "accompaniment",
        &["--context", "none"],
    ));
    assert!(err.contains("what a harmonizer reads"), "{err}");
    let err = fails_plainly(&train(
        &data,
        &dir.join("r6d"),
        "harmonization",
        &["--context", "key"],
    ));
    assert!(err.contains("unknown context `key`"), "{err}");
    let err = fails_plainly(&train(
        &data,
        &dir.join("r6e"),
        "accompaniment",
        &["--feature-map", "tanh"],
    ));
    assert!(err.contains("unknown feature map `tanh`"), "{err}");
    let err = fails_plainly(&train(
        &data,
        &dir.join("r6b"),
        "accompaniment",
        &["--pe", "sine_spe", "--chord-encoding", "id"],
    ));
    assert!(err.contains("is for F-StrIPE"), "{err}");
    let err = fails_plainly(&train(
        &data,
        &dir.join("r6c"),
        "accompaniment",
        &["--pe", "fstripe", "--chord-encoding", "roman"],
    ));
    assert!(err.contains("unknown chord encoding `roman`"), "{err}");
    let err = fails_plainly(&train(
        &data,
        &dir.join("r6d"),
        "accompaniment",
        &["--pe-lr-scale", "0"],
    ));
    assert!(err.contains("learning-rate multiple"), "{err}");
    let err = fails_plainly(&train(
        &data,
        &dir.join("r6e"),
        "continuation",
        &["--pe", "sine_spe", "--taps", "16"],
    ));
    assert!(err.contains("--pe sine_spe has none"), "{err}");
    let err = fails_plainly(&train(
        &data,
        &dir.join("r6f"),
        "continuation",
        &["--pe", "conv_spe", "--taps", "0"],
    ));
    assert!(err.contains("--taps must be between 1 and 4096"), "{err}");
    // --taps sets convSPE's filter length in the run's config.
    let taps = dir.join("r6g");
    ok(&train(
        &data,
        &taps,
        "continuation",
        &["--pe", "conv_spe", "--taps", "12", "--steps", "2"],
    ));
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(taps.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["pe"]["taps"], 12, "{config}");
    let err = fails_plainly(&train(
        &data,
        &dir.join("r7"),
        "continuation",
        &["--window", "100000"],
    ));
    assert!(err.contains("long enough"), "{err}");
    let err = fails_plainly(&train(
        &data,
        &dir.join("r8"),
        "accompaniment",
        &["--resume"],
    ));
    assert!(err.contains("no run to resume"), "{err}");
    let bad_config = dir.join("bad.json");
    std::fs::write(&bad_config, "{\"task\": \"accompaniment\"}").unwrap();
    let err = fails_plainly(&train(
        &data,
        &dir.join("r9"),
        "accompaniment",
        &["--config", bad_config.to_str().unwrap()],
    ));
    assert!(err.contains("is not a model config"), "{err}");
    let err = fails_plainly(
        &pianoformer()
            .args(["generate", "--task", "accompaniment", "--model"])
            .arg(dir.join("r1"))
            .arg(data.join("song00.mid"))
            .arg("-o")
            .arg(dir.join("x.mid"))
            .output()
            .unwrap(),
    );
    assert!(err.contains("not a model"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
