//! `pianoformer eval --task melody`: a melody model judged by what it sings. For every song of
//! a split, the model writes the melody of its annotated span from the song's chord and phrase
//! lanes alone (the page's "new song from a plan": no accompaniment read, the page's range and
//! top-p), and the figures of `pianoformer::eval::melody` compare it with the song's own
//! melody. The temperature is chosen on the validation songs (the written melodies' figures
//! nearest the real ones'), then the test songs are written with it, under their own
//! progressions and under another song's (does the melody follow the chords it is given?).
//! Also the cross-entropy per sixteenth on both splits' windows.

use burn::tensor::Device;
use pianoformer::data::corpus::{Corpus, Piece, WindowSpec};
use pianoformer::data::melody::{MelodyStep, melody_steps};
use pianoformer::data::sources;
use pianoformer::eval::melody::{EchoProfile, MelodyCounts, MelodyFigures, count_melody, quantile};
use pianoformer::eval::position_losses;
use pianoformer::generate::melody::{
    ECHO_LESS_AT_A_CADENCE, ECHO_LESS_UNDER_ANOTHER_CHORD, MelodySampling, write_melody,
};
use pianoformer::model::config::Task;
use pianoformer::model::performer::Performer;
use serde::Serialize;

use super::Args;

/// The written melodies of a split at one temperature against the songs' own.
#[derive(Clone, Debug, Serialize)]
pub struct SplitFigures {
    pub temperature: f32,
    pub pitch_temperature: Option<f32>,
    pub echo: f32,
    pub real: MelodyFigures,
    pub written: MelodyFigures,
    /// Share of songs whose written melody's range lies within the real melodies' 10th–90th
    /// percentile.
    pub range_within: f64,
    /// How the repeated bars keep their first occurrence, the real melodies' and the written.
    pub real_echo: EchoProfile,
    pub written_echo: EchoProfile,
    /// How far the written figures are from the real ones (what the temperature and the echo
    /// are chosen by): |log of the onsets' ratio| plus the absolute differences of the
    /// chord-tone, step, leap and breathing shares, plus how far repeated phrases fall short
    /// of the real ones' F1 and different ones exceed theirs.
    pub distance: f64,
}

/// A split's melodies counted: the real ones' and the written ones' (all samples together).
#[derive(Default)]
struct Counted {
    real: MelodyCounts,
    written: MelodyCounts,
    /// Each written melody's range.
    ranges: Vec<f64>,
    real_echo: EchoProfile,
    written_echo: EchoProfile,
}

/// The melody of every song of `corpus` over its annotated span, written `samples` times with
/// `sampling` (seed `seed + song + 10 000·k`) from the lanes — under the song's own chords, or,
/// with `substitute`, under the next song's progression laid over its span — counted beside
/// the song's own melody.
fn write_split(
    model: &Performer,
    corpus: &Corpus,
    sampling: &MelodySampling,
    (substitute, samples): (bool, usize),
    device: &Device,
) -> Result<Counted, String> {
    let pieces: Vec<&Piece> = corpus
        .pieces
        .iter()
        .filter(|p| p.range.len() >= 16)
        .collect();
    let mut c = Counted::default();
    for (i, piece) in pieces.iter().enumerate() {
        let mut sheet = piece.sheet.clone();
        if substitute {
            let other = &pieces[(i + 1) % pieces.len()].sheet.labels.chord;
            let span = pieces[(i + 1) % pieces.len()].range.clone();
            let source: Vec<_> =
                other[span.start.min(other.len())..span.end.min(other.len())].to_vec();
            if !source.is_empty() {
                for (k, s) in piece.range.clone().enumerate() {
                    sheet.labels.chord[s] = source[k % source.len()];
                }
            }
        }
        let own = melody_steps(&sheet.rolls.melody, &sheet.labels.melody, 0);
        let region = piece.range.start..piece.range.end.min(own.len());
        c.real.add(&count_melody(
            &own,
            &piece.sheet.labels,
            &sheet.grid,
            region.clone(),
        ));
        c.real_echo
            .add(&own, &piece.sheet.labels, &sheet.grid, region.clone());
        for k in 0..samples.max(1) {
            let s = MelodySampling {
                seed: sampling
                    .seed
                    .wrapping_add(i as u64)
                    .wrapping_add(10_000 * k as u64),
                ..*sampling
            };
            let steps = pollster::block_on(write_melody(
                model,
                &sheet,
                region.clone(),
                &s,
                usize::MAX,
                device,
                |_| async { true },
            ))
            .map_err(|e| format!("{}: {e}", piece.name))?;
            let mut all: Vec<MelodyStep> = own[..region.start].to_vec();
            all.extend(steps);
            let counts = count_melody(&all, &sheet.labels, &sheet.grid, region.clone());
            c.ranges.extend(counts.ranges.iter().copied());
            c.written.add(&counts);
            c.written_echo
                .add(&all, &sheet.labels, &sheet.grid, region.clone());
        }
    }
    Ok(c)
}

fn figures_of(sampling: &MelodySampling, c: &Counted) -> SplitFigures {
    let (r, w) = (c.real.figures(), c.written.figures());
    let ranges = &c.ranges;
    let within = ranges
        .iter()
        .filter(|&&x| (r.range_p10..=r.range_p90).contains(&x))
        .count() as f64
        / ranges.len().max(1) as f64;
    let onsets = (w.onsets_per_bar.max(1e-6) / r.onsets_per_bar.max(1e-6))
        .ln()
        .abs();
    let distance = onsets
        + (w.chord_tones - r.chord_tones).abs()
        + (w.steps - r.steps).abs()
        + (w.leaps - r.leaps).abs()
        + (w.breathing - r.breathing).abs()
        + (r.repeat_f1 - w.repeat_f1).max(0.0)
        + (w.contrast_f1 - r.contrast_f1).max(0.0);
    SplitFigures {
        temperature: sampling.temperature,
        pitch_temperature: sampling.pitch_temperature,
        echo: sampling.echo,
        real: r,
        written: w,
        range_within: within,
        real_echo: c.real_echo,
        written_echo: c.written_echo,
        distance,
    }
}

fn print(label: &str, f: &SplitFigures) {
    let (r, w) = (&f.real, &f.written);
    eprintln!(
        "{label} (temperature {}, pitch temperature {}, echo {}): onsets a bar {:.2} vs real {:.2} ({:.2}x); chord tones at \
         changes and strong beats {:.3} vs {:.3}; steps {:.3} vs {:.3}, leaps {:.3} vs {:.3}; \
         range median {:.0} (real p10–p90 {:.0}–{:.0}, {:.0}% of songs within); repeated \
         phrases' F1 {:.3} vs {:.3}, different phrases' {:.3} vs {:.3}; phrase ends breathing \
         {:.3} vs {:.3}; mean pitch {:.1} vs {:.1}",
        f.temperature,
        f.pitch_temperature.unwrap_or(f.temperature),
        f.echo,
        w.onsets_per_bar,
        r.onsets_per_bar,
        w.onsets_per_bar / r.onsets_per_bar.max(1e-9),
        w.chord_tones,
        r.chord_tones,
        w.steps,
        r.steps,
        w.leaps,
        r.leaps,
        w.range_median,
        r.range_p10,
        r.range_p90,
        100.0 * f.range_within,
        w.repeat_f1,
        r.repeat_f1,
        w.contrast_f1,
        r.contrast_f1,
        w.breathing,
        r.breathing,
        w.mean_pitch,
        r.mean_pitch,
    );
    let kept = |e: &EchoProfile| {
        [(false, false), (true, false), (false, true), (true, true)]
            .map(|(other, cadence)| format!("{:.2}", e.matched(other, cadence)))
            .join(" / ")
    };
    eprintln!(
        "    repeated onsets kept from the first time (same chord / another chord / cadence, \
         same chord / cadence, another chord): {} vs real {}",
        kept(&f.written_echo),
        kept(&f.real_echo)
    );
}

/// The training songs' own melodies (of at least 16 steps): their figures, how their repeats
/// keep the first time ([`EchoProfile`]) and, as the yardstick of a split's repeats, the
/// 2.5th–97.5th percentile of their repeated phrases' F1 over 2 000 draws of `songs` of them
/// (with replacement).
fn training_songs(corpus: &Corpus, songs: usize) -> serde_json::Value {
    let mut counts = MelodyCounts::default();
    let mut profile = EchoProfile::default();
    let mut per_song = Vec::new();
    for piece in corpus.pieces.iter().filter(|p| p.range.len() >= 16) {
        let own = melody_steps(&piece.sheet.rolls.melody, &piece.sheet.labels.melody, 0);
        let region = piece.range.start..piece.range.end.min(own.len());
        let c = count_melody(&own, &piece.sheet.labels, &piece.sheet.grid, region.clone());
        profile.add(&own, &piece.sheet.labels, &piece.sheet.grid, region);
        per_song.push((c.repeat_shared, c.repeat_total));
        counts.add(&c);
    }
    if per_song.is_empty() {
        return serde_json::Value::Null;
    }
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let draws: Vec<f64> = (0..2000)
        .map(|_| {
            let (mut shared, mut total) = (0, 0);
            for _ in 0..songs.max(1) {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let (s, t) = per_song[(state >> 33) as usize % per_song.len()];
                shared += s;
                total += t;
            }
            2.0 * shared as f64 / total.max(1) as f64
        })
        .collect();
    let interval = [quantile(&draws, 0.025), quantile(&draws, 0.975)];
    let figures = counts.figures();
    let (chord, cadence) = (
        profile.less_under_another_chord(),
        profile.less_at_a_cadence(),
    );
    eprintln!(
        "training songs ({}): repeated phrases' F1 {:.3} ({:.3}–{:.3} in 95% of draws of {songs} \
         of them); their repeats keep an onset at log-odds {chord:.2} lower under another chord \
         than the first time's (the writer's echo leans {ECHO_LESS_UNDER_ANOTHER_CHORD} less) and \
         {cadence:.2} lower in a phrase's last bar ({ECHO_LESS_AT_A_CADENCE})",
        per_song.len(),
        figures.repeat_f1,
        interval[0],
        interval[1],
    );
    serde_json::json!({
        "songs": per_song.len(),
        "figures": figures,
        "repeat_f1_interval": interval,
        "interval_songs": songs,
        "echo_profile": profile,
        "less_under_another_chord": chord,
        "less_at_a_cadence": cadence,
    })
}

/// Cross-entropy per sixteenth on `corpus`'s 16-bar windows (every 4th bar line, 256 at most).
fn loss(model: &Performer, corpus: &Corpus, seed: u64) -> Result<f64, String> {
    let spec = WindowSpec::for_model(&model.config, 256);
    let batches = corpus.fixed_windows(Task::Melody, &spec, 4, 256, 8);
    if batches.is_empty() {
        return Err("no song has a melody and chords to score the model on".into());
    }
    let curve =
        pollster::block_on(position_losses(model, &batches, seed)).map_err(|e| e.to_string())?;
    Ok(curve.iter().sum::<f64>() / curve.len().max(1) as f64)
}

/// The sampling chosen on the validation songs from `base`: the rhythm's temperature (the
/// pitch's the same), then the pitch's, then the echo, each the one whose written melodies'
/// figures come nearest the real ones' ([`SplitFigures::distance`]); with every try's figures.
fn choose(
    model: &Performer,
    valid: &Corpus,
    args: &Args,
    base: MelodySampling,
    device: &Device,
) -> Result<(MelodySampling, Vec<SplitFigures>), String> {
    let temperatures: Vec<f32> = match args.temperature {
        Some(t) => vec![t],
        None => args.temperatures.clone(),
    };
    let mut sweep = Vec::new();
    let best = |sweep: &mut Vec<SplitFigures>, tries: Vec<MelodySampling>| {
        for s in tries {
            let counted = write_split(model, valid, &s, (false, args.samples), device)?;
            let f = figures_of(&s, &counted);
            print("validation", &f);
            sweep.push(f);
        }
        sweep
            .iter()
            .min_by(|a, b| a.distance.total_cmp(&b.distance))
            .map(|f| MelodySampling {
                temperature: f.temperature,
                pitch_temperature: f.pitch_temperature,
                echo: f.echo,
                ..base
            })
            .ok_or_else(|| "nothing to try: give --temperatures and --echoes".to_string())
    };
    let tries = temperatures.iter().map(|&t| MelodySampling {
        temperature: t,
        ..base
    });
    let chosen = best(&mut sweep, tries.collect())?;
    let tries = args
        .pitch_temperatures
        .iter()
        .filter(|&&t| t != chosen.temperature)
        .map(|&t| MelodySampling {
            pitch_temperature: Some(t),
            ..chosen
        });
    let chosen = best(&mut sweep, tries.collect())?;
    let echoes: Vec<f32> = match args.echo {
        Some(e) => vec![e],
        None => args.echoes.clone(),
    };
    let tries = echoes
        .iter()
        .filter(|&&e| e != base.echo)
        .map(|&echo| MelodySampling { echo, ..chosen });
    let s = best(&mut sweep, tries.collect())?;
    eprintln!(
        "chosen on validation: temperature {}, pitch temperature {}, echo {}",
        s.temperature,
        s.pitch_temperature.unwrap_or(s.temperature),
        s.echo
    );
    Ok((s, sweep))
}

pub fn run(
    model: &Performer,
    data: &sources::Loaded,
    args: &Args,
    device: &Device,
) -> Result<serde_json::Value, String> {
    let base = MelodySampling {
        seed: args.seed,
        top_p: args.top_p,
        ..MelodySampling::default()
    };
    let test_songs = data
        .test
        .pieces
        .iter()
        .filter(|p| p.range.len() >= 16)
        .count();
    let training = training_songs(&data.train, test_songs);
    let valid_loss = loss(model, &data.valid, args.seed)?;
    let test_loss = loss(model, &data.test, args.seed)?;
    eprintln!("cross-entropy per sixteenth: validation {valid_loss:.4}, test {test_loss:.4}");
    let (s, sweep) = choose(model, &data.valid, args, base, device)?;
    let counted = write_split(model, &data.test, &s, (false, args.samples), device)?;
    let test = figures_of(&s, &counted);
    print("test", &test);
    let counted = write_split(model, &data.test, &s, (true, args.samples), device)?;
    let substituted = figures_of(&s, &counted);
    eprintln!(
        "test under another song's progression: chord tones {:.3} of the substituted chords \
         (under their own {:.3}; the real melodies against their own chords {:.3})",
        substituted.written.chord_tones, test.written.chord_tones, test.real.chord_tones
    );
    Ok(serde_json::json!({
        "task": "melody",
        "temperature": s.temperature,
        "pitch_temperature": s.pitch_temperature,
        "echo": s.echo,
        "top_p": base.top_p,
        "range": [base.low, base.high],
        "valid_loss": valid_loss,
        "test_loss": test_loss,
        "sweep": sweep,
        "test": test,
        "substituted": {
            "chord_tones": substituted.written.chord_tones,
            "onsets_per_bar": substituted.written.onsets_per_bar,
        },
        "seed": args.seed,
        "samples": args.samples.max(1),
        "training_songs": training,
    }))
}
