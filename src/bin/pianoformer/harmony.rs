//! `pianoformer eval --task harmonization`: the harmonic rhythm counted in the training songs'
//! annotations, the emission weight chosen on validation songs (melody and bridge only,
//! phrases detected from them) by root + family accuracy, then the test songs scored against
//! the rule-based detector (from the melody alone and from the full arrangement) and the
//! annotations themselves. Writes `eval.json` into the run folder.

use burn::tensor::Device;
use pianoformer::data::corpus::{Corpus, Piece};
use pianoformer::data::sources::Loaded;
use pianoformer::eval::harmony::with_chords;
use pianoformer::eval::harmony::{HarmonyScores, HarmonySong, phrase_f1, score, sus_share};
use pianoformer::eval::panel::chord_tones_with_lanes;
use pianoformer::generate::harmonize::{Choice, chord_log_probs, progression};
use pianoformer::model::config::Task;
use pianoformer::model::performer::Performer;
use pianoformer::music::chords::Chord;
use pianoformer::music::harmony::decode::{HarmonyDecode, Rhythm};
use pianoformer::music::harmony::{BeatPlaces, CHORD_CLASSES, class_chord};

/// The emission weights tried on validation.
const WEIGHTS: [f32; 9] = [0.25, 0.35, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 4.0];
/// The tone weights tried on validation (the best progression by its chords' expected tones;
/// reports/harmonizer.md, "Choosing chords by their tones").
const TONE_WEIGHTS: [f32; 7] = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0];

fn songs(corpus: &Corpus) -> (Vec<&Piece>, Vec<HarmonySong>) {
    let pieces: Vec<&Piece> = corpus.pieces.iter().filter(|p| p.has_harmony()).collect();
    let songs = pieces.iter().map(|p| HarmonySong::new(p)).collect();
    (pieces, songs)
}

/// The model's log-probabilities for every song, with the detected or the annotated phrases.
fn all_log_probs(
    model: &Performer,
    songs: &[HarmonySong],
    annotated_phrases: bool,
    seed: u64,
) -> Result<Vec<Vec<f32>>, String> {
    songs
        .iter()
        .map(|s| {
            let labels = if annotated_phrases {
                &s.annotated_labels
            } else {
                &s.detected_labels
            };
            pollster::block_on(chord_log_probs(model, &s.melody, &s.bridge, labels, seed))
                .map_err(|e| format!("{}: {e}", s.name))
        })
        .collect()
}

fn decode_all(
    songs: &[HarmonySong],
    log_probs: &[Vec<f32>],
    decode: &HarmonyDecode,
    choice: Choice,
) -> Vec<Vec<Option<Chord>>> {
    songs
        .iter()
        .zip(log_probs)
        .map(|(s, lp)| progression(lp, &s.places, decode, 0..usize::MAX, None, choice))
        .collect()
}

fn line(what: &str, s: &HarmonyScores) {
    let m = &s.measures;
    eprintln!(
        "  {what:<34} root {:.3}  family {:.3}  exact {:.3}  tones {:.3} | CTnCTR {:.3} PCS {:.3} MCTD {:.3} \
         CHE {:.3} CC {:.1} CTD {:.3} sus {:.3} | changes/bar {:.2} on grid {:.2} | repeats {}",
        s.accuracy[0],
        s.accuracy[1],
        s.accuracy[2],
        s.tones,
        m.ctnctr,
        m.pcs,
        m.mctd,
        m.che,
        m.cc,
        m.ctd,
        m.sus,
        s.rhythm.changes_per_bar,
        s.rhythm.on_grid,
        s.repetition_agreement
            .map_or("-".into(), |x| format!("{x:.3}"))
    );
}

/// The default accompaniment of every test song with each way of filling the lanes from the
/// melody alone, scored by the share of its onsets that are tones of the annotated chords.
fn accompaniment_check(
    accompaniment: &crate::models::Loaded,
    pieces: &[&Piece],
    songs: &[HarmonySong],
    lanes: &[(&str, &Vec<Vec<Option<Chord>>>)],
    seed: u64,
    device: &Device,
) -> Result<serde_json::Value, String> {
    let mut sampling = accompaniment.piano_sampling();
    sampling.seed = seed;
    let mut out = serde_json::Map::new();
    eprintln!(
        "the accompaniment ({}) from each lane: the share of its onsets that are tones of the \
         annotated chords",
        accompaniment.source
    );
    for (name, chords) in lanes {
        let mut values = Vec::new();
        for ((piece, song), chords) in pieces.iter().zip(songs).zip(chords.iter()) {
            let labels = with_chords(&song.detected_labels, chords);
            let r = pollster::block_on(chord_tones_with_lanes(
                &accompaniment.model,
                piece,
                &labels,
                sampling,
                device,
            ))
            .map_err(|e| format!("{}: {e}", song.name))?;
            values.extend(r);
        }
        let mean = values.iter().sum::<f64>() / values.len().max(1) as f64;
        eprintln!("  {name:<34} {mean:.3} over {} songs", values.len());
        out.insert(name.to_string(), serde_json::json!(mean));
    }
    Ok(serde_json::Value::Object(out))
}

pub fn run(
    model: &Performer,
    data: &Loaded,
    args: &crate::eval::Args,
    device: &Device,
) -> Result<serde_json::Value, String> {
    let seed = args.seed;
    let train = &data.train;
    let places: Vec<(Vec<Option<Chord>>, BeatPlaces)> = train
        .pieces
        .iter()
        .filter(|p| p.has_harmony())
        .map(|p| {
            let spb = p.grid.steps_per_beat.max(1);
            let mut chords = p.labels.beat_chords();
            // Only the annotated span's changes count.
            let span = p.range.start.div_ceil(spb)..p.range.end / spb;
            for (b, c) in chords.iter_mut().enumerate() {
                if !span.contains(&b) {
                    *c = None;
                }
            }
            (chords, BeatPlaces::from_labels(&p.labels))
        })
        .collect();
    if places.is_empty() {
        return Err("no training song with chords to count the harmonic rhythm in".into());
    }
    let rhythm = Rhythm::fit(places.iter().map(|(c, p)| (&c[..], p)));
    eprintln!(
        "harmonic rhythm of {} training songs: a change on {:.0} % of bar lines, {:.0} % of half \
         bars, {:.1} % of other beats",
        places.len(),
        100.0 * rhythm.change[0],
        100.0 * rhythm.change[1],
        100.0 * rhythm.change[2]
    );
    let choice = Choice::Best.for_model(model);
    let (_, valid) = songs(&data.valid);
    if valid.is_empty() {
        return Err("no validation song with annotated chords".into());
    }
    let lp = all_log_probs(model, &valid, false, seed)?;
    eprintln!(
        "validation ({} songs, melody and bridge only, detected phrases):",
        valid.len()
    );
    // Each beat's most likely chord on its own, no harmonic rhythm: what the decoding adds to.
    let argmax: Vec<Vec<Option<Chord>>> = lp
        .iter()
        .map(|lp| {
            lp.chunks(CHORD_CLASSES)
                .map(|row| {
                    let best = (0..row.len()).max_by(|&a, &b| row[a].total_cmp(&row[b]));
                    class_chord(best.unwrap_or(0))
                })
                .collect()
        })
        .collect();
    line("each beat on its own", &score(&valid, &argmax));
    let mut tried = Vec::new();
    let mut best: Option<(HarmonyDecode, HarmonyScores)> = None;
    // Every decoding setting is chosen by root + family accuracy, then root.
    let key = |s: &HarmonyScores| (s.accuracy[1], s.accuracy[0]);
    for weight in WEIGHTS {
        let decode = HarmonyDecode {
            rhythm,
            weight,
            tones: None,
        };
        let s = score(&valid, &decode_all(&valid, &lp, &decode, choice));
        line(&format!("weight {weight}"), &s);
        if best.as_ref().is_none_or(|(_, b)| key(&s) > key(b)) {
            best = Some((decode, s.clone()));
        }
        tried.push(serde_json::json!({"weight": weight, "scores": s}));
    }
    let (mut decode, mut chosen) = best.expect("weights were tried");
    eprintln!("chosen: weight {}", decode.weight);
    // Then the best progression by its chords' expected tones (draws keep the weight above),
    // judged by the same key: kept only where its root + family beats the likeliest's.
    let mut tried_tones = Vec::new();
    for w in TONE_WEIGHTS {
        let candidate = HarmonyDecode {
            tones: Some(w),
            ..decode
        };
        let s = score(&valid, &decode_all(&valid, &lp, &candidate, choice));
        line(&format!("tones, weight {w}"), &s);
        if key(&s) > key(&chosen) {
            decode.tones = Some(w);
            chosen = s.clone();
        }
        tried_tones.push(serde_json::json!({"tones": w, "scores": s}));
    }
    match decode.tones {
        Some(w) => eprintln!("chosen: the best progression by expected tones, weight {w}"),
        None => eprintln!("chosen: the likeliest progression (by tones: no better root + family)"),
    }
    let (test_pieces, test) = songs(&data.test);
    if test.is_empty() {
        return Err("no test song with annotated chords".into());
    }
    let lp = all_log_probs(model, &test, false, seed)?;
    let harmonizer = decode_all(&test, &lp, &decode, choice);
    let lp_annotated = all_log_probs(model, &test, true, seed)?;
    let with_phrases = decode_all(&test, &lp_annotated, &decode, choice);
    let detector: Vec<_> = test.iter().map(|s| s.detector.clone()).collect();
    let full_mix: Vec<_> = test.iter().map(|s| s.full_mix.clone()).collect();
    let annotations: Vec<_> = test.iter().map(|s| s.reference.clone()).collect();
    let rows = [
        ("harmonizer", &harmonizer),
        ("harmonizer, annotated phrases", &with_phrases),
        ("detector, melody and bridge", &detector),
        ("detector, full arrangement", &full_mix),
        ("annotations", &annotations),
    ];
    eprintln!("test ({} songs):", test.len());
    let mut out = serde_json::Map::new();
    for (name, chords) in rows {
        let s = score(&test, chords);
        line(name, &s);
        let f1 = phrase_f1(&test, chords);
        eprintln!(
            "  {:<34} phrase boundaries from the melody reading these chords: F1 {f1:.3}",
            ""
        );
        out.insert(
            name.replace([',', ' '], "_").replace("__", "_"),
            serde_json::json!({"scores": s, "sus_share": sus_share(chords), "phrase_f1": f1}),
        );
    }
    let accompaniment = match args.accompaniment.as_str() {
        "none" => serde_json::Value::Null,
        spec => {
            let loaded = crate::models::load(spec, Task::Accompaniment, None, device)?;
            accompaniment_check(
                &loaded,
                &test_pieces,
                &test,
                &[
                    ("annotations", &annotations),
                    ("harmonizer", &harmonizer),
                    ("detector, melody and bridge", &detector),
                ],
                seed,
                device,
            )?
        }
    };
    Ok(serde_json::json!({
        "task": "harmonization",
        "accompaniment_chord_tones": accompaniment,
        "direction": if model.config.is_causal() { "causal" } else { "bidirectional" },
        "pe": model.config.pe.kind.name(),
        "levels": model.config.pe.structure_levels(),
        "decode": decode,
        "valid": tried,
        "valid_tones": tried_tones,
        "test": out,
    }))
}
