//! `pianoformer eval --task accompaniment --texture --donors`: the donor panel
//! (`pianoformer::eval::donor`). Every song of --split is accompanied as asked to play like
//! each texture of the gallery (settings/textures.json) at each of --strengths, over its
//! annotated chords and over a substituted progression; printed beside the pianists' own
//! same-letter similarity and melody figures. Into donors.json.

use std::time::Instant;

use pianoformer::data::sources::{self, Parts};
use pianoformer::eval::donor::{DonorRow, DonorSong, Followed, donor_song};
use pianoformer::eval::texture::training_counts;
use pianoformer::music::texture::donor::gallery;

use super::Args;

pub fn run(args: Args) -> Result<(), String> {
    let test = args.test_split()?;
    let out = args.scores_path("donors.json")?;
    let spec = args.model.display().to_string();
    let device = args.pop909_device("the donor panel accompanies its annotated songs")?;
    let task = args.task.parse()?;
    let loaded = crate::models::load(&spec, task, None, &device)?;
    if !loaded.model.config.is_autoregressive() {
        return Err(format!(
            "{spec} writes the whole accompaniment at once; only a step-by-step model follows a texture"
        ));
    }
    let started = Instant::now();
    let parts = Parts {
        train: true,
        valid: !test,
        test,
    };
    let data = sources::load(&args.data, parts, args.limit)?;
    eprintln!("data: {}", data.description);
    // The lean a donor is followed with: the model's, else the training songs' (as --texture).
    let lean = loaded
        .defaults
        .texture_echo
        .or_else(|| Some(training_counts(&data.train).lean_alone()));
    let corpus = if test { &data.test } else { &data.valid };
    let pieces: Vec<_> = corpus
        .pieces
        .iter()
        .filter(|p| p.has_accompaniment() && p.has_harmony())
        .collect();
    let mut sampling = loaded.defaults.piano_sampling();
    sampling.seed = args.seed;
    let strengths = args.strengths.clone();
    let own = loaded.defaults.texture_strength.unwrap_or(1.0);
    let donors = gallery();
    let songs = super::panel::par_map(&pieces, args.threads(), &loaded.model, |m, p| {
        let r = pollster::block_on(donor_song(
            m,
            p,
            donors,
            sampling,
            lean,
            (&strengths, own),
            &device,
        ))
        .map_err(|e| format!("{}: {e}", p.name))?;
        eprintln!(
            "{}: done ({:.0} s)",
            p.name,
            started.elapsed().as_secs_f64()
        );
        Ok(r)
    })?;
    let summary = report(&songs, &strengths);
    let split = if test { "test" } else { "valid" };
    println!(
        "  ({} {split} songs, {}, temperature {}, hold {}, seed {})",
        songs.len(),
        loaded.source,
        sampling.temperature,
        sampling.hold_temperature,
        args.seed
    );
    let result = serde_json::json!({
        "task": "accompaniment",
        "panel": "donors",
        "model": loaded.source,
        "temperature": sampling.temperature,
        "hold_temperature": sampling.hold_temperature,
        "seed": args.seed,
        "data": data.description,
        "split": split,
        "summary": summary,
        "songs": songs,
        "seconds": started.elapsed().as_secs_f64(),
    });
    super::write_scores(&out, &result)
}

/// The mean of what `f` gives over the songs that give it.
fn mean<T>(items: impl IntoIterator<Item = T>, f: impl Fn(T) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = items.into_iter().filter_map(f).collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn fmt(x: Option<f64>) -> String {
    x.map_or("-".into(), |x| format!("{x:.3}"))
}

/// Every song's row for `donor` (every donor's for `None`).
fn rows<'a>(songs: &'a [DonorSong], donor: Option<&'a str>) -> impl Iterator<Item = &'a DonorRow> {
    songs
        .iter()
        .flat_map(|s| &s.donors)
        .filter(move |r| donor.is_none_or(|d| r.donor == d))
}

/// The panel's means, printed: the pianists', then each donor at each strength, then all
/// donors together.
fn report(songs: &[DonorSong], strengths: &[f32]) -> serde_json::Value {
    let same = mean(songs, |s| s.pianist_same_letter);
    let doubled = mean(songs, |s| s.pianist_against_melody.map(|a| a.doubled));
    let crossed = mean(songs, |s| s.pianist_against_melody.map(|a| a.crossed));
    let plain_doubled = mean(songs, |s| s.plain_against_melody.map(|a| a.doubled));
    let plain_crossed = mean(songs, |s| s.plain_against_melody.map(|a| a.crossed));
    println!(
        "  the pianists: same-letter similarity {}; melody doubled {} crossed {} (the model \
         with no texture: {} / {})",
        fmt(same),
        fmt(doubled),
        fmt(crossed),
        fmt(plain_doubled),
        fmt(plain_crossed)
    );
    let names: Vec<String> = gallery().iter().map(|d| d.name.clone()).collect();
    let mut out = Vec::new();
    for donor in names.iter().map(|n| Some(n.as_str())).chain([None]) {
        let label = donor.unwrap_or("all donors");
        let pianist = mean(rows(songs, donor), |r| r.pianist_following);
        let plain = mean(rows(songs, donor), |r| r.plain_following);
        println!(
            "  {label:<11} following by chance: the pianist {}, the model with no texture {}",
            fmt(pianist),
            fmt(plain)
        );
        let mut by_strength = Vec::new();
        for (i, s) in strengths.iter().enumerate() {
            let pick = |f: fn(&Followed) -> Option<f64>| {
                mean(rows(songs, donor), move |r| {
                    r.played.get(i).and_then(|(_, p)| f(p))
                })
            };
            let v = serde_json::json!({
                "strength": s,
                "following": pick(|p| p.following),
                "chord_tones": pick(|p| p.chord_tones),
                "following_substituted": pick(|p| p.following_substituted),
                "substituted_chord_tones": pick(|p| p.substituted_chord_tones),
                "doubled": pick(|p| p.against_melody.map(|a| a.doubled)),
                "crossed": pick(|p| p.against_melody.map(|a| a.crossed)),
                "density": pick(|p| p.density),
            });
            let f = |k: &str| fmt(v[k].as_f64());
            println!(
                "    echo {s}: following {} (substituted {}); chord tones {} (substituted {}); \
                 doubled {} crossed {}; density {}x",
                f("following"),
                f("following_substituted"),
                f("chord_tones"),
                f("substituted_chord_tones"),
                f("doubled"),
                f("crossed"),
                f("density")
            );
            by_strength.push(v);
        }
        out.push(serde_json::json!({
            "donor": label,
            "pianist_following": pianist,
            "plain_following": plain,
            "strengths": by_strength,
        }));
    }
    serde_json::json!({
        "pianist_same_letter": same,
        "pianist_doubled": doubled,
        "pianist_crossed": crossed,
        "plain_doubled": plain_doubled,
        "plain_crossed": plain_crossed,
        "donors": out,
    })
}
