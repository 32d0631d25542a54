//! `pianoformer eval --task harmonization`: the harmonic rhythm counted in the training songs'
//! annotations, the emission weight chosen on validation songs (melody and bridge only,
//! phrases detected from them) by root + family accuracy, then the test songs scored against
//! the rule-based detector (from the melody alone and from the full arrangement) and the
//! annotations themselves. Writes `eval.json` into the run folder.

use burn::tensor::Device;
use pianoformer::data::corpus::{Corpus, Piece};
use pianoformer::data::pop909_cl;
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
use pianoformer::music::harmony::measures::Accuracy;

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
    let mut sampling = accompaniment.defaults.piano_sampling();
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
    let phrased_lp = all_log_probs(model, &test, true, seed)?;
    let with_phrases = decode_all(&test, &phrased_lp, &decode, choice);
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
    let tested = Tested {
        pieces: &test_pieces,
        songs: &test,
        lp: &test_lp,
        lane: &harmonizer,
    };
    let alternatives = match choice {
        Choice::Best => alternatives_curve(model, data, args, &tested, &decode)?,
        _ => serde_json::Value::Null,
    };
    let decode = with_temperatures(decode, &alternatives);
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

/// `decode` with the temperatures [`alternatives_curve`] chose on validation (the alternatives'
/// draws, the colourful end): they go with it into the manifest (`ship`).
fn with_temperatures(mut decode: HarmonyDecode, alternatives: &serde_json::Value) -> HarmonyDecode {
    let chosen = |v: &serde_json::Value| v.as_f64().map(|t| t as f32);
    decode.alternatives = chosen(&alternatives["temperature"]);
    decode.colourful = chosen(&alternatives["colourful"]["temperature"]);
    decode
}

/// The test songs as the harmonizer met them: the pieces, the songs, the model's
/// log-probabilities and the one-guess lane.
struct Tested<'a> {
    pieces: &'a [&'a Piece],
    songs: &'a [HarmonySong],
    lp: &'a [Vec<f32>],
    lane: &'a [Vec<Option<Chord>>],
}

/// Chord alternatives per 8-bar section (issue 55): the draws' temperature chosen on
/// validation, then the best-of-K curve on the test songs against POP909's labels and, where
/// it is beside them, POP909-CL's; and the colourful end of chord choice.
fn alternatives_curve(
    model: &Performer,
    data: &Loaded,
    args: &super::Args,
    t: &Tested,
    decode: &HarmonyDecode,
) -> Result<serde_json::Value, String> {
    let corrected = corrected_labels(&args.data, t.pieces, t.songs, t.lane, "test")?;
    // The validation songs' probabilities, read once for both choices below.
    let (valid_pieces, valid) = songs(&data.valid);
    let valid_lp = all_log_probs(model, &valid, false, args.seed)?;
    // One guess on the validation songs against both label sets: which labels to train on
    // (issue 55) is decided there.
    let valid_lane = decode_all(&valid, &valid_lp, decode, Choice::Best.for_model(model));
    let valid_refs: Vec<Vec<Option<Chord>>> = valid.iter().map(|s| s.reference.clone()).collect();
    let mut a = Accuracy::default();
    for ((song, lane), r) in valid.iter().zip(&valid_lane).zip(&valid_refs) {
        a.add(Accuracy::of(lane, r, song.beats.clone()));
    }
    let valid_pop909 = a.rates();
    eprintln!(
        "validation, one guess against POP909's labels: root {:.3} family {:.3}",
        valid_pop909[0], valid_pop909[1]
    );
    let valid_cl = corrected_labels(&args.data, &valid_pieces, &valid, &valid_lane, "validation")?
        .map(|c| c.harmonizer);
    let (chosen, tried) = choose_draws(&valid, &valid_lp, decode, args.seed)?;
    let refs: Vec<Vec<Option<Chord>>> = t.songs.iter().map(|s| s.reference.clone()).collect();
    let b = best_of(t.songs, t.lp, t.lane, &refs, decode, chosen, SECTION_BARS);
    eprintln!(
        "test, chord alternatives per {SECTION_BARS}-bar section ({} sections, {:.1} distinct found of {ALTERNATIVES}; temperature {}, chosen on validation):",
        b.sections, b.found, chosen.temperature
    );
    let row = |xs: &[f64]| xs.iter().map(|x| format!("{x:>6.3}")).collect::<String>();
    let ks: String = (1..=ALTERNATIVES).map(|k| format!("{k:>6}")).collect();
    eprintln!("  K                  {ks}");
    eprintln!("  root (POP909)      {}", row(&b.root));
    eprintln!("  family (POP909)    {}", row(&b.family));
    let against_cl = corrected.map(|c| {
        let pick = |i: &usize| (t.songs[*i].clone(), t.lp[*i].clone(), t.lane[*i].clone());
        let (songs, (lp, lanes)): (Vec<_>, (Vec<_>, Vec<_>)) = c
            .songs
            .iter()
            .map(pick)
            .map(|(s, l, n)| (s, (l, n)))
            .unzip();
        let cl = best_of(&songs, &lp, &lanes, &c.chords, decode, chosen, SECTION_BARS);
        eprintln!(
            "  root (POP909-CL)   {}  ({} songs)",
            row(&cl.root),
            songs.len()
        );
        eprintln!("  family (POP909-CL) {}", row(&cl.family));
        cl
    });
    let colourful = colour_sweep(&valid, &valid_lp, t, decode, args.seed)?;
    Ok(serde_json::json!({
        "colourful": colourful,
        "section_bars": SECTION_BARS,
        "temperature": chosen.temperature,
        "valid": tried.iter().map(|(d, b)| serde_json::json!({"temperature": d.temperature, "best_of": b})).collect::<Vec<_>>(),
        "test": {"pop909": b, "pop909_cl": against_cl},
        "valid_one_guess": {"pop909": &valid_pop909[..2], "pop909_cl": valid_cl},
    }))
}

/// The alternatives' draws: of [`ALTERNATIVE_TEMPERATURES`], the one whose best of four per
/// section names the annotated root most often on the validation songs; and every one tried.
fn choose_draws(
    valid: &[HarmonySong],
    lp: &[Vec<f32>],
    decode: &HarmonyDecode,
    seed: u64,
) -> Result<(Draws, Vec<(Draws, BestOf)>), String> {
    let lane = decode_all(valid, lp, decode, Choice::Best);
    let refs: Vec<Vec<Option<Chord>>> = valid.iter().map(|s| s.reference.clone()).collect();
    let tried: Vec<(Draws, BestOf)> = ALTERNATIVE_TEMPERATURES
        .iter()
        .map(|&temperature| {
            let d = Draws {
                count: ALTERNATIVES,
                temperature,
                seed,
            };
            let b = best_of(valid, lp, &lane, &refs, decode, d, SECTION_BARS);
            eprintln!(
                "validation, alternatives drawn at temperature {temperature}: best of 4 per {SECTION_BARS}-bar section, root {:.3} (one guess {:.3}); {:.1} found of {ALTERNATIVES}",
                b.root[3], b.root[0], b.found
            );
            (d, b)
        })
        .collect();
    let chosen = tried
        .iter()
        .max_by(|a, b| a.1.root[3].total_cmp(&b.1.root[3]))
        .map(|(d, _)| *d)
        .ok_or("no setting tried")?;
    Ok((chosen, tried))
}

/// The colourful end of chord choice (issue 55): the one guess's progression with each
/// stretch's chord drawn again at a temperature ([`recolour`]), the one of
/// [`COLOUR_TEMPERATURES`] whose chord-histogram entropy and coverage come closest to the
/// annotations' on the validation songs (the larger of the two relative gaps), then scored on
/// the test songs beside the annotations. Every figure is the mean over [`COLOUR_DRAWS`]
/// draws a song (one draw moves the coverage by about a chord).
///
/// [`recolour`]: pianoformer::music::harmony::decode::recolour
fn colour_sweep(
    valid: &[HarmonySong],
    lp: &[Vec<f32>],
    t: &Tested,
    decode: &HarmonyDecode,
    seed: u64,
) -> Result<serde_json::Value, String> {
    // Each song COLOUR_DRAWS times, each time drawn with another seed, scored together.
    let drawn = |songs: &[HarmonySong], lp: &[Vec<f32>], temperature| {
        let mut all_songs = Vec::new();
        let mut chords = Vec::new();
        for k in 0..COLOUR_DRAWS {
            let choice = Choice::Drawn {
                seed: seed.wrapping_add(k),
                temperature,
            };
            all_songs.extend_from_slice(songs);
            chords.extend(decode_all(songs, lp, decode, choice));
        }
        score(&all_songs, &chords)
    };
    let annotated: Vec<_> = valid.iter().map(|s| s.reference.clone()).collect();
    let target = score(valid, &annotated).measures;
    eprintln!(
        "validation, the colourful end (the one guess's chords drawn again at a temperature; \
         means of {COLOUR_DRAWS} draws a song):"
    );
    let mut tried = Vec::new();
    for temperature in COLOUR_TEMPERATURES {
        let s = drawn(valid, lp, temperature);
        line(&format!("drawn at {temperature}"), &s);
        tried.push((temperature, s));
    }
    // How far a progression's entropy and coverage are from the annotations', the worse of two.
    let off = |m: &pianoformer::music::harmony::measures::Measures| {
        ((m.che / target.che - 1.0).abs()).max((m.cc / target.cc - 1.0).abs())
    };
    let chosen = tried
        .iter()
        .min_by(|a, b| off(&a.1.measures).total_cmp(&off(&b.1.measures)))
        .map(|(t, _)| *t)
        .ok_or("no temperature tried")?;
    let test = drawn(t.songs, t.lp, chosen);
    eprintln!(
        "test, the colourful end (drawn at {chosen}, chosen on validation; the annotations' row \
         above):"
    );
    line("colourful", &test);
    let m = &test.measures;
    let references: Vec<_> = t.songs.iter().map(|s| s.reference.clone()).collect();
    let theirs = score(t.songs, &references).measures;
    let gap = |a: f64, b: f64| format!("{:+.1} %", 100.0 * (a / b - 1.0));
    eprintln!(
        "  against the annotations: CHE {}, CC {}, CTnCTR {}, MCTD {}",
        gap(m.che, theirs.che),
        gap(m.cc, theirs.cc),
        gap(m.ctnctr, theirs.ctnctr),
        gap(m.mctd, theirs.mctd)
    );
    Ok(serde_json::json!({
        "temperature": chosen,
        "draws": COLOUR_DRAWS,
        "valid": tried.iter().map(|(t, s)| serde_json::json!({"temperature": t, "scores": s})).collect::<Vec<_>>(),
        "test": test,
    }))
}

/// The temperatures the colourful end is chosen from, and the draws a song each is judged on.
const COLOUR_TEMPERATURES: [f32; 7] = [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0];
const COLOUR_DRAWS: u64 = 3;

/// Alternatives scored per section, the most asked, and the draws' temperatures tried.
const SECTION_BARS: usize = 8;
const ALTERNATIVES: usize = 8;
const ALTERNATIVE_TEMPERATURES: [f32; 4] = [0.5, 0.6, 0.75, 1.0];

/// POP909-CL's corrected chords for the test songs that have them, aligned to their beats.
struct Corrected {
    /// Indices into the test songs, and each one's corrected chords per beat.
    songs: Vec<usize>,
    chords: Vec<Vec<Option<Chord>>>,
    /// The one-guess harmonizer's root, family and exact rates against them.
    harmonizer: [f64; 3],
}

/// POP909-CL (`pop909-cl` beside the POP909 folder) for the test songs, and the one-guess
/// harmonizer and POP909's own labels scored against it; `None` (said) when it is not there.
/// Songs whose alignment matches under half the file's onsets are left out (said).
fn corrected_labels(
    data: &std::path::Path,
    pieces: &[&Piece],
    test: &[HarmonySong],
    harmonizer: &[Vec<Option<Chord>>],
    split: &str,
) -> Result<Option<Corrected>, String> {
    let dir = data.parent().unwrap_or(data).join("pop909-cl");
    if !dir.join("POP909_processed").is_dir() {
        eprintln!(
            "POP909-CL not found at {} (the corrected chords): scored against POP909's labels only",
            dir.display()
        );
        return Ok(None);
    }
    let (mut songs, mut chords, mut loose, mut shifted) = (Vec::new(), Vec::new(), 0, 0);
    let mut found = Vec::new();
    for (i, piece) in pieces.iter().enumerate() {
        let Some(id) = pop909_cl::song_id(piece) else {
            continue;
        };
        let Some(c) = pop909_cl::corrected(&dir, id, piece)? else {
            continue;
        };
        if c.onsets_matched < pop909_cl::SURE {
            loose += 1;
            continue;
        }
        shifted += (c.shift != 0) as usize;
        found.push((c.shift, c.onsets_matched));
        songs.push(i);
        chords.push(c.chords);
    }
    let aligned: Vec<&HarmonySong> = songs.iter().map(|&i| &test[i]).collect();
    let against = |predicted: &dyn Fn(usize) -> Vec<Option<Chord>>| {
        let mut a = Accuracy::default();
        for ((song, &i), r) in aligned.iter().zip(&songs).zip(&chords) {
            a.add(Accuracy::of(&predicted(i), r, song.beats.clone()));
        }
        a.rates()
    };
    // The songs whose two label sets disagree most, with their alignment: where to look.
    let mut worst: Vec<(f64, &str, i64, f64)> = songs
        .iter()
        .zip(&chords)
        .zip(&found)
        .map(|((&i, r), &(shift, matched))| {
            let a = Accuracy::of(&test[i].reference, r, test[i].beats.clone());
            (a.rates()[0], test[i].name.as_str(), shift, matched)
        })
        .collect();
    worst.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (root, name, shift, matched) in worst.iter().take(5) {
        eprintln!(
            "  POP909 against POP909-CL, {name}: root {root:.3} (shift {shift} beats, {:.0} % of onsets matched)",
            100.0 * matched
        );
    }
    let h = against(&|i| harmonizer[i].clone());
    let a = against(&|i| test[i].reference.clone());
    eprintln!(
        "POP909-CL: {} {split} songs aligned ({shifted} shifted by whole beats, {loose} left out as unsure); against its chords the harmonizer's root {:.3} family {:.3}, POP909's own labels root {:.3} family {:.3}",
        songs.len(),
        h[0],
        h[1],
        a[0],
        a[1]
    );
    Ok(Some(Corrected {
        songs,
        chords,
        harmonizer: h,
    }))
}
