//! The step-by-step accompaniment's evaluation: its temperatures chosen on validation
//! excerpts (of the settings that strike and hold as many notes as the pianist there, the best
//! chroma similarity), then the panel of [`super::panel`] on whole test songs and F-StrIPE's
//! scores on test excerpts, every accompaniment sampled as the page samples it. Songs are
//! sampled side by side on threads ([`par_map`]).

use burn::tensor::Device;

use super::panel::{Panel, SongResult, song_result};
use super::{excerpts, onset_f1, target_roll};
use crate::data::Example;
use crate::data::corpus::{Corpus, WindowSpec};
use crate::generate::PianoSampling;
use crate::model::performer::Performer;
use crate::music::metrics::{AccompanimentScores, accompaniment_scores, mean_std};
use crate::music::playing::{onsets_per_beat, sounding_per_step};
use crate::music::tokens::STEPS_PER_BEAT;

/// `f` over `items` on `threads` threads, each with its own copy of the model; results in the
/// items' order.
pub fn par_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    model: &Performer,
    f: impl Fn(&Performer, &T) -> Result<R, String> + Sync,
) -> Result<Vec<R>, String> {
    let threads = threads.clamp(1, items.len().max(1));
    let chunks: Vec<Vec<(usize, &T)>> = (0..threads)
        .map(|k| items.iter().enumerate().skip(k).step_by(threads).collect())
        .collect();
    let mut out: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .iter()
            .map(|chunk| {
                let model = model.clone();
                let f = &f;
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|(i, item)| f(&model, item).map(|r| (*i, r)))
                        .collect::<Result<Vec<_>, String>>()
                })
            })
            .collect();
        for h in handles {
            for (i, r) in h
                .join()
                .map_err(|_| "a sampling thread panicked".to_string())??
            {
                out[i] = Some(r);
            }
        }
        Ok::<(), String>(())
    })?;
    Ok(out
        .into_iter()
        .map(|r| r.expect("every item done"))
        .collect())
}

/// One sampled excerpt's scores against the real piano part.
pub struct Scored {
    scores: AccompanimentScores,
    onset_f1: f64,
    /// Generated onsets over the pianist's (`None` where the pianist is silent).
    density: Option<f64>,
    /// Generated sounding pitches per step over the pianist's.
    sounding: Option<f64>,
}

pub fn sample_excerpt(
    model: &Performer,
    e: &Example,
    sampling: PianoSampling,
    device: &Device,
) -> Result<Scored, String> {
    // An excerpt's lanes are not at hand here: a reference lane stays silent.
    let roll = pollster::block_on(crate::generate::piano::sample_whole(
        model, e, None, sampling, device,
    ))
    .map_err(|e| e.to_string())?;
    let target = target_roll(e);
    let real = onsets_per_beat(&target, 0..e.len, STEPS_PER_BEAT);
    let real_sounding = sounding_per_step(&target, 0..e.len);
    Ok(Scored {
        scores: accompaniment_scores(&roll, &target, STEPS_PER_BEAT),
        onset_f1: onset_f1(&roll, &target),
        density: (real > 0.0).then(|| onsets_per_beat(&roll, 0..e.len, STEPS_PER_BEAT) / real),
        sounding: (real_sounding > 0.0).then(|| sounding_per_step(&roll, 0..e.len) / real_sounding),
    })
}

pub fn summary(scored: &[Scored]) -> serde_json::Value {
    let stat = |f: &dyn Fn(&Scored) -> f64| {
        let v: Vec<f64> = scored.iter().map(f).collect();
        let (m, s) = mean_std(&v);
        serde_json::json!({"mean": m, "std": s})
    };
    let densities: Vec<f64> = scored.iter().filter_map(|s| s.density).collect();
    let sounding: Vec<f64> = scored.iter().filter_map(|s| s.sounding).collect();
    serde_json::json!({
        "excerpts": scored.len(),
        "cs": stat(&|s| s.scores.cs),
        "ssmd": stat(&|s| s.scores.ssmd),
        "gs": stat(&|s| s.scores.gs),
        "ndd": stat(&|s| s.scores.ndd),
        "onset_f1": stat(&|s| s.onset_f1)["mean"],
        "density_ratio": mean_std(&densities).0,
        "sounding_ratio": mean_std(&sounding).0,
    })
}

/// Validation onset density and sounding pitches per step, as multiples of the pianist's, that
/// a setting must keep to be chosen: CS rises as the piano plays more notes, and NDD as it
/// holds them longer, so CS alone would choose the hottest temperature tried even where it
/// plays three times as many notes as a pianist.
pub const DENSITY_RANGE: std::ops::RangeInclusive<f64> = 0.8..=1.25;

/// One setting tried on validation: its summary, and how it ranks ((both densities within
/// [`DENSITY_RANGE`], −(|ln onsets| + |ln sounding|) outside it, CS): the largest is best).
pub struct Tried {
    pub sampling: PianoSampling,
    pub valid: serde_json::Value,
    key: (bool, f64, f64),
}

impl Tried {
    /// Whether its onsets and sounding notes are within [`DENSITY_RANGE`] of the pianist's.
    pub fn inside(&self) -> bool {
        self.key.0
    }
}

/// `sampling` scored on the validation excerpts `valid`.
pub fn try_sampling(
    model: &Performer,
    valid: &[(String, Example)],
    sampling: PianoSampling,
    threads: usize,
    device: &Device,
) -> Result<Tried, String> {
    let scored = par_map(valid, threads, model, |m, (_, e)| {
        sample_excerpt(m, e, sampling, device)
    })?;
    let s = summary(&scored);
    let cs = s["cs"]["mean"].as_f64().unwrap_or(0.0);
    let density = s["density_ratio"].as_f64().unwrap_or(f64::NAN);
    let sounding = s["sounding_ratio"].as_f64().unwrap_or(f64::NAN);
    // In the range, the best CS; failing that, the densities nearest the pianist's.
    let inside = DENSITY_RANGE.contains(&density) && DENSITY_RANGE.contains(&sounding);
    let off = |r: f64| if r > 0.0 { r.ln().abs() } else { f64::INFINITY };
    let near = -(off(density) + off(sounding));
    Ok(Tried {
        sampling,
        valid: s,
        key: (inside, if inside { 0.0 } else { near }, cs),
    })
}

/// The best of `tried` (the first of equals), if any.
pub fn best(tried: &[Tried]) -> Option<&Tried> {
    tried
        .iter()
        .fold(None, |best: Option<&Tried>, t| match best {
            Some(b) if t.key > b.key => Some(t),
            Some(b) => Some(b),
            None => Some(t),
        })
}

/// The panel on the whole test songs that have an accompaniment, sampled with `sampling`.
pub fn test_songs(
    model: &Performer,
    test: &Corpus,
    sampling: PianoSampling,
    threads: usize,
    device: &Device,
) -> Result<(Panel, Vec<SongResult>), String> {
    let songs: Vec<_> = test
        .pieces
        .iter()
        .filter(|p| p.has_accompaniment() && p.range.len() >= 16)
        .collect();
    let results: Vec<SongResult> = par_map(&songs, threads, model, |m, p| {
        pollster::block_on(song_result(m, p, sampling, device)).map_err(|e| e.to_string())
    })?;
    Ok((Panel::of(&results), results))
}

/// F-StrIPE's scores on `per_song` test excerpts of `bars` bars a song, sampled with
/// `sampling`; `None` when no test song is that long.
pub fn test_excerpts(
    model: &Performer,
    test: &Corpus,
    bars: usize,
    per_song: usize,
    sampling: PianoSampling,
    threads: usize,
    device: &Device,
) -> Result<Option<serde_json::Value>, String> {
    let spec = WindowSpec::for_model(&model.config, bars * 4 * STEPS_PER_BEAT);
    let excerpts = excerpts(test, &spec, per_song);
    if excerpts.is_empty() {
        return Ok(None);
    }
    let scored = par_map(&excerpts, threads, model, |m, (_, e)| {
        sample_excerpt(m, e, sampling, device)
    })?;
    Ok(Some(summary(&scored)))
}
