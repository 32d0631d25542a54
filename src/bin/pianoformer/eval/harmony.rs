//! `pianoformer eval --task harmonization`: the harmonic rhythm counted in the training songs'
//! annotations, the emission weight chosen on validation songs (melody and bridge only,
//! phrases detected from them) by root + family accuracy, then the test songs scored against
//! the rule-based detector (from the melody alone and from the full arrangement) and the
//! annotations themselves. Writes `eval.json` into the run folder.

use burn::tensor::Device;
use pianoformer::data::corpus::{Corpus, Piece};
use pianoformer::data::sources::Loaded;
use pianoformer::eval::harmony::with_chords;
use pianoformer::eval::harmony::{
    BestOf, HarmonyScores, HarmonySong, best_of, choose_decode, decode_all, each_beat_alone,
    phrase_f1, rhythm_of, score, sus_share,
};
use pianoformer::eval::panel::chord_tones_with_lanes;
use pianoformer::generate::harmonize::{Choice, chord_log_probs};
use pianoformer::model::config::Task;
use pianoformer::model::performer::Performer;
use pianoformer::music::chords::Chord;
use pianoformer::music::harmony::decode::{Draws, HarmonyDecode, Rhythm};

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

/// How often the training songs' annotations change chord on bar lines, half bars and other
/// beats, said.
fn training_rhythm(data: &Loaded) -> Result<Rhythm, String> {
    let (rhythm, counted) = rhythm_of(&data.train)
        .ok_or("no training song with chords to count the harmonic rhythm in")?;
    eprintln!(
        "harmonic rhythm of {counted} training songs: a change on {:.0} % of bar lines, {:.0} % \
         of half bars, {:.1} % of other beats",
        100.0 * rhythm.change[0],
        100.0 * rhythm.change[1],
        100.0 * rhythm.change[2]
    );
    Ok(rhythm)
}

/// The decoding (emission weight, tones) chosen on the validation songs, with every setting
/// tried and its scores.
fn choose_on_validation(
    model: &Performer,
    data: &Loaded,
    rhythm: Rhythm,
    choice: Choice,
    seed: u64,
) -> Result<
    (
        HarmonyDecode,
        Vec<serde_json::Value>,
        Vec<serde_json::Value>,
    ),
    String,
> {
    let (_, valid) = songs(&data.valid);
    if valid.is_empty() {
        return Err("no validation song with annotated chords".into());
    }
    let lp = all_log_probs(model, &valid, false, seed)?;
    eprintln!(
        "validation ({} songs, melody and bridge only, detected phrases):",
        valid.len()
    );
    line(
        "each beat on its own",
        &score(&valid, &each_beat_alone(&lp)),
    );
    let chosen = choose_decode(&valid, &lp, rhythm, choice);
    for (weight, s) in &chosen.weights {
        line(&format!("weight {weight}"), s);
    }
    for (w, s) in &chosen.tones {
        line(&format!("tones, weight {w}"), s);
    }
    let decode = chosen.decode;
    eprintln!("chosen: weight {}", decode.weight);
    match decode.tones {
        Some(w) => eprintln!("chosen: the best progression by expected tones, weight {w}"),
        None => eprintln!("chosen: the likeliest progression (by tones: no better root + family)"),
    }
    let tried: Vec<_> = chosen
        .weights
        .iter()
        .map(|(weight, s)| serde_json::json!({"weight": weight, "scores": s}))
        .collect();
    let tried_tones: Vec<_> = chosen
        .tones
        .iter()
        .map(|(w, s)| serde_json::json!({"tones": w, "scores": s}))
        .collect();
    Ok((decode, tried, tried_tones))
}

pub fn run(
    model: &Performer,
    data: &Loaded,
    args: &super::Args,
    device: &Device,
) -> Result<serde_json::Value, String> {
    let seed = args.seed;
    let rhythm = training_rhythm(data)?;
    let choice = Choice::Best.for_model(model);
    let (decode, tried, tried_tones) = choose_on_validation(model, data, rhythm, choice, seed)?;
    let (test_pieces, test) = songs(&data.test);
    if test.is_empty() {
        return Err("no test song with annotated chords".into());
    }
    let test_lp = all_log_probs(model, &test, false, seed)?;
    let harmonizer = decode_all(&test, &test_lp, &decode, choice);
    let with_phrases = decode_all(
        &test,
        &all_log_probs(model, &test, true, seed)?,
        &decode,
        choice,
    );
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
    let alternatives = if choice == Choice::Best {
        alternatives_curve(model, data, &test, &test_lp, &harmonizer, &decode, seed)?
    } else {
        serde_json::Value::Null
    };
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
        "alternatives": alternatives,
    }))
}

/// Chord alternatives per 8-bar section (issue 55): the draws' temperature chosen on
/// validation (the best of 4's root share), then the best-of-K curve on the test songs.
fn alternatives_curve(
    model: &Performer,
    data: &Loaded,
    test: &[HarmonySong],
    test_lp: &[Vec<f32>],
    lane: &[Vec<Option<Chord>>],
    decode: &HarmonyDecode,
    seed: u64,
) -> Result<serde_json::Value, String> {
    let (_, valid) = songs(&data.valid);
    let valid_lp = all_log_probs(model, &valid, false, seed)?;
    let valid_lane = decode_all(&valid, &valid_lp, decode, Choice::Best);
    let refs = |songs: &[HarmonySong]| -> Vec<Vec<Option<Chord>>> {
        songs.iter().map(|s| s.reference.clone()).collect()
    };
    let valid_refs = refs(&valid);
    let draws = |temperature| Draws {
        count: ALTERNATIVES,
        temperature,
        seed,
    };
    let mut tried: Vec<(Draws, BestOf)> = Vec::new();
    for t in ALTERNATIVE_TEMPERATURES {
        {
            let d = draws(t);
            let b = best_of(
                &valid,
                &valid_lp,
                &valid_lane,
                &valid_refs,
                decode,
                d,
                SECTION_BARS,
            );
            eprintln!(
                "validation, alternatives drawn at temperature {t}: best of 4 per {SECTION_BARS}-bar section, root {:.3} (one guess {:.3}); {:.1} found of {ALTERNATIVES}",
                b.root[3], b.root[0], b.found
            );
            tried.push((d, b));
        }
    }
    let (chosen, _) = tried
        .iter()
        .max_by(|a, b| a.1.root[3].total_cmp(&b.1.root[3]))
        .ok_or("no setting tried")?;
    let b = best_of(
        test,
        test_lp,
        lane,
        &refs(test),
        decode,
        *chosen,
        SECTION_BARS,
    );
    eprintln!(
        "test, chord alternatives per {SECTION_BARS}-bar section ({} sections, {:.1} distinct found of {ALTERNATIVES}; temperature {}, chosen on validation):",
        b.sections, b.found, chosen.temperature
    );
    eprintln!(
        "  K        {}",
        (1..=ALTERNATIVES)
            .map(|k| format!("{k:>6}"))
            .collect::<String>()
    );
    eprintln!(
        "  root     {}",
        b.root
            .iter()
            .map(|x| format!("{x:>6.3}"))
            .collect::<String>()
    );
    eprintln!(
        "  family   {}",
        b.family
            .iter()
            .map(|x| format!("{x:>6.3}"))
            .collect::<String>()
    );
    Ok(serde_json::json!({
        "section_bars": SECTION_BARS,
        "temperature": chosen.temperature,
        "valid": tried.iter().map(|(d, b)| serde_json::json!({"temperature": d.temperature, "best_of": b})).collect::<Vec<_>>(),
        "test": {"pop909": b},
    }))
}

/// Alternatives scored per section, the most asked, and the draws' temperatures tried.
const SECTION_BARS: usize = 8;
const ALTERNATIVES: usize = 8;
const ALTERNATIVE_TEMPERATURES: [f32; 4] = [0.5, 0.6, 0.75, 1.0];
