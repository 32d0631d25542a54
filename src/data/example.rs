//! Accompaniment training examples: windows of a song's rolls and labels as the flat arrays a
//! batch is made of, with the augmentations training uses (random crops, transposition).
//! No tensors here: `batch.rs` stacks examples into them.

use rand::RngExt;
use rand::rngs::StdRng;

use super::beats::BeatInputs;
use super::features::{LABEL_FEATURES, LabelFeatures};
use crate::model::config::{ACCOMPANIMENT_INPUTS, Conditioning, PerformerConfig};
use crate::model::pe::StructureLevel;
use crate::music::labels::StepLabels;
use crate::music::roll::{MultiRoll, PITCHES, PianoRoll};
use crate::music::texture::echo::sources;

/// What a window of the accompaniment task looks like.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowSpec {
    /// Grid steps (accompaniment) or tokens (continuation) per window.
    pub len: usize,
    /// Transpositions are drawn from `-max_shift ..= max_shift` semitones.
    pub max_shift: i32,
    /// F-StrIPE's structure levels (their coordinates go with each accompaniment window).
    pub levels: Vec<StructureLevel>,
    /// Accompaniment: the lanes and the previous piano step as inputs.
    pub conditioning: Option<Conditioning>,
    /// Harmonization: what is read per beat.
    pub beats: BeatInputs,
    /// Accompaniment training: the share of a window's chord stretches whose chord is replaced
    /// by another of the song's own (see [`replace_chords`]), so the model learns to play on
    /// under a chord lane that is partly wrong, as a guessed one is. 0 reads the labels as they
    /// are (validation always does).
    pub chord_noise: f64,
}

impl WindowSpec {
    /// Windows of `len` steps or tokens as `config`'s model reads them, untransposed.
    pub fn for_model(config: &PerformerConfig, len: usize) -> Self {
        Self {
            len,
            max_shift: 0,
            levels: config.pe.structure_levels().to_vec(),
            conditioning: config.conditioning,
            beats: config.beat_inputs(),
            chord_noise: 0.0,
        }
    }
}

/// One window: inputs [len, 4·128 + extra] (melody onset, melody sustain, bridge onset, bridge
/// sustain; then, with conditioning, the lanes' features and the piano's previous step),
/// targets [len, 2·128] (piano onset, piano sustain), structure coordinates
/// [len, coordinates], row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Example {
    pub len: usize,
    pub inputs: Vec<f32>,
    pub targets: Vec<f32>,
    pub coordinates: Vec<f32>,
}

/// `roll`'s onset and sustain at `step`, shifted by `transpose` semitones (pitches pushed off
/// the keyboard are dropped), written into `out` (2·128 values).
fn planes(roll: &PianoRoll, step: usize, transpose: i32, out: &mut [f32]) {
    for p in 0..PITCHES {
        let q = p as i32 + transpose;
        if !(0..PITCHES as i32).contains(&q) {
            continue;
        }
        let q = q as usize;
        out[q] = roll.onset(step, p) as u8 as f32;
        out[PITCHES + q] = roll.sustain(step, p) as u8 as f32;
    }
}

/// Values per step of the reference lane: the answered step's onset and sustain (2·128), then
/// whether there is an answered step and whether the chord under the two differs.
pub const REFERENCE_INPUTS: usize = 2 * PITCHES + 2;

/// The reference lane of one step into `out` ([`REFERENCE_INPUTS`] values): `piano`'s step
/// `answer.0` (the piano being written, or a donor's), transposed, and the two flags; zeros
/// where the step answers none.
pub fn reference_row(
    piano: &PianoRoll,
    answer: Option<(usize, bool)>,
    transpose: i32,
    out: &mut [f32],
) {
    out[..REFERENCE_INPUTS].fill(0.0);
    if let Some((s, changed)) = answer
        && s < piano.num_steps
    {
        planes(piano, s, transpose, &mut out[..2 * PITCHES]);
        out[2 * PITCHES] = 1.0;
        out[2 * PITCHES + 1] = changed as u8 as f32;
    }
}

/// Every step's answered step of `labels` (a whole song's lanes: the first occurrence may lie
/// before any window) and whether the chord under the two differs, for the reference lane.
pub fn answers(labels: &StepLabels) -> Vec<Option<(usize, bool)>> {
    sources(labels)
        .into_iter()
        .enumerate()
        .map(|(t, s)| s.map(|s| (s, labels.chord[t] != labels.chord[s])))
        .collect()
}

/// Labels transposed by `semitones`: melody pitches (rests stay rests) and chord roots move.
pub fn transpose_labels(labels: &StepLabels, semitones: i32) -> StepLabels {
    let mut out = labels.clone();
    for m in out.melody.iter_mut().filter(|m| **m > 0) {
        *m = (*m as i32 + semitones).clamp(1, 127) as u8;
    }
    for c in out.chord.iter_mut().flatten() {
        c.root = (c.root as i32 + semitones).rem_euclid(12) as u8;
    }
    out
}

/// F-StrIPE's coordinates of a window's labels (already sliced and transposed) at
/// `spec.levels`, zeros past the song's end so every window has `spec.len` rows.
pub fn window_coordinates(window: &StepLabels, spec: &WindowSpec) -> Vec<f32> {
    let dims: usize = spec.levels.iter().map(|l| l.dims()).sum();
    let mut coordinates = window.coordinates(&spec.levels);
    coordinates.resize(spec.len * dims, 0.0);
    coordinates
}

/// The window `start .. start + spec.len` of a song (steps past the end are silent),
/// transposed, with the inputs `spec.conditioning` asks for. The piano's previous step at the
/// window's first step is the song's step before it (teacher forcing sees what the pianist
/// really played there).
pub fn example(
    rolls: &MultiRoll,
    labels: &StepLabels,
    spec: &WindowSpec,
    start: usize,
    transpose: i32,
) -> Example {
    let len = spec.len;
    let conditioning = spec.conditioning;
    let width = ACCOMPANIMENT_INPUTS + conditioning.map_or(0, Conditioning::extra_inputs);
    let mut inputs = vec![0f32; len * width];
    let mut targets = vec![0f32; len * 2 * PITCHES];
    let window = transpose_labels(&labels.slice(start..start + len), transpose);
    let answers = conditioning
        .filter(|c| c.reference)
        .map(|_| answers(labels));
    for t in 0..len {
        let s = start + t;
        if s >= rolls.num_steps() {
            break;
        }
        let row = &mut inputs[t * width..(t + 1) * width];
        let answer = answers.as_ref().and_then(|a| a.get(s).copied().flatten());
        let at = RowAt {
            t,
            s,
            transpose,
            answer,
        };
        write_row(rolls, &window, at, conditioning, row);
        planes(
            &rolls.piano,
            s,
            transpose,
            &mut targets[t * 2 * PITCHES..(t + 1) * 2 * PITCHES],
        );
    }
    let coordinates = window_coordinates(&window, spec);
    Example {
        len,
        inputs,
        targets,
        coordinates,
    }
}

/// Which row [`write_row`] writes: step `s` of the song, step `t` of the lanes' window,
/// transposed by `transpose`; `answer` is the step the reference lane reads (and whether the
/// chord differs there), for a model that reads one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowAt {
    pub t: usize,
    pub s: usize,
    pub transpose: i32,
    pub answer: Option<(usize, bool)>,
}

impl RowAt {
    /// Step `t` of a whole song, untransposed, answering `answer`.
    pub fn song(t: usize, answer: Option<(usize, bool)>) -> Self {
        Self {
            t,
            s: t,
            transpose: 0,
            answer,
        }
    }
}

/// Step `s`'s inputs (a whole row: melody and bridge planes, then what `conditioning` adds)
/// into `row`, transposed; the lanes are read at step `t` of `window` (the labels as the
/// window or the whole song, already transposed). What training, generation and live playing
/// all read.
pub fn write_row(
    rolls: &MultiRoll,
    window: &StepLabels,
    at: RowAt,
    conditioning: Option<Conditioning>,
    row: &mut [f32],
) {
    let RowAt {
        t,
        s,
        transpose,
        answer,
    } = at;
    let lag = conditioning.map_or(0, |c| c.melody_lag as usize);
    if s >= lag {
        planes(&rolls.melody, s - lag, transpose, &mut row[..2 * PITCHES]);
    }
    planes(
        &rolls.bridge,
        s,
        transpose,
        &mut row[2 * PITCHES..4 * PITCHES],
    );
    let mut at = ACCOMPANIMENT_INPUTS;
    if let Some(c) = conditioning {
        if c.labels {
            window.write_features(t, &mut row[at..at + LABEL_FEATURES]);
            at += LABEL_FEATURES;
        }
        if c.piano {
            if s > 0 {
                planes(
                    &rolls.piano,
                    s - 1,
                    transpose,
                    &mut row[at..at + 2 * PITCHES],
                );
            }
            at += 2 * PITCHES;
        }
        if c.reference {
            let out = &mut row[at..at + REFERENCE_INPUTS];
            reference_row(&rolls.piano, answer.filter(|a| a.0 < s), transpose, out);
        }
    }
}

/// Where random crops may start in `range` for windows of `len` steps, on bar lines of
/// `bar_steps` (the start itself when the range is shorter than a window).
pub fn crop_starts(range: std::ops::Range<usize>, len: usize, bar_steps: usize) -> Vec<usize> {
    let last = range.end.saturating_sub(len).max(range.start);
    (range.start..=last).step_by(bar_steps.max(1)).collect()
}

/// `labels` with the chords of `steps` partly replaced: each stretch of one chord there (cut at
/// the range's ends) keeps its chord with probability `1 - share`, or takes the chord of a
/// random stretch of the song with another root (so the new chord is one of the song's own,
/// in its key and style, as a guessing harmonizer's wrong chords are), or, in a song of one
/// root, the same chord moved by a random interval. Steps without a chord keep none.
pub fn replace_chords(
    labels: &StepLabels,
    steps: std::ops::Range<usize>,
    share: f64,
    rng: &mut StdRng,
) -> StepLabels {
    let mut out = labels.clone();
    if share <= 0.0 {
        return out;
    }
    let chords = &labels.chord;
    let stretches = |range: std::ops::Range<usize>| {
        let mut starts = Vec::new();
        for s in range.clone() {
            if chords[s].is_some() && (s == range.start || chords[s] != chords[s - 1]) {
                starts.push(s);
            }
        }
        starts
    };
    let end = steps.end.min(chords.len());
    let song: Vec<usize> = stretches(0..chords.len());
    for start in stretches(steps.start.min(end)..end) {
        if !rng.random_bool(share.min(1.0)) {
            continue;
        }
        let Some(old) = chords[start] else { continue };
        let others: Vec<usize> = song
            .iter()
            .copied()
            .filter(|&s| chords[s].is_some_and(|c| c.root != old.root))
            .collect();
        let new = if others.is_empty() {
            let mut c = old;
            c.root = ((old.root as u32 + rng.random_range(1..12u32)) % 12) as u8;
            c
        } else {
            chords[others[rng.random_range(0..others.len())]].expect("a chord")
        };
        for c in out.chord[start..end]
            .iter_mut()
            .take_while(|c| **c == Some(old))
        {
            *c = Some(new);
        }
    }
    out
}

/// A random crop and transposition in `-spec.max_shift ..= spec.max_shift`.
pub fn random_example(
    rolls: &MultiRoll,
    labels: &StepLabels,
    spec: &WindowSpec,
    starts: &[usize],
    rng: &mut StdRng,
) -> Example {
    let max_shift = spec.max_shift;
    let start = starts[rng
        .random_range(0..starts.len().max(1))
        .min(starts.len().saturating_sub(1))];
    let shift = if max_shift > 0 {
        rng.random_range(-max_shift..=max_shift)
    } else {
        0
    };
    example(rolls, labels, spec, start, shift)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::pe::StructureLevel;
    use crate::music::chords::{Chord, Quality};
    use crate::music::grid::Grid;
    use crate::music::midi::tests::note;
    use crate::music::roll::Role;

    #[test]
    fn windows_hold_the_planes_and_labels_transposed() {
        let grid = Grid::quarters(480, 4 * 480, 4);
        let melody = [note(72, 0, 480)];
        let piano = [note(48, 480, 960)];
        let rolls = MultiRoll::from_tracks(
            [(Role::Melody, &melody[..]), (Role::Piano, &piano[..])],
            &grid,
        );
        let c = Chord {
            root: 0,
            quality: Quality::Maj,
        };
        let labels = StepLabels::new(&grid, &rolls.melody, &[Some(c); 4], &[]);
        let mut spec = WindowSpec {
            len: 20,
            max_shift: 0,
            levels: vec![StructureLevel::Melody],
            conditioning: None,
            beats: BeatInputs::default(),
            chord_noise: 0.0,
        };
        let e = example(&rolls, &labels, &spec, 0, 2);
        assert_eq!(e.inputs.len(), 20 * 512);
        assert_eq!(e.inputs[74], 1.0, "melody onset at C5 + 2");
        assert_eq!(e.inputs[128 + 74], 1.0, "melody sustain");
        assert_eq!(e.inputs[72], 0.0);
        assert_eq!(
            e.targets[4 * 256 + 50],
            1.0,
            "piano onset at step 4, C3 + 2"
        );
        assert_eq!(
            e.targets[7 * 256 + 128 + 50],
            1.0,
            "piano sustain at step 7"
        );
        assert_eq!(e.coordinates.len(), 20);
        assert_eq!(&e.coordinates[..5], &[74.0, 74.0, 74.0, 74.0, 0.0]);
        assert_eq!(e.coordinates[19], 0.0, "past the song: silent, zero labels");
        // With the lanes and the previous piano step: the piano's onset at step 4 is the
        // previous step's input at step 5, and C major's chroma moves up two semitones.
        spec.conditioning = Some(Conditioning::AUTOREGRESSIVE);
        let e = example(&rolls, &labels, &spec, 0, 2);
        let width = 512 + LABEL_FEATURES + 256;
        assert_eq!(e.inputs.len(), 20 * width);
        let row = |t: usize| &e.inputs[t * width..(t + 1) * width];
        assert_eq!(row(5)[512 + LABEL_FEATURES + 50], 1.0);
        assert_eq!(row(4)[512 + LABEL_FEATURES + 50], 0.0);
        assert_eq!(
            row(6)[512 + LABEL_FEATURES + 128 + 50],
            1.0,
            "sustained at step 5"
        );
        let chroma: Vec<usize> = (0..12).filter(|&i| row(0)[512 + i] == 1.0).collect();
        assert_eq!(chroma, vec![2, 6, 9], "D major");
        assert_eq!(e.targets[4 * 256 + 50], 1.0);
        // A window that starts mid-song sees the step before it.
        spec.len = 4;
        let mid = example(&rolls, &labels, &spec, 5, 0);
        assert_eq!(mid.inputs[512 + LABEL_FEATURES + 48], 1.0);
        // A live model reads the melody a step late, the bridge, lanes and piano as before.
        spec.len = 20;
        spec.conditioning = Some(Conditioning::lagged(1));
        let on_time = example(
            &rolls,
            &labels,
            &WindowSpec {
                conditioning: Some(Conditioning::AUTOREGRESSIVE),
                ..spec.clone()
            },
            0,
            2,
        );
        let late = example(&rolls, &labels, &spec, 0, 2);
        let rows = |e: &Example, t: usize| e.inputs[t * width..(t + 1) * width].to_vec();
        assert!(
            rows(&late, 0)[..256].iter().all(|&v| v == 0.0),
            "nothing heard yet"
        );
        for t in 1..20 {
            let (a, b) = (rows(&late, t), rows(&on_time, t - 1));
            assert_eq!(
                a[..256],
                b[..256],
                "step {t} reads the melody of step {}",
                t - 1
            );
            assert_eq!(
                a[256..],
                rows(&on_time, t)[256..],
                "the rest on time at {t}"
            );
        }
        assert_eq!(late.targets, on_time.targets);
        let t = transpose_labels(&labels, -1);
        assert_eq!(t.chord[0].unwrap().root, 11);
        assert_eq!(crop_starts(0..40, 16, 16), vec![0, 16]);
        assert_eq!(crop_starts(8..12, 16, 16), vec![8]);
    }

    #[test]
    fn the_reference_lane_reads_the_first_occurrence_of_a_repeat() {
        // A1 B1 A1, 16 steps a bar: the pianist plays C3 at bar 0's step 3 and E3 at bar 1's.
        let grid = Grid::quarters(480, 12 * 480, 4);
        let piano = [note(48, 3 * 120, 120), note(52, 16 * 120 + 3 * 120, 120)];
        let rolls = MultiRoll::from_tracks([(Role::Piano, &piano[..])], &grid);
        let chords: Vec<_> = (0..12)
            .map(|b| {
                Some(Chord {
                    root: if b < 8 { 0 } else { 7 },
                    quality: Quality::Maj,
                })
            })
            .collect();
        let phrases: Vec<_> = "ABA"
            .chars()
            .enumerate()
            .map(|(k, letter)| crate::music::phrases::Segment {
                start_bar: k,
                bars: 1,
                letter,
            })
            .collect();
        let labels = StepLabels::new(&grid, &rolls.melody, &chords, &phrases);
        let spec = WindowSpec {
            len: 16,
            max_shift: 0,
            levels: vec![],
            conditioning: Some(Conditioning::REFERENCE),
            beats: BeatInputs::default(),
            chord_noise: 0.0,
        };
        let width = 512 + LABEL_FEATURES + 256 + REFERENCE_INPUTS;
        let at = 512 + LABEL_FEATURES + 256;
        assert_eq!(Conditioning::REFERENCE.reference_offset(), Some(at));
        // The window of the second A (bar 2), transposed up 2: its step 3 reads C3 + 2 at
        // bar 0's step 3, and the chord under the two differs (G against C).
        let e = example(&rolls, &labels, &spec, 32, 2);
        assert_eq!(e.inputs.len(), 16 * width);
        let row = |t: usize| &e.inputs[t * width + at..(t + 1) * width];
        assert_eq!(row(3)[50], 1.0, "the first A's onset, transposed");
        assert_eq!(row(3)[128 + 50], 1.0, "and its sustain");
        assert_eq!(row(3)[48], 0.0);
        assert!(row(2)[..256].iter().all(|&v| v == 0.0));
        assert_eq!(row(0)[256], 1.0, "a step that answers");
        assert_eq!(row(0)[257], 1.0, "under another chord");
        // B answers nothing: its lane is silent, whatever it plays.
        let b = example(&rolls, &labels, &spec, 16, 0);
        assert!((0..16).all(|t| {
            b.inputs[t * width + at..(t + 1) * width]
                .iter()
                .all(|&v| v == 0.0)
        }));
    }

    #[test]
    fn replaced_chords_are_the_songs_own_with_another_root_and_only_in_the_window() {
        use rand::SeedableRng;
        // Eight bars of one beat each: C C G G Am Am F (none), 4 steps a beat.
        let grid = Grid::quarters(480, 8 * 480, 4);
        let rolls = MultiRoll::from_tracks([(Role::Piano, &[][..])], &grid);
        let chord = |root, quality| Some(Chord { root, quality });
        let beat_chords = [
            chord(0, Quality::Maj),
            chord(0, Quality::Maj),
            chord(7, Quality::Maj),
            chord(7, Quality::Maj),
            chord(9, Quality::Min),
            chord(9, Quality::Min),
            chord(5, Quality::Maj),
            None,
        ];
        let labels = StepLabels::new(&grid, &rolls.melody, &beat_chords, &[]);
        let mut rng = StdRng::seed_from_u64(3);
        assert_eq!(replace_chords(&labels, 0..32, 0.0, &mut rng), labels);
        let song: Vec<Chord> = beat_chords.iter().flatten().copied().collect();
        for seed in 0..20 {
            let mut rng = StdRng::seed_from_u64(seed);
            // The window: beats 1..7 (steps 4..28); every stretch in it is replaced.
            let out = replace_chords(&labels, 4..28, 1.0, &mut rng);
            assert_eq!(out.chord[..4], labels.chord[..4], "before the window");
            assert_eq!(
                out.chord[28..],
                labels.chord[28..],
                "after it, no chord stays none"
            );
            assert_eq!(out.melody, labels.melody);
            for s in 4..28 {
                let (old, new) = (labels.chord[s].unwrap(), out.chord[s].unwrap());
                assert_ne!(new.root, old.root, "step {s} keeps its root");
                assert!(song.contains(&new), "step {s}: {new:?} is not the song's");
                // A stretch takes one chord throughout.
                if s > 4 && labels.chord[s] == labels.chord[s - 1] {
                    assert_eq!(out.chord[s], out.chord[s - 1]);
                }
            }
        }
        // A song of one root moves it.
        let one = StepLabels::new(&grid, &rolls.melody, &[chord(2, Quality::Min); 8], &[]);
        let out = replace_chords(&one, 0..32, 1.0, &mut rng);
        assert!(
            out.chord
                .iter()
                .all(|c| c.unwrap().root != 2 && c.unwrap().quality == Quality::Min)
        );
        // About the share asked for, over many windows.
        let replaced = (0..400)
            .filter(|_| replace_chords(&labels, 0..8, 0.3, &mut rng).chord[0] != labels.chord[0])
            .count();
        assert!((80..160).contains(&replaced), "{replaced} of 400 at 0.3");
    }
}
