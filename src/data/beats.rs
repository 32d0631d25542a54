//! What the harmonizer reads per beat: the melody and bridge, the place in the bar and the
//! phrase lane ([`write_beat_features`]), and around each beat the chroma of its bar, half
//! bar, nearby bars and song ([`BeatReader`], [`BeatInputs`]); never the chords. A beat is the
//! unit: a song of 100 bars is 400 positions, a sixteenth of the accompaniment's.

use super::features::{LABEL_FEATURES, LabelFeatures};
use crate::music::harmony::BeatPlaces;
use crate::music::labels::StepLabels;
use crate::music::roll::{PITCHES, PianoRoll};

/// Values per beat that [`write_beat_features`] writes.
pub const BEAT_FEATURES: usize = 76;

/// What the harmonizer reads at `beat` (steps `beat · spb ..`) of the melody and bridge rolls
/// and the labels (only their phrase lane and bar grid: never their chords), transposed by
/// `transpose` semitones, into `out` ([`BEAT_FEATURES`] values; zeros past the end):
///
/// | values | what |
/// |---|---|
/// | 12 | melody chroma: the share of the beat each pitch class sounds |
/// | 12 | melody onsets by pitch class |
/// | 12 | the melody pitch class sounding at the beat's start |
/// | 12 | bridge (other non-piano parts) chroma |
/// | 1 | share of the beat the melody rests |
/// | 1 | melody height: mean sounding pitch, (p − 60) / 12 |
/// | 8 | beat in the bar, one-hot (later beats fold onto the last) |
/// | 1 | the bar's last beat |
/// | 1 | the half bar |
/// | 1 | a bar of three beats |
/// | 14 | phrase: letter (11, as the accompaniment reads it), first bar, last bar, place |
/// | 1 | the melody's first note after a rest of a beat or more starts in this beat |
pub fn write_beat_features(
    melody: &PianoRoll,
    bridge: &PianoRoll,
    labels: &StepLabels,
    places: &BeatPlaces,
    beat: usize,
    transpose: i32,
    out: &mut [f32],
) {
    let out = &mut out[..BEAT_FEATURES];
    out.fill(0.0);
    if beat >= places.len() {
        return;
    }
    let spb = labels.steps_per_beat.max(1);
    let steps = beat * spb..((beat + 1) * spb).min(labels.len());
    let share = 1.0 / spb as f32;
    let pc = |p: usize| (p as i32 + transpose).rem_euclid(12) as usize;
    let (mut rests, mut height, mut sounding) = (0.0, 0.0, 0usize);
    for s in steps.clone() {
        let mut any = false;
        for p in 0..PITCHES {
            if s < melody.num_steps && melody.sustain(s, p) {
                out[pc(p)] += share;
                any = true;
                height += p as f32 + transpose as f32;
                sounding += 1;
                if melody.onset(s, p) {
                    out[12 + pc(p)] = 1.0;
                }
                if s == steps.start {
                    out[24 + pc(p)] = 1.0;
                }
            }
            if s < bridge.num_steps && bridge.sustain(s, p) {
                out[36 + pc(p)] += share;
            }
        }
        if !any {
            rests += share;
        }
    }
    out[48] = rests;
    if sounding > 0 {
        out[49] = (height / sounding as f32 - 60.0) / 12.0;
    }
    let (k, n) = (places.in_bar[beat], places.bar_beats[beat]);
    out[50 + k.min(7)] = 1.0;
    out[58] = (k + 1 == n) as u8 as f32;
    out[59] = (places.slot(beat) == 1) as u8 as f32;
    out[60] = (n == 3) as u8 as f32;
    let mut lanes = [0f32; LABEL_FEATURES];
    labels.write_features(steps.start, &mut lanes);
    out[61..75].copy_from_slice(&lanes[26..40]);
    // A phrase of the melody starting: its first onset after at least a beat of rest.
    let rested = |from: usize| {
        let before = from.saturating_sub(spb)..from;
        from >= spb
            && before
                .clone()
                .all(|s| s >= melody.num_steps || (0..PITCHES).all(|p| !melody.sustain(s, p)))
    };
    out[75] = steps
        .clone()
        .find(|&s| s < melody.num_steps && (0..PITCHES).any(|p| melody.onset(s, p)))
        .is_some_and(rested) as u8 as f32;
}

/// Values per beat of the context ([`BeatInputs::context`]): the chroma of the melody and
/// bridge over the beat's bar, its half bar, the two bars either side of its bar and the whole
/// song (12 each, scaled so the loudest pitch class is 1). A chord lasts a bar or half a bar and
/// the key a song: read per beat, the melody shows one or two of a chord's tones.
pub const CONTEXT_FEATURES: usize = 48;

/// What a harmonizer reads per beat: [`write_beat_features`]'s values, then (with `context`)
/// the chroma around the beat, read from the beats up to the current one only when `causal`
/// (a live harmonizer must not hear the future).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BeatInputs {
    pub context: bool,
    pub causal: bool,
}

impl BeatInputs {
    /// The context read from the whole song (a new harmonizer for files; a causal model's
    /// reader sets `causal`).
    pub const WITH_CONTEXT: BeatInputs = BeatInputs {
        context: true,
        causal: false,
    };

    /// Values per beat.
    pub const fn width(self) -> usize {
        BEAT_FEATURES + if self.context { CONTEXT_FEATURES } else { 0 }
    }

    /// The inputs of a model reading `width` values per beat (the first harmonizer read no
    /// context), `None` for a width no harmonizer reads.
    pub fn of_width(width: usize, causal: bool) -> Option<Self> {
        [false, true]
            .map(|context| Self { context, causal })
            .into_iter()
            .find(|i| i.width() == width)
    }
}

/// Reads a song's beats as a harmonizer does: the per-beat values and, with context, the
/// chroma of the melody and bridge summed from the song's start (so any span costs 12 values).
pub struct BeatReader<'a> {
    melody: &'a PianoRoll,
    bridge: &'a PianoRoll,
    labels: &'a StepLabels,
    pub places: BeatPlaces,
    inputs: BeatInputs,
    /// `prefix[b]`: each pitch class's sounding share summed over beats `0..b`.
    prefix: Vec<[f32; 12]>,
}

impl<'a> BeatReader<'a> {
    pub fn new(
        melody: &'a PianoRoll,
        bridge: &'a PianoRoll,
        labels: &'a StepLabels,
        inputs: BeatInputs,
    ) -> Self {
        let places = BeatPlaces::from_labels(labels);
        let mut prefix = Vec::new();
        if inputs.context {
            prefix.reserve(places.len() + 1);
            let mut sum = [0f32; 12];
            prefix.push(sum);
            for b in 0..places.len() {
                add_beat_chroma(melody, bridge, labels, b, &mut sum);
                prefix.push(sum);
            }
        }
        Self::with_parts(melody, bridge, labels, places, inputs, prefix)
    }

    /// A reader whose places and chroma sums are already known: `prefix[b]` sums
    /// [`add_beat_chroma`] over beats `0..b`, as far as the beats that will be read need (a
    /// causal reader of beat `b` reads `prefix[..= b + 1]`). A live harmonizer keeps them from
    /// beat to beat instead of reading the whole song again.
    pub fn with_parts(
        melody: &'a PianoRoll,
        bridge: &'a PianoRoll,
        labels: &'a StepLabels,
        places: BeatPlaces,
        inputs: BeatInputs,
        prefix: Vec<[f32; 12]>,
    ) -> Self {
        Self {
            melody,
            bridge,
            labels,
            places,
            inputs,
            prefix,
        }
    }

    /// The places and chroma sums back (see [`BeatReader::with_parts`]).
    pub fn into_parts(self) -> (BeatPlaces, Vec<[f32; 12]>) {
        (self.places, self.prefix)
    }

    /// Beats in the song.
    pub fn len(&self) -> usize {
        self.places.len()
    }

    pub fn is_empty(&self) -> bool {
        self.places.is_empty()
    }

    /// Beat `beat`'s values ([`BeatInputs::width`]), transposed by `transpose` semitones, into
    /// `out`; zeros past the end.
    pub fn write(&self, beat: usize, transpose: i32, out: &mut [f32]) {
        write_beat_features(
            self.melody,
            self.bridge,
            self.labels,
            &self.places,
            beat,
            transpose,
            out,
        );
        if !self.inputs.context {
            return;
        }
        let out = &mut out[BEAT_FEATURES..BEAT_FEATURES + CONTEXT_FEATURES];
        out.fill(0.0);
        if beat >= self.len() {
            return;
        }
        let (k, n) = (self.places.in_bar[beat], self.places.bar_beats[beat]);
        let bar = beat - k..beat - k + n;
        let half = if n >= 4 && n % 2 == 0 {
            let start = bar.start + (k >= n / 2) as usize * n / 2;
            start..start + n / 2
        } else {
            bar.clone()
        };
        let near = bar.start.saturating_sub(2 * n)..bar.end + 2 * n;
        let spans = [bar, half, near, 0..self.len()];
        for (span, out) in spans.into_iter().zip(out.chunks_mut(12)) {
            let end = span.end.min(self.len());
            let end = if self.inputs.causal {
                end.min(beat + 1)
            } else {
                end
            };
            let (a, b) = (&self.prefix[span.start.min(end)], &self.prefix[end]);
            let max = (0..12).map(|i| b[i] - a[i]).fold(0f32, f32::max);
            if max > 0.0 {
                for i in 0..12 {
                    out[(i as i32 + transpose).rem_euclid(12) as usize] = (b[i] - a[i]) / max;
                }
            }
        }
    }
}

/// Adds beat `beat`'s chroma (each pitch class's share of the beat sounding, melody and
/// bridge) to `sum`: what the context's chroma sums are made of.
pub fn add_beat_chroma(
    melody: &PianoRoll,
    bridge: &PianoRoll,
    labels: &StepLabels,
    beat: usize,
    sum: &mut [f32; 12],
) {
    let spb = labels.steps_per_beat.max(1);
    let share = 1.0 / spb as f32;
    for s in beat * spb..((beat + 1) * spb).min(labels.len()) {
        for roll in [melody, bridge] {
            if s < roll.num_steps {
                for p in (0..PITCHES).filter(|&p| roll.sustain(s, p)) {
                    sum[p % 12] += share;
                }
            }
        }
    }
}

/// Every beat's values, row-major `[beats, inputs.width()]`.
pub fn beat_features(
    melody: &PianoRoll,
    bridge: &PianoRoll,
    labels: &StepLabels,
    transpose: i32,
    inputs: BeatInputs,
) -> Vec<f32> {
    let reader = BeatReader::new(melody, bridge, labels, inputs);
    let width = inputs.width();
    let mut out = vec![0f32; reader.len() * width];
    for (b, row) in out.chunks_mut(width).enumerate() {
        reader.write(b, transpose, row);
    }
    out
}

/// The labels at each beat's first step: what F-StrIPE's structure levels read per beat.
pub fn beat_labels(labels: &StepLabels) -> StepLabels {
    let spb = labels.steps_per_beat.max(1);
    let pick = |v: &[u8]| v.iter().step_by(spb).copied().collect::<Vec<_>>();
    StepLabels {
        steps_per_beat: 1,
        melody: pick(&labels.melody),
        chord: labels.chord.iter().step_by(spb).copied().collect(),
        phrase: labels.phrase.iter().step_by(spb).copied().collect(),
        bar: labels.bar.iter().step_by(spb).copied().collect(),
        // The beat within its bar (at one step per beat, `coordinates` counts it as 4
        // sixteenths a beat, as on the sixteenth grid).
        position: labels
            .position
            .iter()
            .step_by(spb)
            .map(|&p| (p as usize / spb) as u16)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::pe::StructureLevel;
    use crate::music::chords::{Chord, Quality};
    use crate::music::grid::Grid;
    use crate::music::midi::tests::note;
    use crate::music::phrases::Segment;

    fn chord(root: u8, quality: Quality) -> Option<Chord> {
        Some(Chord { root, quality })
    }

    /// Labels of `beats` beats of 4/4 (4 steps a beat) with one phrase `A` over everything.
    fn grid_labels(beats: u64, melody: &PianoRoll, chords: &[Option<Chord>]) -> (Grid, StepLabels) {
        let grid = Grid::quarters(480, beats * 480, 4);
        let phrases = [Segment {
            start_bar: 0,
            bars: grid.num_bars(),
            letter: 'A',
        }];
        let labels = StepLabels::new(&grid, melody, chords, &phrases);
        (grid, labels)
    }

    #[test]
    fn beat_features_read_the_melody_transposed_and_never_the_chords() {
        let grid = Grid::quarters(480, 8 * 480, 4);
        // E5 for beat 0's first half, G5 from beat 2 for two beats; a bridge C4 on beat 0.
        let melody = PianoRoll::from_notes(&[note(76, 0, 240), note(79, 960, 1920)], &grid);
        let bridge = PianoRoll::from_notes(&[note(60, 0, 480)], &grid);
        let c = chord(0, Quality::Maj);
        let (_, labels) = grid_labels(8, &melody, &[c; 8]);
        let f = beat_features(&melody, &bridge, &labels, 0, BeatInputs::default());
        assert_eq!(f.len(), 8 * BEAT_FEATURES);
        let row = |b: usize| &f[b * BEAT_FEATURES..(b + 1) * BEAT_FEATURES];
        assert_eq!(row(0)[4], 0.5, "E sounds half of beat 0");
        assert_eq!((row(0)[12 + 4], row(0)[24 + 4]), (1.0, 1.0));
        assert_eq!(row(0)[36], 1.0, "the bridge's C");
        assert_eq!(row(0)[48], 0.5, "rests half the beat");
        assert!((row(0)[49] - (76.0 - 60.0) / 12.0).abs() < 1e-6);
        assert_eq!((row(0)[50], row(0)[58], row(0)[59]), (1.0, 0.0, 0.0));
        assert_eq!(
            (row(2)[52], row(2)[59]),
            (1.0, 1.0),
            "beat 2 is the half bar"
        );
        assert_eq!(row(3)[58], 1.0, "beat 3 ends the bar");
        assert_eq!(
            (row(3)[7], row(3)[12 + 7]),
            (1.0, 0.0),
            "G held, not struck"
        );
        assert_eq!(row(2)[75], 1.0, "G starts after a beat of rest");
        assert_eq!(row(0)[61], 1.0, "phrase A");
        assert_eq!(row(0)[61 + 11], 1.0, "the phrase's first bar");
        // Transposed: pitch classes move, the rest stays.
        let up = beat_features(&melody, &bridge, &labels, 3, BeatInputs::default());
        assert_eq!(up[7], 0.5);
        assert_eq!(up[36 + 3], 1.0);
        assert_eq!(up[48], f[48]);
        assert!(
            (up[49] - f[49] - 0.25).abs() < 1e-6,
            "three semitones higher"
        );
        assert_eq!(&up[50..BEAT_FEATURES], &f[50..BEAT_FEATURES]);
        // Other chords in the labels change nothing.
        let (_, other) = grid_labels(8, &melody, &[chord(6, Quality::Dim); 8]);
        assert_eq!(
            beat_features(&melody, &bridge, &other, 0, BeatInputs::default()),
            f
        );
        // One label per beat for F-StrIPE: the melody at the beat's start, the beat in the bar.
        let beats = beat_labels(&labels);
        assert_eq!(beats.len(), 8);
        assert_eq!(&beats.melody[..4], &[76, 0, 79, 79]);
        assert_eq!(&beats.position[..5], &[0, 1, 2, 3, 0]);
        let coords = beats.coordinates(&[StructureLevel::Position]);
        assert_eq!(
            &coords[..4],
            &[0.0, 4.0, 8.0, 12.0],
            "sixteenths, as on the step grid"
        );
    }

    #[test]
    fn the_context_is_the_chroma_of_the_bar_half_bar_nearby_bars_and_song() {
        // Eight bars of 4/4: C5 through bar 0's first half, E5 its second, G4 on every later beat.
        let grid = Grid::quarters(480, 32 * 480, 4);
        let mut notes = vec![note(72, 0, 960), note(76, 960, 1920)];
        notes.extend((4..32).map(|b| note(67, b * 480, (b + 1) * 480)));
        let melody = PianoRoll::from_notes(&notes, &grid);
        let bridge = PianoRoll::new(grid.num_steps());
        let (_, labels) = grid_labels(32, &melody, &[]);
        let reads = BeatInputs::WITH_CONTEXT;
        assert_eq!(BeatInputs::of_width(reads.width(), false), Some(reads));
        assert_eq!(
            BeatInputs::of_width(BEAT_FEATURES, false),
            Some(BeatInputs::default())
        );
        assert_eq!(BeatInputs::of_width(7, false), None);
        let f = beat_features(&melody, &bridge, &labels, 0, reads);
        let w = reads.width();
        let plain = beat_features(&melody, &bridge, &labels, 0, BeatInputs::default());
        let context =
            |f: &[f32], b: usize, k: usize| f[b * w + BEAT_FEATURES + 12 * k..][..12].to_vec();
        assert_eq!(
            &f[..BEAT_FEATURES],
            &plain[..BEAT_FEATURES],
            "the beat's own values first"
        );
        let (bar, half) = (context(&f, 0, 0), context(&f, 0, 1));
        assert_eq!(
            (bar[0], bar[4], bar[7]),
            (1.0, 1.0, 0.0),
            "bar 0: C and E equally"
        );
        assert_eq!((half[0], half[4]), (1.0, 0.0), "its first half: C alone");
        assert_eq!(context(&f, 2, 1)[4], 1.0, "its second half: E");
        let near = context(&f, 0, 2);
        assert_eq!(near[7], 1.0, "bars 1 and 2 hold eight beats of G");
        assert!(
            (near[0] - 0.25).abs() < 1e-6,
            "two beats of C against eight of G"
        );
        let song = context(&f, 0, 3);
        assert_eq!(song[7], 1.0);
        assert!((song[0] - 2.0 / 28.0).abs() < 1e-6);
        // Transposed: the context turns with the melody.
        let up = beat_features(&melody, &bridge, &labels, 2, reads);
        assert_eq!(context(&up, 0, 0)[2], 1.0);
        assert_eq!(context(&up, 0, 3)[9], 1.0);
        // Causal: beat 0 hears only itself, so its bar, half bar and song are C alone.
        let causal = BeatInputs {
            context: true,
            causal: true,
        };
        let c = beat_features(&melody, &bridge, &labels, 0, causal);
        for k in 0..4 {
            let v = context(&c, 0, k);
            assert_eq!((v[0], v[4], v[7]), (1.0, 0.0, 0.0), "span {k}");
        }
        assert_eq!(
            context(&c, 3, 0),
            bar,
            "the bar's last beat hears the whole bar"
        );
        // Later notes never reach an earlier beat's causal context.
        let mut later = notes.clone();
        later.push(note(61, 20 * 480, 21 * 480));
        let moved = PianoRoll::from_notes(&later, &grid);
        let c2 = beat_features(&moved, &bridge, &labels, 0, causal);
        assert_eq!(&c2[..20 * w], &c[..20 * w]);
        assert_ne!(&c2[20 * w..], &c[20 * w..]);
    }
}
