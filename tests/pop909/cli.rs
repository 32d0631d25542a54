//! The `pianoformer` CLI on real songs at toy scale: training, evaluation and generation for
//! accompaniment, and sampled continuations scored and reported.

use pianoformer::music::midi::read_midi;

use super::data_root;

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

/// Trains a tiny `task` model for 4 steps of 2 windows of `window` on 3 songs a split into
/// `run` (`extra`: more `train` arguments).
fn train_tiny(
    root: &std::path::Path,
    run: &std::path::Path,
    task: &str,
    window: &str,
    extra: &[&str],
) {
    run_ok(
        pianoformer()
            .args(["train", "--task", task, "--preset", "tiny"])
            .args(extra)
            .args(["--steps", "4", "--batch", "2", "--window", window])
            .args(["--eval-every", "4", "--limit", "3", "--data"])
            .arg(root)
            .arg("--out")
            .arg(run),
    );
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
    train_tiny(&root, &run, "continuation", "64", &[]);
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
        (&["--top-p", "0"][..], "--top-p 0: top-p must be above 0"),
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

/// A melody model judged by what it sings, at toy scale: a tiny model trained for a few steps
/// writes the melodies of two validation and two test songs from their lanes, two samples a
/// song; eval.json holds the setting chosen, the real and written figures and the samples.
#[test]
fn melodies_are_scored_by_what_they_sing() {
    let Some(root) = data_root() else { return };
    let dir = std::env::temp_dir().join(format!("pianoformer-melody-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = dir.join("mel");
    let levels = ["--pe", "fstripe", "--levels", "phrase,phrase_bar,position"];
    train_tiny(&root, &run, "melody", "64", &levels);
    let err = run_ok(
        pianoformer()
            .args(["eval", "--task", "melody", "--limit", "2", "--samples", "2"])
            .args(["--temperatures", "0.9", "--pitch-temperatures", "0.9"])
            .args(["--echoes", "0,3", "--model"])
            .arg(&run)
            .arg("--data")
            .arg(&root),
    );
    assert!(err.contains("chosen on validation"), "{err}");
    let eval: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("eval.json")).unwrap()).unwrap();
    assert_eq!(eval["samples"], 2);
    // Temperature 0.9, then echo 0 beside the default 3.
    assert_eq!(eval["sweep"].as_array().unwrap().len(), 2, "{eval}");
    let test = &eval["test"];
    for side in ["real", "written"] {
        let f = &test[side];
        assert!(f["onsets_per_bar"].as_f64().unwrap() > 0.0, "{side}: {f}");
        let share = f["chord_tones"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&share), "{side}: {f}");
        let kept = &test[format!("{side}_echo")]["cells"];
        assert_eq!(kept.as_array().map(Vec::len), Some(2), "{side}: {test}");
    }
    // The training songs' repeats, beside which the writer's echo is set.
    let training = &eval["training_songs"];
    assert!(training["less_at_a_cadence"].is_number(), "{training}");
    assert!(err.contains("training songs ("), "{err}");
    // Shipped, the echo chosen on validation is the model's own: the page and `generate`
    // write with it unless told otherwise.
    let manifest = dir.join("models").join("manifest.json");
    run_ok(
        pianoformer()
            .arg("ship")
            .arg(&run)
            .args(["--name", "mel-toy", "--description", "toy", "--manifest"])
            .arg(&manifest),
    );
    let shipped: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    let entry = &shipped["models"][0];
    assert!(entry["echo"].is_number(), "{entry}");
    assert_eq!(entry["echo"], eval["echo"], "{entry}");
    let metrics = &entry["metrics"];
    assert!(metrics.get("echo").is_none(), "{entry}");
    assert!(metrics["test"]["written_echo"].is_object(), "{entry}");
    assert!(metrics["sweep"][0].get("written_echo").is_none(), "{entry}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A harmonizer evaluated and shipped at toy scale: `eval --task harmonization` chooses the
/// colourful end's temperature on validation songs (each judged on several draws a song) and
/// `ship` carries it into the manifest, where the page's Chord colour reads it.
#[test]
fn a_harmonizer_s_colourful_end_is_chosen_on_validation_and_shipped() {
    let Some(root) = data_root() else { return };
    let dir = std::env::temp_dir().join(format!("pianoformer-harm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = dir.join("harm");
    train_tiny(&root, &run, "harmonization", "32", &[]);
    let err = run_ok(
        pianoformer()
            .args(["eval", "--task", "harmonization", "--limit", "2"])
            .args(["--accompaniment", "none", "--model"])
            .arg(&run)
            .arg("--data")
            .arg(&root),
    );
    assert!(err.contains("the colourful end (drawn at"), "{err}");
    assert!(err.contains("against the annotations: CHE"), "{err}");
    let eval: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("eval.json")).unwrap()).unwrap();
    let colourful = &eval["alternatives"]["colourful"];
    assert_eq!(
        colourful["valid"].as_array().unwrap().len(),
        7,
        "{colourful}"
    );
    assert_eq!(colourful["draws"], 3);
    // As the manifest holds it: f32.
    let f32_of = |v: &serde_json::Value| v.as_f64().map(|x| x as f32);
    let t = f32_of(&colourful["temperature"]);
    assert!(
        [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0].map(Some).contains(&t),
        "{colourful}"
    );
    assert_eq!(f32_of(&eval["decode"]["colourful"]), t, "{eval}");
    let manifest = dir.join("models").join("manifest.json");
    run_ok(
        pianoformer()
            .arg("ship")
            .arg(&run)
            .args(["--name", "harm-toy", "--description", "toy", "--manifest"])
            .arg(&manifest),
    );
    let shipped: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    let entry = &shipped["models"][0];
    assert_eq!(f32_of(&entry["harmony"]["colourful"]), t, "{shipped}");
    // The sweep stays in eval.json; what was chosen and its test scores are in the manifest.
    let shipped_colourful = &entry["metrics"]["alternatives"]["colourful"];
    assert!(shipped_colourful["valid"].is_null(), "{shipped_colourful}");
    assert!(
        shipped_colourful["test"]["measures"]["che"].is_number(),
        "{shipped_colourful}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `eval --task pedal` tells where the default path's sounding lengths come from: a
/// validation song's melody alone accompanied with the lanes a dropped file gets (the
/// harmonizer's chords) and with the annotated chords instead (no harmonizer), a line each
/// with the figures set side by side; a split it does not know is refused in words.
#[test]
fn the_default_path_is_measured_with_each_lane_in_turn() {
    let Some(root) = data_root() else { return };
    let eval = |split: &str, more: &[&str]| {
        pianoformer()
            .args([
                "eval", "--task", "pedal", "--model", "default", "--limit", "1",
            ])
            .args(["--lanes", "open,chords", "--split", split, "--data"])
            .arg(&root)
            .args(more)
            .output()
            .expect("run pianoformer")
    };
    let out = eval("valid", &[]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.starts_with("Validation songs (1 pedalled"),
        "{stdout}"
    );
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("The default path on 1 melody-only files"))
        .collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(lines[0].contains("(1 harmonized; lanes Open;"), "{stdout}");
    assert!(
        lines[1].contains("(0 harmonized; lanes Chords;"),
        "{stdout}"
    );
    assert!(!stdout.contains("NaN"), "{stdout}");
    let bad = eval("train", &[]);
    assert!(!bad.status.success());
    let words = String::from_utf8_lossy(&bad.stderr);
    assert!(
        words.contains("--split is valid or test, not train"),
        "{words}"
    );
    // Another accompaniment, each song at a seed of its own; a model that is not there is
    // named in words.
    let other = eval(
        "valid",
        &[
            "--accompaniment",
            "accompaniment-sinespe",
            "--seed-per-song",
            "--seed",
            "2",
        ],
    );
    let stdout = String::from_utf8_lossy(&other.stdout);
    assert!(
        other.status.success(),
        "{}",
        String::from_utf8_lossy(&other.stderr)
    );
    let played: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("The default path on 1 melody-only files"))
        .collect();
    assert_eq!(played.len(), 2, "{stdout}");
    assert!(
        played.iter().all(|l| l.contains("accompaniment-sinespe")),
        "both lanes name the model played: {stdout}"
    );
    let missing = eval("valid", &["--accompaniment", "no-such-model"]);
    assert!(!missing.status.success());
    let words = String::from_utf8_lossy(&missing.stderr);
    assert!(words.contains("no-such-model"), "{words}");
}

/// `eval --texture --seed-per-song`: each song draws from a seed of its own, and the panel says
/// so in its summary line and its JSON.
#[test]
fn the_texture_panel_gives_each_song_its_own_seed_when_asked() {
    let Some(root) = data_root() else { return };
    let dir = std::env::temp_dir().join(format!("pianoformer-texture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out_file = dir.join("texture.json");
    let out = pianoformer()
        .args(["eval", "--task", "accompaniment", "--texture"])
        .args([
            "--model",
            "accompaniment-ar",
            "--split",
            "valid",
            "--strengths",
            "1",
        ])
        .args([
            "--limit",
            "1",
            "--threads",
            "1",
            "--seed-per-song",
            "--data",
        ])
        .arg(&root)
        .arg("--out")
        .arg(&out_file)
        .output()
        .expect("run pianoformer");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("seed 0 + each song's own)"), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out_file).unwrap()).unwrap();
    assert_eq!(json["seed_per_song"], true, "{json}");
    std::fs::remove_dir_all(&dir).ok();
}
