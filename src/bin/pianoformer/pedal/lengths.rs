//! The sounding lengths of the piano a model writes, under the learnt pedal, against the
//! pianists': over each test song's annotated span (its lanes the annotations), and on the
//! page's default path for a melody-only file, with its lanes taken apart (`--lanes`).

use std::path::Path;

use pianoformer::eval::pedal::{PedalSong, load};
use pianoformer::music::harmony::decode::HarmonyDecode;
use pianoformer::music::pedal::model::PedalModel;
use pianoformer::music::pop909::Split;
use serde_json::{Value, json};

use super::{Args, median};

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

/// Median sounding lengths (the grid's beats) over the test songs: the pianists' notes under
/// their own pedal, the notes `spec` writes as written and under `model`'s pedal.
pub(super) fn written_lengths(
    model: &PedalModel,
    spec: &str,
    args: &Args,
) -> Result<Value, String> {
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
    let pedal_songs = load(&args.data, Split::Test, args.limit, model.causal)?.0;
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
        let steps = Steps::for_model(model, grid, &p.sheet.labels, (&full, &p.sheet.rolls.melody));
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
/// other than [`Lanes::Open`] give it the annotations instead; the page's seed is moved by
/// `seed`, and with `per_song` by each song's POP909 number too.
pub(super) fn default_path_lengths(
    model: &PedalModel,
    spec: &str,
    data: &Path,
    songs: &[PedalSong],
    (lanes, seed, per_song): (Lanes, u64, bool),
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
        let (written, was_harmonized) = default_path_piece(
            &data,
            song,
            (lanes, seed + if per_song { u64::from(song.id) } else { 0 }),
            &run,
            harmonizer.as_ref(),
        )?;
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
    (lanes, seed): (Lanes, u64),
    run: &pianoformer::studio::Run<'_>,
    harmonizer: Option<&(crate::models::Loaded, HarmonyDecode)>,
) -> Result<(pianoformer::music::piece::Piece, bool), String> {
    use pianoformer::music::harmony::ChordSource;
    use pianoformer::music::piece::Piece;
    use pianoformer::music::roll::Role;
    use pianoformer::studio::{Common, Family, Kept, TaskKind};
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
        &serde_json::json!({ "seed": Common::default().seed + seed }),
        &mut Kept::default(),
        |_| async { true },
    ))
    .map_err(|e| format!("{name}: {e}"))?
    .into_pieces();
    let written = out.into_iter().next().ok_or("no piece was written")?.piece;
    Ok((written, harmonizer.is_some()))
}
