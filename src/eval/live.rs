//! The live accompaniment measured on held-out songs: a song's melody played in exactly in time
//! from the first beat of its annotated span (the model starting there afresh, as the offline
//! panel's window does), each sixteenth of the piano decided before the note played at it is
//! heard — what a person playing along with the page gets — set against the same model
//! offline, which hears each step's melody. Scored by chord tones (the share of the piano's onsets that are tones of the
//! song's annotated chords) and density (onsets per beat over the pianist's).

use burn::tensor::Device;

use super::panel::sample_with_lanes;
use crate::data::corpus::Piece;
use crate::generate::accompany::AccompanimentInput;
use crate::generate::live::{Live, LiveChords};
use crate::generate::{GenerateError, PianoSampling};
use crate::model::performer::Performer;
use crate::music::chords::Chord;
use crate::music::grid::Grid;
use crate::music::labels::StepLabels;
use crate::music::playing::{chord_tone_ratio, onsets_per_beat};
use crate::music::roll::{MultiRoll, PITCHES, PianoRoll};

/// What one song's piano scored.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Played {
    /// Onsets that are tones of the annotated chords (`None`: no onset on an annotated beat).
    pub chord_tones: Option<f64>,
    /// Onsets per beat over the pianist's (`None`: the pianist plays nothing there).
    pub density: Option<f64>,
}

/// `roll`'s steps `range` as a roll of their own.
fn cut(roll: &PianoRoll, range: std::ops::Range<usize>) -> PianoRoll {
    let mut out = PianoRoll::new(range.len());
    for (i, t) in range.enumerate() {
        for p in 0..PITCHES {
            out.set(i, p, roll.onset(t, p), roll.sustain(t, p), 0);
        }
    }
    out
}

/// Scores `piano` (the span's steps) against `piece`'s annotated chords and its pianist.
pub fn score(piece: &Piece, piano: &PianoRoll, span: std::ops::Range<usize>) -> Played {
    let spb = piece.sheet.labels.steps_per_beat.max(1);
    let annotated = piece.sheet.labels.slice(span.clone()).beat_chords();
    let real = cut(&piece.sheet.rolls.piano, span.clone());
    let n = span.len();
    let real_rate = onsets_per_beat(&real, 0..n, spb);
    Played {
        chord_tones: chord_tone_ratio(piano, &annotated, spb),
        density: (real_rate > 0.0).then(|| onsets_per_beat(piano, 0..n, spb) / real_rate),
    }
}

/// The steps a take covers: from the first beat of the annotated span to its end.
pub fn take_span(piece: &Piece) -> std::ops::Range<usize> {
    let spb = piece.sheet.labels.steps_per_beat.max(1);
    let start = piece.range.start.div_ceil(spb) * spb;
    start.min(piece.range.end)..piece.range.end
}

/// The live piano over [`take_span`] with `labels` in the lanes, the take starting the model
/// afresh there (as the offline panel's window does): `planned`, every chord of theirs is
/// played; else the chords of the take's beats are decided live by `chords` (none without
/// it). Returns the piano over the span and the chords per beat it played with.
pub async fn live_take(
    model: &Performer,
    chords: Option<LiveChords<'_>>,
    piece: &Piece,
    labels: &StepLabels,
    planned: bool,
    sampling: PianoSampling,
    device: &Device,
) -> Result<(PianoRoll, Vec<Option<Chord>>), GenerateError> {
    let span = take_span(piece);
    let spb = piece.sheet.labels.steps_per_beat.max(1);
    let (first, beats) = (span.start / spb, span.len().div_ceil(spb));
    let grid = &piece.sheet.grid;
    let end = (first + beats).min(grid.num_beats());
    let bars = grid
        .bar_starts
        .iter()
        .filter(|&&b| b >= first && b < end)
        .map(|&b| b - first)
        .collect();
    let grid = Grid::new(grid.beat_ticks[first..=end].to_vec(), spb, bars);
    let mut labels = labels.slice(span.clone());
    if !planned {
        labels.chord.fill(None);
    }
    let melody = cut(&piece.sheet.rolls.melody, span.clone());
    let input = AccompanimentInput {
        chords: labels.beat_chords(),
        sheet: crate::data::sheet::Sheet {
            grid,
            rolls: MultiRoll {
                melody: melody.clone(),
                bridge: cut(&piece.sheet.rolls.bridge, span.clone()),
                piano: PianoRoll::new(span.len()),
            },
            labels,
        },
        phrases: Vec::new(),
        kept: Vec::new(),
    };
    let n = span.len();
    let mut live = Live::start(
        model,
        chords,
        input,
        vec![planned; beats],
        &PianoRoll::new(n),
        0,
        sampling,
        device,
    )
    .await?;
    // The melody's notes, played exactly in time: a key that goes down or up at step t − 1
    // is heard before step t is decided.
    for t in 0..n {
        if t > 0 {
            let s = t - 1;
            for p in 0..PITCHES {
                let ends = s > 0
                    && melody.sustain(s - 1, p)
                    && (!melody.sustain(s, p) || melody.onset(s, p));
                if ends {
                    live.note_off(p as u8, s as f64);
                }
                // A note sounding into the take from before counts as played at its start.
                if melody.onset(s, p) || (s == 0 && melody.sustain(s, p)) {
                    live.note_on(p as u8, s as f64);
                }
            }
        }
        live.decide(model, chords, t, device).await?;
    }
    Ok((live.piano().clone(), live.chords().to_vec()))
}

/// The same model offline over the annotated span (each step hears its own melody), with
/// `labels` in the lanes.
pub async fn offline_take(
    model: &Performer,
    piece: &Piece,
    labels: &StepLabels,
    sampling: PianoSampling,
    device: &Device,
) -> Result<PianoRoll, GenerateError> {
    let (roll, _) = sample_with_lanes(model, piece, labels, sampling, device).await?;
    Ok(roll)
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
/// The four cases of the live panel, in the order [`LiveSong::played`] holds them.
pub const CASES: [&str; 4] = [
    "planned lanes, live",
    "planned lanes, offline",
    "open lanes, live (causal harmonizer)",
    "open lanes, offline (whole-melody harmonizer)",
];

/// One song of the live panel: the piano of each of [`CASES`] scored, and how often the
/// chords decided live have the annotated chord's root.
#[derive(Clone, Debug)]
pub struct LiveSong {
    pub played: [Played; 4],
    /// Share of annotated beats whose live chord has the annotated root (`None` without any).
    pub live_root: Option<f64>,
    /// Beats of the take.
    pub beats: usize,
}

/// What the live panel needs besides a song: the step-by-step accompanist and its sampling,
/// the live chord decisions (the causal harmonizer), and the whole-melody harmonizer with its
/// decoding for the offline open lane.
pub struct LivePanel<'a> {
    pub accompanist: &'a Performer,
    pub sampling: PianoSampling,
    pub chords: LiveChords<'a>,
    pub whole: &'a Performer,
    pub whole_decode: &'a crate::music::harmony::decode::HarmonyDecode,
    pub seed: u64,
}

impl LivePanel<'_> {
    /// The four takes of `piece` (melody played in, lanes planned or open, live or offline),
    /// scored against its annotations.
    pub async fn song(&self, piece: &Piece, device: &Device) -> Result<LiveSong, GenerateError> {
        use crate::generate::harmonize::{Choice, chord_log_probs, progression};
        let harmony = super::harmony::HarmonySong::new(piece);
        let span = take_span(piece);
        let acc = self.accompanist;
        let (planned_live, _) = live_take(
            acc,
            None,
            piece,
            &piece.sheet.labels,
            true,
            self.sampling,
            device,
        )
        .await?;
        let planned_offline =
            offline_take(acc, piece, &piece.sheet.labels, self.sampling, device).await?;
        let (open_live, live_chords) = live_take(
            acc,
            Some(self.chords),
            piece,
            &harmony.detected_labels,
            false,
            self.sampling,
            device,
        )
        .await?;
        let lp = chord_log_probs(
            self.whole,
            &harmony.melody,
            &harmony.bridge,
            &harmony.detected_labels,
            self.seed,
        )
        .await?;
        let file_chords = progression(
            &lp,
            &harmony.places,
            self.whole_decode,
            0..usize::MAX,
            None,
            Choice::Best,
        );
        let file_lanes = super::harmony::with_chords(&harmony.detected_labels, &file_chords);
        let open_offline = offline_take(acc, piece, &file_lanes, self.sampling, device).await?;
        let played = [
            score(piece, &planned_live, span.clone()),
            score(piece, &planned_offline, piece.range.clone()),
            score(piece, &open_live, span.clone()),
            score(piece, &open_offline, piece.range.clone()),
        ];
        let annotated = piece.sheet.labels.slice(span.clone()).beat_chords();
        let pairs: Vec<_> = annotated
            .iter()
            .zip(&live_chords)
            .filter_map(|(a, l)| a.map(|a| (a, *l)))
            .collect();
        let live_root = (!pairs.is_empty()).then(|| {
            pairs
                .iter()
                .filter(|(a, l)| l.is_some_and(|l| l.root == a.root))
                .count() as f64
                / pairs.len() as f64
        });
        Ok(LiveSong {
            played,
            live_root,
            beats: span.len() / piece.sheet.labels.steps_per_beat.max(1),
        })
    }
}
