//! `pianoformer pedal`: fits the learnt sustain pedal (`music::pedal::model`) on the POP909
//! training songs' pianists, chooses its thresholds (and how many steps around it reads) on
//! the validation songs, scores it on the test songs against the pianists and the rule
//! "change at every annotated chord change", and ships it beside the models with its figures.
//! `eval --task pedal` scores a shipped one on the test songs again.

use std::path::{Path, PathBuf};

use pianoformer::eval::pedal::{Panel, PedalSong, Scored, line, load, panel, panels};
use pianoformer::models::{DynamicsEntry, Manifest};
use pianoformer::music::harmony::decode::HarmonyDecode;
use pianoformer::music::pedal::model::{FEATURES, Fit, Link, PedalModel};
use pianoformer::music::pedal::model::{pianist_steps, press_f1, press_steps};
use pianoformer::music::pop909::Split;
use serde_json::{Value, json};

#[derive(clap::Args)]
pub struct Args {
    /// POP909's folder (its train, validation and test songs).
    #[arg(long)]
    pub data: PathBuf,
    /// Where the fitted model goes.
    #[arg(long, default_value = "www/models/pedal.json")]
    pub out: PathBuf,
    /// The manifest whose `pedal` entry describes it (file, checksum, data, figures); `none`
    /// leaves every manifest alone.
    #[arg(long, default_value = "www/models/manifest.json")]
    pub manifest: String,
    /// Ridge on every weight but the bias.
    #[arg(long, default_value_t = 1.0)]
    pub lambda: f64,
    /// Steps read on either side of a step, each tried (fitted and chosen on validation): the
    /// bigger models the chosen one is set against.
    #[arg(long, value_delimiter = ',', default_value = "0,2,4")]
    pub contexts: Vec<usize>,
    /// The fits tried with each context: `linear` (least squares on the 0/1 answer) and
    /// `logistic` (maximum likelihood, by Newton's method: slower). Earlier ones are
    /// preferred: a later fit is chosen only where it beats every earlier one by more than
    /// 0.005 of the validation press F1. Logistic did not (reports/pedal.md, "The fit").
    #[arg(long, value_delimiter = ',', default_value = "linear")]
    pub links: Vec<Link>,
    /// Also a small network with each context: a layer of this many rectified units that
    /// both logistic scores read (`train::pedal`), fitted by Adam and kept at the pass with
    /// the lowest validation loss; chosen, as every other fit, only where it beats every
    /// earlier one by more than 0.005 of the validation press F1. Empty: none.
    #[arg(long, value_delimiter = ',')]
    pub hidden: Vec<usize>,
    /// The network's passes over the training steps at most.
    #[arg(long, default_value_t = 12)]
    pub passes: usize,
    /// The network's learning rate (Adam, cosine down to a tenth).
    #[arg(long, default_value_t = 0.003)]
    pub lr: f64,
    /// Seeds the network's first weights and its batches.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Fit and choose on the validation songs, print their figures and stop: the test songs
    /// are not read and nothing is written (for trying fits without looking at test).
    #[arg(long)]
    pub validate_only: bool,
    /// The first so many songs of each split (a quick look; the shipped model reads them all).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Also measure how long the notes sound under the learnt pedal in the piano an
    /// accompaniment model writes for each test song's annotated span (its lanes the
    /// annotations), against the pianist's: a shipped model's name, a training run's folder,
    /// `default`, or `none` to skip.
    #[arg(long, default_value = "default")]
    pub accompaniment: String,
}

/// Median sounding lengths (the grid's beats) over the test songs: the pianists' notes under
/// their own pedal, the notes `spec` writes as written and under `model`'s pedal.
/// `roll` (written from step 0) laid on a roll of `steps` steps from step `start`.
fn placed(
    roll: &pianoformer::music::roll::PianoRoll,
    steps: usize,
    start: usize,
) -> pianoformer::music::roll::PianoRoll {
    use pianoformer::music::roll::{PITCHES, PianoRoll};
    let mut full = PianoRoll::new(steps);
    for t in 0..roll.num_steps.min(steps.saturating_sub(start)) {
        for pitch in 0..PITCHES {
            let (on, sus) = (roll.onset(t, pitch), roll.sustain(t, pitch));
            if on || sus {
                full.set(start + t, pitch, on, sus, 1);
            }
        }
    }
    full
}

fn written_lengths(model: &PedalModel, spec: &str, args: &Args) -> Result<Value, String> {
    use pianoformer::data::sources::{self, Parts};
    use pianoformer::eval::panel::sample_with_lanes;
    use pianoformer::model::config::Task;
    use pianoformer::music::pedal::model::Steps;
    let parts = Parts {
        train: false,
        valid: false,
        test: true,
    };
    let data = sources::load(&args.data, parts, args.limit)?;
    let device = pianoformer::device::cpu().device;
    let loaded = crate::models::load(spec, Task::Accompaniment, None, &device)?;
    let sampling = loaded.defaults.piano_sampling();
    let (mut pianists, mut written, mut pedalled) = (Vec::new(), Vec::new(), Vec::new());
    let pedal_songs = load(&args.data, Split::Test, args.limit)?.0;
    for p in data.test.pieces.iter().filter(|p| p.has_accompaniment()) {
        let Some(song) = pedal_songs
            .iter()
            .find(|s| p.name == format!("pop909/{:03}", s.id))
        else {
            continue;
        };
        let (roll, _) = pollster::block_on(sample_with_lanes(
            &loaded.model,
            p,
            &p.sheet.labels,
            sampling,
            &device,
        ))
        .map_err(|e| format!("{}: {e}", p.name))?;
        let (grid, range) = (&p.sheet.grid, p.range.clone());
        let full = placed(&roll, grid.num_steps(), range.start);
        let notes: Vec<(u8, u64, u64)> = full
            .to_notes(grid, 0, 80)
            .iter()
            .map(|n| (n.pitch, n.start, n.end))
            .collect();
        if notes.is_empty() {
            continue;
        }
        let steps = Steps::new(grid, &p.sheet.labels, &full, &p.sheet.rolls.melody);
        let events = model.pedal(&steps, grid, range.clone());
        let (from, to) = (grid.tick_at(range.start), grid.tick_at(range.end));
        let theirs: Vec<(u8, u64, u64)> = song
            .notes
            .iter()
            .copied()
            .filter(|n| n.1 >= from && n.1 < to)
            .collect();
        pianists.push(pianoformer::eval::pedal::sounding_beats(
            grid,
            &theirs,
            &song.pianist,
        ));
        written.push(pianoformer::eval::pedal::sounding_beats(grid, &notes, &[]));
        pedalled.push(pianoformer::eval::pedal::sounding_beats(
            grid, &notes, &events,
        ));
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let means = [mean(&pianists), mean(&written), mean(&pedalled)];
    let (p, w, l) = (median(pianists.clone()), median(written), median(pedalled));
    println!(
        "The piano {} wrote for {} test songs (their annotated spans): notes sound a median {w:.2} beats as written, {l:.2} under the learnt pedal; the pianists' {p:.2} under theirs ({:+.0} %); the songs' medians on average {:.2}, {:.2} and {:.2}",
        loaded.source,
        pianists.len(),
        100.0 * (l / p - 1.0),
        means[1],
        means[2],
        means[0]
    );
    Ok(json!({
        "model": loaded.source, "songs": pianists.len(), "written_beats": w, "learnt_beats": l, "pianists_beats": p,
        "mean_of_songs": { "written": means[1], "learnt": means[2], "pianists": means[0] },
    }))
}

/// Where the default path's lanes come from: `Open` as a dropped melody-only file gets them
/// (the phrase lane detected, the chord lane the harmonizer's); the others put the song's
/// annotations, or another draw of the harmonizer, in their place, to tell which lane a figure
/// of the default path owes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Lanes {
    /// Phrases detected, chords by the harmonizer (the page's and `generate`'s path).
    Open,
    /// The annotated chords, phrases detected.
    Chords,
    /// The human phrases, chords by the harmonizer.
    Phrases,
    /// Both annotated.
    Annotated,
    /// The annotated chords held a bar each (each bar's first): the right chords at the
    /// slowest harmonic rhythm.
    BarChords,
    /// The annotated chords reduced to plain triads (sevenths and sixths to their major or
    /// minor triad), as plain as the harmonizer's one guess.
    Triads,
    /// The harmonizer's colourful end (a progression drawn as varied as songwriters', seed 1)
    /// in place of its most likely one.
    Colourful,
}

impl Lanes {
    fn phrases(self) -> bool {
        matches!(self, Lanes::Phrases | Lanes::Annotated)
    }
}

/// One song's figures on the default path (over the song's annotated span, but for the
/// sounding and written lengths, over the whole song): the median sounding lengths (beats) of
/// the pianist's notes under their pedal and of the piano written under the learnt one, its
/// median written length, the onsets a beat of both, the mean written length of both in bars
/// where the melody sounds (`[0]`) and where it is silent (`[1]`), and the chord lane's changes
/// a bar against the annotations'.
struct PathSong {
    pianist: f64,
    sounding: f64,
    written: f64,
    onsets: [f64; 2],
    sung: [[f64; 2]; 2],
    changes: [f64; 2],
}

/// The page's default path for a file that holds only a melody, on each song: its MELODY
/// track alone opened as a piece (the phrase lane detected), the chord lane the harmonizer's,
/// the accompaniment `spec` with its own defaults (texture echo, dynamics) and `model`'s
/// pedal, as `generate` writes it; the written piano's notes sound a median so many beats
/// under that pedal, against the pianist's notes under theirs (whole songs, both). `lanes`
/// other than [`Lanes::Open`] give it the annotations instead.
fn default_path_lengths(
    model: &PedalModel,
    spec: &str,
    data: &Path,
    songs: &[PedalSong],
    lanes: Lanes,
) -> Result<Value, String> {
    use pianoformer::model::config::Task;
    use pianoformer::music::pop909::Pop909;
    use pianoformer::studio::Run;
    use std::rc::Rc;
    let device = pianoformer::device::cpu().device;
    let loaded = crate::models::load(spec, Task::Accompaniment, None, &device)?;
    let harmonizer = crate::models::harmonizer("default", None, &device)?;
    let dynamics = crate::models::dynamics("default", None)?.map(Rc::new);
    let pedal = Rc::new(model.clone());
    let run = Run {
        model: &loaded.model,
        defaults: &loaded.defaults,
        device: &device,
        dynamics: dynamics.as_ref(),
        pedal: Some(&pedal),
    };
    let data = Pop909::open(data).map_err(|e| e.to_string())?;
    let (mut figures, mut harmonized) = (Vec::new(), 0);
    for song in songs {
        let (written, was_harmonized) =
            default_path_piece(&data, song, lanes, &run, harmonizer.as_ref())?;
        harmonized += usize::from(was_harmonized);
        if let Some(f) = path_song(&written, song) {
            figures.push(f);
        }
    }
    Ok(path_figures(&figures, harmonized, lanes, &loaded.source))
}

/// [`default_path_lengths`]' figures over the songs, printed and as JSON.
fn path_figures(figures: &[PathSong], harmonized: usize, lanes: Lanes, model: &str) -> Value {
    let mean = |f: &dyn Fn(&PathSong) -> f64| {
        figures.iter().map(f).sum::<f64>() / figures.len().max(1) as f64
    };
    let med = |f: &dyn Fn(&PathSong) -> f64| median(figures.iter().map(f).collect());
    let (p, l) = (med(&|s| s.pianist), med(&|s| s.sounding));
    let (mp, ml) = (mean(&|s| s.pianist), mean(&|s| s.sounding));
    let onsets = [mean(&|s| s.onsets[0]), mean(&|s| s.onsets[1])];
    let sung = [0, 1].map(|k| [mean(&|s| s.sung[k][0]), mean(&|s| s.sung[k][1])]);
    let changes = [mean(&|s| s.changes[0]), mean(&|s| s.changes[1])];
    println!(
        "The default path on {} melody-only files ({harmonized} harmonized; lanes {lanes:?}; {model}): notes sound a median {l:.2} beats under the learnt pedal, the pianists' {p:.2} under theirs ({:+.0} %); the songs' medians on average {ml:.2} against {mp:.2} ({:+.0} %)",
        figures.len(),
        100.0 * (l / p - 1.0),
        100.0 * (ml / mp - 1.0),
    );
    println!(
        "  written a median {:.2} beats; over the annotated span: onsets a beat {:.2} (the pianists' {:.2}); mean written length where the melody sounds {:.2} beats (the pianists' {:.2}), in bars where it is silent {:.2} ({:.2}); chord changes a bar {:.2} (annotated {:.2})",
        med(&|s| s.written),
        onsets[0],
        onsets[1],
        sung[0][0],
        sung[0][1],
        sung[1][0],
        sung[1][1],
        changes[0],
        changes[1],
    );
    json!({
        "model": model, "songs": figures.len(), "harmonized": harmonized,
        "lanes": format!("{lanes:?}").to_lowercase(),
        "learnt_beats": l, "pianists_beats": p,
        "mean_of_songs": { "learnt": ml, "pianists": mp },
        "written_beats": med(&|s| s.written),
        "onsets_a_beat": { "written": onsets[0], "pianists": onsets[1] },
        "mean_written_beats": {
            "melody_sounds": { "written": sung[0][0], "pianists": sung[0][1] },
            "melody_silent": { "written": sung[1][0], "pianists": sung[1][1] },
        },
        "chord_changes_a_bar": { "lane": changes[0], "annotated": changes[1] },
    })
}

/// The figures of one song's default-path piece ([`PathSong`]); `None` where no piano was
/// written.
fn path_song(written: &pianoformer::music::piece::Piece, song: &PedalSong) -> Option<PathSong> {
    use pianoformer::eval::pedal::sounding_beats;
    use pianoformer::music::piece::TrackRole;
    use pianoformer::studio::ACCOMPANIMENT_TRACK;
    let piano = written
        .tracks
        .iter()
        .find(|t| t.role == TrackRole::Generated && t.name == ACCOMPANIMENT_TRACK)?;
    let notes: Vec<(u8, u64, u64)> = piano.notes.iter().map(|n| (n.0, n.1, n.2)).collect();
    if notes.is_empty() {
        return None;
    }
    let grid = written.grid(|_| true);
    let span = song.grid.tick_at(song.range.start)..song.grid.tick_at(song.range.end);
    let span_beats = (song.grid.beat_at(span.end) - song.grid.beat_at(span.start)).max(1.0);
    let onsets_of = |notes: &[(u8, u64, u64)]| {
        let mut starts: Vec<u64> = notes
            .iter()
            .filter(|n| span.contains(&n.1))
            .map(|n| n.1)
            .collect();
        starts.sort_unstable();
        starts.dedup();
        starts.len() as f64 / span_beats
    };
    let sung = sung_bars(written, &grid);
    let by_melody = |notes: &[(u8, u64, u64)], g: &pianoformer::music::grid::Grid| {
        let mut sums = [(0.0, 0usize); 2];
        for n in notes.iter().filter(|n| span.contains(&n.1)) {
            let bar = grid.bar_of_step(grid.step_at(n.1)).0;
            let k = usize::from(!sung.get(bar).copied().unwrap_or(false));
            sums[k].0 += g.beat_at(n.2) - g.beat_at(n.1);
            sums[k].1 += 1;
        }
        sums.map(|(s, n)| s / n.max(1) as f64)
    };
    let (mine, theirs) = (by_melody(&notes, &grid), by_melody(&song.notes, &song.grid));
    Some(PathSong {
        pianist: sounding_beats(&song.grid, &song.notes, &song.pianist),
        sounding: sounding_beats(&grid, &notes, &piano.pedal),
        written: sounding_beats(&grid, &notes, &[]),
        onsets: [onsets_of(&notes), onsets_of(&song.notes)],
        sung: [[mine[0], theirs[0]], [mine[1], theirs[1]]],
        changes: lane_changes(written, song, &grid, &span),
    })
}

/// Which bars of `grid` the melody of `piece` sounds in.
fn sung_bars(
    piece: &pianoformer::music::piece::Piece,
    grid: &pianoformer::music::grid::Grid,
) -> Vec<bool> {
    use pianoformer::music::piece::TrackRole;
    let bar_of = |tick: u64| grid.bar_of_step(grid.step_at(tick)).0;
    let mut sung = vec![false; grid.num_bars() + 1];
    for t in piece.tracks.iter().filter(|t| t.role == TrackRole::Melody) {
        for n in &t.notes {
            for bar in bar_of(n.1)..=bar_of(n.2.saturating_sub(1).max(n.1)) {
                if let Some(x) = sung.get_mut(bar) {
                    *x = true;
                }
            }
        }
    }
    sung
}

/// Chord changes a bar over the ticks `span`: `piece`'s chord lane, and `song`'s annotated
/// chords laid on the same bars and read alike (each cell's chords sharing its beats evenly).
fn lane_changes(
    piece: &pianoformer::music::piece::Piece,
    song: &PedalSong,
    grid: &pianoformer::music::grid::Grid,
    span: &std::ops::Range<u64>,
) -> [f64; 2] {
    let bars: Vec<usize> = (0..grid.num_bars().min(piece.chords.len()))
        .filter(|&b| span.contains(&grid.tick_at(grid.bar_steps(b).start)))
        .collect();
    let changes = |cells: &[String]| {
        let beats: Vec<&str> = bars
            .iter()
            .flat_map(|&b| {
                let n = grid.bar_beats(b).len().max(1);
                let parts: Vec<&str> = cells
                    .get(b)
                    .map_or(Vec::new(), |c| c.split_whitespace().collect());
                (0..n).map(move |i| parts.get(i * parts.len() / n).copied().unwrap_or(""))
            })
            .collect();
        beats.windows(2).filter(|w| w[0] != w[1]).count() as f64 / bars.len().max(1) as f64
    };
    [
        changes(&piece.chords),
        changes(&annotated_cells(piece, song, false)),
    ]
}

/// The chord cells of `piece`'s bars from `song`'s annotated chords (a bar past the piece's
/// grid or the annotations: none); `triads`: each reduced to its plain major or minor triad.
fn annotated_cells(
    piece: &pianoformer::music::piece::Piece,
    song: &PedalSong,
    triads: bool,
) -> Vec<String> {
    use pianoformer::music::chords::{Chord, Family, Quality};
    use pianoformer::music::piece::chord_cell;
    let plain = |c: Chord| match c.quality.family() {
        Family::Major if triads => Chord {
            quality: Quality::Maj,
            ..c
        },
        Family::Minor if triads => Chord {
            quality: Quality::Min,
            ..c
        },
        _ => c,
    };
    let grid = piece.grid(|_| true);
    (0..piece.bars.len())
        .map(|bar| {
            if bar >= grid.num_bars() {
                return String::new();
            }
            let beats: Vec<_> = grid
                .bar_beats(bar)
                .map(|b| {
                    let s = song.grid.step_at(grid.tick_at(b * grid.steps_per_beat));
                    song.labels.chord.get(s).copied().flatten().map(plain)
                })
                .collect();
            chord_cell(&beats)
        })
        .collect()
}

/// Song `song`'s MELODY track alone, opened as a piece (the phrase lane detected), its chord
/// lane the harmonizer's where it wants one (`lanes` may put the annotations in their place),
/// accompanied as `generate` does with `run`'s model and its own settings; and whether the
/// harmonizer wrote the chords.
fn default_path_piece(
    data: &pianoformer::music::pop909::Pop909,
    song: &PedalSong,
    lanes: Lanes,
    run: &pianoformer::studio::Run<'_>,
    harmonizer: Option<&(crate::models::Loaded, HarmonyDecode)>,
) -> Result<(pianoformer::music::piece::Piece, bool), String> {
    use pianoformer::music::harmony::ChordSource;
    use pianoformer::music::piece::Piece;
    use pianoformer::music::roll::Role;
    use pianoformer::studio::{Family, Kept, Options, TaskKind};
    let id = song.id;
    let mut whole = data
        .load(id, 4)
        .map_err(|e| format!("song {id}: {e}"))?
        .song;
    whole.tracks.retain(|t| t.name == Role::Melody.track_name());
    let name = format!("pop909-{id:03}.mid");
    let mut piece = Piece::from_song(&whole, &name).map_err(|e| format!("{name}: {e}"))?;
    let grid = piece.grid(|_| true);
    let at = |step: usize| song.grid.step_at(grid.tick_at(step));
    // The piece's bars as its grid counts them (a bar past the grid's end keeps no lane).
    let bars = piece.bars.len().min(grid.num_bars());
    match lanes {
        Lanes::Chords | Lanes::Annotated | Lanes::Triads => {
            piece.chords = annotated_cells(&piece, song, lanes == Lanes::Triads);
            piece.chord_source = Some(ChordSource::Score);
        }
        Lanes::BarChords => {
            piece.chords = annotated_cells(&piece, song, false)
                .into_iter()
                .map(|c| c.split_whitespace().next().unwrap_or("").to_string())
                .collect();
            piece.chord_source = Some(ChordSource::Score);
        }
        Lanes::Open | Lanes::Phrases | Lanes::Colourful => {}
    }
    if lanes.phrases() {
        let mut phrases: Vec<(char, usize)> = Vec::new();
        let mut last: Option<(char, u16)> = None;
        for bar in 0..piece.bars.len() {
            let step = at(grid.bar_steps(bar.min(bars.saturating_sub(1))).start);
            let label = song.labels.phrase.get(step).copied().flatten();
            let key = label.map_or(('x', u16::MAX), |l| (l.letter, l.index));
            match phrases.last_mut() {
                Some(p) if last == Some(key) => p.1 += 1,
                _ => phrases.push((key.0, 1)),
            }
            last = Some(key);
        }
        piece.phrases = phrases;
    }
    let harmonizer = harmonizer.filter(|_| crate::generate::wants_harmonizer(&piece));
    if let Some(h) = harmonizer {
        let options = pianoformer::studio::HarmonizeOptions {
            seed: (lanes == Lanes::Colourful).then_some(1),
            ..Default::default()
        };
        crate::generate::harmonize_lane(&mut piece, h, &options)?;
    }
    let out = pollster::block_on(TaskKind::Accompaniment.generate(
        run,
        &piece,
        &Options::default(),
        &mut Kept::default(),
        |_| async { true },
    ))
    .map_err(|e| format!("{name}: {e}"))?
    .into_pieces();
    let written = out.into_iter().next().ok_or("no piece was written")?.piece;
    Ok((written, harmonizer.is_some()))
}

/// The press threshold with the best mean F1 on `songs`, then the down threshold whose mean
/// share of time down is nearest the pianists'; each tried value's figures.
fn choose(model: &mut PedalModel, songs: &[PedalSong]) -> Vec<Value> {
    let scores: Vec<Vec<(f64, f64)>> = songs.iter().map(|s| model.scores(&s.steps)).collect();
    let mut tried = Vec::new();
    let (mut best_f1, mut best_press) = (-1.0, model.press_threshold);
    for k in 1..=16 {
        model.press_threshold = f64::from(k) * 0.04;
        let f1 = songs
            .iter()
            .zip(&scores)
            .filter_map(|(s, sc)| {
                let end = s.grid.tick_at(s.range.end);
                let wanted: Vec<usize> = press_steps(&s.grid, &s.pianist, end)
                    .into_iter()
                    .filter(|t| s.range.contains(t))
                    .collect();
                press_f1(&model.presses(sc, s.range.clone()), &wanted, 2).map(|f| f.2)
            })
            .sum::<f64>()
            / songs.len().max(1) as f64;
        tried.push(json!({ "press_threshold": model.press_threshold, "f1": f1 }));
        if f1 > best_f1 {
            (best_f1, best_press) = (f1, model.press_threshold);
        }
    }
    model.press_threshold = best_press;
    let pianists: Vec<Scored> = songs.iter().map(|s| s.score(&s.pianist)).collect();
    let pianists_share = panel(&pianists, &pianists).share_down;
    let (mut best_off, mut best_down) = (f64::INFINITY, model.down_threshold);
    for k in 0..=20 {
        model.down_threshold = f64::from(k) * 0.05;
        let scored: Vec<Scored> = songs.iter().map(|s| s.score(&s.learnt(model))).collect();
        let p = panel(&scored, &pianists);
        tried.push(json!({
            "press_threshold": model.press_threshold,
            "down_threshold": model.down_threshold,
            "panel": p,
        }));
        let mean_off = (p.share_down - pianists_share).abs();
        if mean_off < best_off {
            (best_off, best_down) = (mean_off, model.down_threshold);
        }
    }
    model.down_threshold = best_down;
    tried
}

/// The steps of `songs` with their pianists' answers, read with `context` steps either side.
fn steps_of(songs: &[PedalSong], fit: Fit) -> Fit {
    let mut fit = fit;
    for s in songs {
        let (press, down) = pianist_steps(&s.grid, &s.pianist, s.grid.tick_at(s.range.end));
        fit.add(&s.steps, s.range.clone(), &press, &down);
    }
    fit
}

/// The two scores fitted (`link`) on the training songs with `context` steps either side.
fn fitted(
    train: &[PedalSong],
    (context, link): (usize, Link),
    lambda: f64,
) -> Result<PedalModel, String> {
    steps_of(train, Fit::new(context, link)).solve(lambda)
}

/// The network of `units` fitted on the training songs with `context` steps either side,
/// kept at its best pass on the validation songs' steps.
fn network(
    (train, valid): (&[PedalSong], &[PedalSong]),
    context: usize,
    units: usize,
    args: &Args,
) -> Result<PedalModel, String> {
    use pianoformer::train::pedal::{NetworkFit, fit_network};
    let rows = |songs| steps_of(songs, Fit::new(context, Link::Linear).keeping_rows());
    let (train, valid) = (rows(train), rows(valid));
    let fit = NetworkFit {
        context,
        units,
        passes: args.passes,
        batch: 512,
        lr: args.lr,
        seed: args.seed,
    };
    let device = pianoformer::device::cpu().device;
    fit_network(&fit, train.rows(), valid.rows(), &device, |pass, t, v| {
        eprintln!(
            "network, context {context}, {units} units: pass {pass}, loss {t:.5} (validation {v:.5})"
        )
    })
}

/// A fit with its thresholds chosen, its validation panel and every threshold tried.
type Candidate = (PedalModel, Panel, Vec<Value>);

/// `model` with its thresholds chosen on `valid`, its validation panel printed as `name`.
fn tried(mut model: PedalModel, valid: &[PedalSong], name: &str) -> Candidate {
    let tried = choose(&mut model, valid);
    let (_, _, learnt) = panels(valid, Some(&model));
    let learnt = learnt.expect("a model was given");
    println!("{}", line(name, &learnt));
    (model, learnt, tried)
}

/// Every fit `args` asks for, in the order in which a later one must pay to be chosen: each
/// link by context, then each network by context.
fn candidates(
    (train, valid): (&[PedalSong], &[PedalSong]),
    args: &Args,
) -> Result<Vec<Candidate>, String> {
    let mut candidates = Vec::new();
    let fits = args
        .links
        .iter()
        .flat_map(|&l| args.contexts.iter().map(move |&c| (c, l)));
    for (context, link) in fits {
        let model = fitted(train, (context, link), args.lambda)?;
        let name = format!("validation, {link:?} fit, context {context}").to_lowercase();
        candidates.push(tried(model, valid, &name));
    }
    for &units in args.hidden.iter().filter(|&&u| u > 0) {
        for &context in &args.contexts {
            let model = network((train, valid), context, units, args)?;
            let name = format!("validation, network of {units} units, context {context}");
            candidates.push(tried(model, valid, &name));
        }
    }
    Ok(candidates)
}

pub fn run(args: Args) -> Result<(), String> {
    if args.contexts.is_empty() || args.contexts.iter().any(|&c| c > 8) {
        return Err("--contexts takes 0 to 8 steps, at least one".into());
    }
    if args.links.is_empty() {
        return Err("--links takes linear, logistic or both".into());
    }
    let split = |s: Split| -> Result<Vec<PedalSong>, String> {
        let (songs, none) = load(&args.data, s, args.limit)?;
        eprintln!(
            "{s:?}: {} songs pedalled, {none} without the pianist's pedal",
            songs.len()
        );
        Ok(songs)
    };
    let (train, valid) = (split(Split::Train)?, split(Split::Validation)?);
    let (_, rule, _) = panels(&valid, None);
    println!("{}", line("validation, rule: every chord change", &rule));
    let mut candidates = candidates((&train, &valid), &args)?;
    drop(train);
    // The first model within 0.005 F1 of the best (the first fit, the smallest context):
    // bigger or other must pay to be chosen.
    let best = candidates.iter().map(|c| c.1.f1).fold(f64::MIN, f64::max);
    let chosen = candidates
        .iter()
        .position(|c| c.1.f1 >= best - 0.005)
        .expect("one candidate is the best");
    let validation: Vec<Value> = candidates
        .iter()
        .map(|(m, p, tried)| json!({ "context": m.context, "link": m.link, "units": m.hidden.as_ref().map(|h| h.units), "panel": p, "tried": tried }))
        .collect();
    let model = candidates.swap_remove(chosen).0;
    if args.validate_only {
        println!("would choose: {}; test not read", fit_words(&model));
        return Ok(());
    }
    println!("chosen: {}", fit_words(&model));
    let test = split(Split::Test)?;
    let (pianists, rule, learnt) = panels(&test, Some(&model));
    let learnt = learnt.expect("a model was given");
    println!(
        "Test songs ({}), presses within an eighth of the pianist's:",
        test.len()
    );
    for (name, p) in [
        ("pianists", &pianists),
        ("rule: every chord change", &rule),
        ("learnt", &learnt),
    ] {
        println!("{}", line(name, p));
    }
    let written = median(test.iter().map(|s| s.written_beats()).collect());
    println!("written (no pedal): sounding {written:.2} beats");
    let (accompaniment, default_path) = match args.accompaniment.as_str() {
        "none" => (Value::Null, Value::Null),
        spec => (
            written_lengths(&model, spec, &args)?,
            default_path_lengths(&model, spec, &args.data, &test, Lanes::Open)?,
        ),
    };
    let bytes = serde_json::to_vec_pretty(&model).expect("the model serialises");
    std::fs::write(&args.out, &bytes)
        .map_err(|e| format!("cannot write {}: {e}", args.out.display()))?;
    println!("the model is in {}", args.out.display());
    let metrics = json!({
        "test": { "learnt": learnt, "rule": rule, "pianists": pianists, "written_beats": written },
        "test_written": accompaniment,
        "test_default_path": default_path,
        "validation": validation,
        "rule": "press threshold: best mean press F1 (within an eighth) on validation; down threshold: mean share of time down nearest the pianists'; fit: the first of the linear fits, the logistic ones and the networks (each by context, the smallest first) within 0.005 F1 of the best",
    });
    if args.manifest != "none" {
        write_manifest(Path::new(&args.manifest), &args, &model, &bytes, metrics)?;
        println!("its entry is in {}", args.manifest);
    }
    Ok(())
}

/// A fitted model in words: its fit, context and thresholds.
fn fit_words(model: &PedalModel) -> String {
    format!(
        "{:?} fit{}, context {} (press threshold {:.2}, down threshold {:.2})",
        model.link,
        model
            .hidden
            .as_ref()
            .map_or(String::new(), |h| format!(" through {} units", h.units)),
        model.context,
        model.press_threshold,
        model.down_threshold
    )
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

fn write_manifest(
    path: &Path,
    args: &Args,
    model: &PedalModel,
    bytes: &[u8],
    metrics: Value,
) -> Result<(), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut manifest = Manifest::parse(&text).map_err(|e| e.to_string())?;
    let file = args
        .out
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .ok_or("--out names no file")?;
    let list = |v: &[String]| v.join(",");
    let contexts: Vec<String> = args.contexts.iter().map(|n| n.to_string()).collect();
    let links: Vec<String> = args
        .links
        .iter()
        .map(|l| format!("{l:?}").to_lowercase())
        .collect();
    let mut command = format!(
        "pianoformer pedal --data {} --out {} --lambda {} --contexts {} --links {}",
        args.data.display(),
        args.out.display(),
        args.lambda,
        list(&contexts),
        list(&links)
    );
    if !args.hidden.is_empty() {
        let hidden: Vec<String> = args.hidden.iter().map(|n| n.to_string()).collect();
        command += &format!(
            " --hidden {} --passes {} --lr {} --seed {}",
            list(&hidden),
            args.passes,
            args.lr,
            args.seed
        );
    }
    let what = "the chord lane's changes, bar lines and beats, the piano's onsets and bass, \
                rests, the phrase";
    let reads = match &model.hidden {
        Some(h) => format!(
            "a small network: {} rectified units over the {} features of each sixteenth and of \
             the {} steps either side ({what}), read by two logistic scores",
            h.units,
            FEATURES.len(),
            model.context
        ),
        None => format!(
            "two {} scores over the {} features of each sixteenth and of the {} steps either \
             side ({what})",
            match model.link {
                Link::Linear => "least-squares",
                Link::Logistic => "logistic",
            },
            FEATURES.len(),
            model.context
        ),
    };
    manifest.pedal = Some(DynamicsEntry {
        name: "pedal".into(),
        file,
        description: format!(
            "The sustain pedal for the piano the models write: {reads}; it presses where the \
             first peaks and holds while the second holds, learnt from the POP909 pianists"
        ),
        bytes: bytes.len(),
        sha256: pianoformer::model::sha256_hex(bytes),
        training: json!({
            "command": command,
            "split": "POP909 songs with id % 10 not in {0, 5} (0: test, 5: validation), their PIANO tracks' controller 64",
        }),
        metrics,
    });
    let out = serde_json::to_string_pretty(&manifest).expect("a manifest serialises") + "\n";
    std::fs::write(path, out).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// `eval --task pedal`: the shipped (or given) pedal model scored on the songs of `split`
/// (the test songs, unless tuning), with the pianists and the rule beside it, and the sounding
/// lengths it gives the default path's piano on their melodies alone, with each of `lanes`.
pub fn eval(
    data: &Path,
    model: &Path,
    limit: Option<usize>,
    split: Split,
    lanes: &[Lanes],
) -> Result<(), String> {
    let text = std::fs::read_to_string(model)
        .map_err(|e| format!("cannot read the pedal model {}: {e}", model.display()))?;
    let model = PedalModel::from_json(&text)?;
    let (songs, none) = load(data, split, limit)?;
    let (pianists, rule, learnt) = panels(&songs, Some(&model));
    println!(
        "{split:?} songs ({} pedalled, {none} without the pianist's pedal), presses within an eighth of the pianist's:",
        songs.len()
    );
    for (name, p) in [("pianists", &pianists), ("rule: every chord change", &rule)] {
        println!("{}", line(name, p));
    }
    println!("{}", line("learnt", &learnt.expect("a model was given")));
    for &lanes in lanes {
        default_path_lengths(&model, "default", data, &songs, lanes)?;
    }
    Ok(())
}
