//! A melody for the lanes: a melody model ([`Task::Melody`]) writes a region of steps a
//! sixteenth at a time — rest, hold or the onset of a pitch — reading the chord and phrase
//! lanes, the melody it has written and, when asked, the accompaniment under it. The melody
//! before the region is the prompt (read in one pass); the region's notes come back as steps
//! for the caller to splice in.

use std::ops::Range;

use burn::tensor::{Device, Tensor, TensorData};

use super::sample::uniform;
use super::{AttentionRows, GenerateError, MapFeatures, Sampling, Watch, sample_token};
use crate::data::features::LabelFeatures;
use crate::data::melody::{
    HOLD, MELODY_CLASSES, MELODY_INPUTS, MelodyContext, MelodyStep, REST, class_pitch,
    melody_steps, write_melody_row,
};
use crate::data::sheet::Sheet;
use crate::generate::steer::{Steer, lean_all};
use crate::model::config::Task;
use crate::model::performer::{Inputs, Performer, StepInput};

mod echo;

/// The lowest pitch a melody is written in unless asked otherwise (C3).
pub const DEFAULT_MELODY_LOW: u8 = 48;
/// The highest (C6): three octaves around a singer's.
pub const DEFAULT_MELODY_HIGH: u8 = 84;

/// The echo a melody is written with unless asked otherwise ([`MelodySampling::echo`]).
pub const DEFAULT_MELODY_ECHO: f32 = 3.0;

/// How much less (in the echo's units, log-odds) a repeated bar leans towards its first
/// occurrence where the chord under a step is not the one under the step it echoes: songwriters
/// keep a returning phrase where its harmony returns and bend it where the harmony moves. The
/// POP909 training songs' repeated bars match their first occurrence's onsets at log-odds this
/// much lower under another chord (the eval module's `EchoProfile`, printed by `eval --task
/// melody` and checked against the songs by a POP909 test; reports/melody.md).
pub const ECHO_LESS_UNDER_ANOTHER_CHORD: f32 = 1.3;
/// How much less a phrase's last bar (its cadence) leans towards its first occurrence: the
/// training songs' repeats vary their endings (measured as the chords' term is).
pub const ECHO_LESS_AT_A_CADENCE: f32 = 1.1;

/// How a melody's steps are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MelodySampling {
    /// The rhythm's temperature: how a step's kind is drawn (rest, hold or a new note).
    pub temperature: f32,
    /// The temperature of the pitch a new note takes (`None`: the rhythm's). Below the
    /// rhythm's, the notes keep to the likelier pitches (chord tones, steps) without
    /// thinning out.
    pub pitch_temperature: Option<f32>,
    /// Nucleus sampling: draw from the smallest set of classes holding this much probability.
    pub top_p: f32,
    pub seed: u64,
    /// Onsets are drawn from `low ..= high` only (the singer's range).
    pub low: u8,
    pub high: u8,
    /// Whether the model reads the piece's piano and bridge under the melody (else the lanes
    /// alone, as over a plan).
    pub accompaniment: bool,
    /// How strongly a bar the phrase lane marks as a repeat (a melodic phrase's letter heard
    /// before) leans towards what the same step of its first occurrence sang: that step's
    /// class gets `e^echo` times its probability (0: the model alone), less where the songs
    /// vary their repeats (under another chord than the first time, in the phrase's last bar:
    /// [`ECHO_LESS_UNDER_ANOTHER_CHORD`], [`ECHO_LESS_AT_A_CADENCE`]). Phrases that return come
    /// back recognisably, bent where the harmony moves and at their cadence.
    pub echo: f32,
}

impl Default for MelodySampling {
    fn default() -> Self {
        Self {
            temperature: 1.0,
            pitch_temperature: None,
            top_p: 0.95,
            seed: 0,
            low: DEFAULT_MELODY_LOW,
            high: DEFAULT_MELODY_HIGH,
            accompaniment: false,
            echo: DEFAULT_MELODY_ECHO,
        }
    }
}

impl MelodySampling {
    /// Checks the settings, in words.
    pub fn check(&self) -> Result<(), GenerateError> {
        for (what, t) in [
            ("temperature", Some(self.temperature)),
            ("pitch temperature", self.pitch_temperature),
        ] {
            if let Some(t) = t
                && !(t > 0.0 && t <= 5.0)
            {
                return Err(GenerateError::Read(format!(
                    "the melody's {what} must be above 0 and at most 5, not {t}"
                )));
            }
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(GenerateError::Read(format!(
                "top-p must be above 0 and at most 1, not {}",
                self.top_p
            )));
        }
        if !(0.0..=10.0).contains(&self.echo) {
            return Err(GenerateError::Read(format!(
                "the melody's echo must be between 0 and 10, not {}",
                self.echo
            )));
        }
        if self.low > self.high || self.high > 127 {
            return Err(GenerateError::Read(format!(
                "the melody's range {}–{} is empty: give the lowest pitch first",
                self.low, self.high
            )));
        }
        let allowed = (self.low..=self.high).any(|p| class_pitch(onset_of(p)) == Some(p));
        if !allowed {
            return Err(GenerateError::Read(format!(
                "the melody's range {}–{} holds no pitch the model writes ({}–{})",
                self.low,
                self.high,
                crate::data::melody::MELODY_LOW,
                crate::data::melody::MELODY_HIGH
            )));
        }
        Ok(())
    }

    /// Which classes may be drawn after `prev`: a rest, a hold of a sounding note, an onset in
    /// range.
    fn allowed(&self, prev: MelodyStep) -> Vec<bool> {
        (0..MELODY_CLASSES)
            .map(|c| match c {
                REST => true,
                HOLD => prev.pitch > 0,
                c => class_pitch(c).is_some_and(|p| (self.low..=self.high).contains(&p)),
            })
            .collect()
    }
}

impl MelodySampling {
    /// The class of step `s` drawn from the model's `logits` after `prev`: first its kind (a
    /// rest, a hold or a new note, at the rhythm's temperature), then a new note's pitch (at
    /// the pitch temperature, top-p); `lean`, the steering parts' lean on each class (log-odds
    /// added after the temperature: a rest's and a hold's to their kind, a pitch's to its draw,
    /// and a new note's kind leans as its most leaned pitch).
    fn draw(&self, logits: &[f32], prev: MelodyStep, lean: Option<&[f32]>, s: usize) -> usize {
        let allowed = self.allowed(prev);
        let masked: Vec<f32> = logits
            .iter()
            .zip(&allowed)
            .map(|(&l, &ok)| if ok { l } else { f32::NEG_INFINITY })
            .collect();
        let lp = crate::generate::log_softmax_values(&masked);
        let onset_mass: f32 = lp[2..].iter().map(|l| l.exp()).sum();
        let t = self.temperature.max(1e-4);
        let mut kinds = [lp[REST] / t, lp[HOLD] / t, onset_mass.max(1e-30).ln() / t];
        let kind_ok = [allowed[REST], allowed[HOLD], onset_mass > 0.0];
        if let Some(lean) = lean {
            let onset = lean[2..].iter().copied().fold(f32::NEG_INFINITY, f32::max);
            for (kind, by) in kinds.iter_mut().zip([lean[REST], lean[HOLD], onset]) {
                *kind += by;
            }
        }
        let plain = Sampling {
            temperature: 1.0,
            top_p: 1.0,
            seed: self.seed,
            ..Sampling::default()
        };
        let kind = sample_token(&kinds, &kind_ok, plain, uniform(self.seed, s, 0, 2)) as usize;
        if kind < 2 {
            return kind;
        }
        let tp = self.pitch_temperature.unwrap_or(self.temperature).max(1e-4);
        let mut pitches: Vec<f32> = lp.iter().map(|l| l / tp).collect();
        if let Some(lean) = lean {
            pitches.iter_mut().zip(lean).for_each(|(p, by)| *p += by);
        }
        let onsets: Vec<bool> = (0..MELODY_CLASSES).map(|c| c >= 2 && allowed[c]).collect();
        let draw = Sampling {
            top_p: self.top_p,
            ..plain
        };
        sample_token(&pitches, &onsets, draw, uniform(self.seed, s, 1, 2)) as usize
    }
}

fn onset_of(pitch: u8) -> usize {
    crate::data::melody::onset_class(pitch)
}

/// Where a melody generation is.
#[derive(Clone, Debug)]
pub struct MelodyProgress<'a> {
    pub done: usize,
    pub total: usize,
    /// The region's steps written so far.
    pub steps: &'a [MelodyStep],
}

/// The melody's steps over `region` of `sheet` (its grid, rolls and labels on one grid): the
/// steps before the region are the prompt (the sheet's melody there); each step of the region
/// is drawn from `model` under `sampling`. `on_progress` hears every `chunk` steps and may
/// cancel by returning false.
pub async fn write_melody<F, Fut>(
    model: &Performer,
    sheet: &Sheet,
    region: Range<usize>,
    sampling: &MelodySampling,
    chunk: usize,
    device: &Device,
    mut on_progress: F,
) -> Result<Vec<MelodyStep>, GenerateError>
where
    F: FnMut(MelodyProgress<'_>) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    if model.config.task != Task::Melody {
        return Err(GenerateError::WrongTask {
            model: model.config.task,
            wanted: Task::Melody,
        });
    }
    sampling.check()?;
    let labels = &sheet.labels;
    let n = labels.len().min(sheet.rolls.num_steps());
    if region.start >= region.end || region.end > n {
        return Err(GenerateError::Read(format!(
            "the melody's steps {}–{} are not inside the piece's {n}",
            region.start, region.end
        )));
    }
    let prompt = melody_steps(&sheet.rolls.melody, &labels.melody, 0);
    // The steering parts (the echo, where it leans at all).
    let mut echoing = (sampling.echo > 0.0).then(|| echo::Echoing::new(sheet, sampling.echo));
    let levels = model.config.pe.structure_levels().to_vec();
    let structural = model.config.pe.is_structural();
    let context = |s: usize, previous: Option<MelodyStep>| MelodyContext {
        previous,
        accompaniment: sampling.accompaniment.then_some((&sheet.rolls, s, 0)),
    };
    let stepping = model.stepping(device).await?;
    let mut state = model
        .start(sampling.seed, false, device)
        .stepping(&stepping);
    // The prompt in one pass.
    if region.start > 0 {
        let rows = MelodyRows::new(model, sheet, region.start, sampling.accompaniment);
        let (rows, coords) = rows.tensors(device);
        // The prompt's logits are not needed; the state after them is.
        let _ = model.forward(Inputs::Rolls(rows), coords, &mut state, None)?;
    }
    let mut prev = region.start.checked_sub(1).map(|p| prompt[p]);
    let mut out: Vec<MelodyStep> = Vec::with_capacity(region.len());
    // The melody so far, prompt and written, for the echo.
    let mut sung: Vec<MelodyStep> = prompt[..region.start].to_vec();
    let mut row = vec![0f32; MELODY_INPUTS];
    let chunk = chunk.max(1);
    for s in region.clone() {
        write_melody_row(labels, s, context(s, prev), &mut row);
        let mut coords = Vec::new();
        labels.write_coordinates(s, &levels, &mut coords);
        let logits = model
            .step(
                StepInput::Roll(&row),
                structural.then_some(&coords[..]),
                &mut state,
                device,
            )
            .await?;
        let before = prev.unwrap_or_default();
        let now = echo::Now {
            step: s,
            before,
            sung: &sung,
        };
        let mut parts: Vec<&mut dyn Steer<echo::Now>> = Vec::new();
        if let Some(e) = echoing.as_mut() {
            parts.push(e);
        }
        let lean = lean_all(&mut parts, &now, &[0.0; MELODY_CLASSES]);
        let class = sampling.draw(&logits, before, lean.as_deref(), s);
        let step = before.then(class);
        out.push(step);
        sung.push(step);
        prev = Some(step);
        let done = out.len();
        if (done.is_multiple_of(chunk) || done == region.len())
            && !on_progress(MelodyProgress {
                done,
                total: region.len(),
                steps: &out,
            })
            .await
        {
            return Err(GenerateError::Cancelled);
        }
    }
    Ok(out)
}

/// The model's input over steps `0 .. len` of a sheet as its melody stands (each step reading
/// the one before, as teacher forcing does), and the lanes' coordinates where the model reads
/// them: the prompt a melody is written after, and the notes a map of attention is drawn over.
pub struct MelodyRows {
    pub len: usize,
    pub rows: Vec<f32>,
    /// `len × width` structure coordinates (empty for an encoding that reads none).
    pub coords: Vec<f32>,
}

impl MelodyRows {
    /// Steps `0 .. len` of `sheet` for `model`, reading its accompaniment when asked.
    pub fn new(model: &Performer, sheet: &Sheet, len: usize, accompaniment: bool) -> Self {
        let labels = &sheet.labels;
        let melody = melody_steps(&sheet.rolls.melody, &labels.melody, 0);
        let levels = model.config.pe.structure_levels().to_vec();
        let mut rows = vec![0f32; len * MELODY_INPUTS];
        let mut coords = Vec::new();
        for s in 0..len {
            let context = MelodyContext {
                previous: s.checked_sub(1).map(|p| melody[p]),
                accompaniment: accompaniment.then_some((&sheet.rolls, s, 0)),
            };
            let row = &mut rows[s * MELODY_INPUTS..(s + 1) * MELODY_INPUTS];
            write_melody_row(labels, s, context, row);
            if model.config.pe.is_structural() {
                labels.write_coordinates(s, &levels, &mut coords);
            }
        }
        Self { len, rows, coords }
    }

    /// As the model reads them: rows `[1, len, MELODY_INPUTS]`, coordinates `[1, len, width]`.
    pub fn tensors(self, device: &Device) -> (Tensor<3>, Option<Tensor<3>>) {
        let len = self.len;
        let rows = Tensor::<3>::from_data(
            TensorData::new(self.rows, vec![1, len, MELODY_INPUTS]),
            device,
        );
        let coords = (!self.coords.is_empty()).then(|| {
            let width = self.coords.len() / len;
            Tensor::<3>::from_data(TensorData::new(self.coords, vec![1, len, width]), device)
        });
        (rows, coords)
    }
}

/// The watched head's attention rows over the melody of `sheet` as it stands (noise seeded by
/// `seed`, as a melody written with that seed): the map of a melody's notes, drawn after it is
/// written or edited.
pub async fn melody_attention(
    model: &Performer,
    sheet: &Sheet,
    accompaniment: bool,
    seed: u64,
    watch: Watch,
    device: &Device,
    cache: Option<&mut MapFeatures>,
) -> Result<AttentionRows, GenerateError> {
    let n = sheet.labels.len().min(sheet.rolls.num_steps());
    if n == 0 {
        return Err(GenerateError::Read(
            "the piece has no steps to draw a map over".into(),
        ));
    }
    let rows = MelodyRows::new(model, sheet, n, accompaniment);
    let fingerprint = MapFeatures::fingerprint(&[&rows.rows, &rows.coords], &[], seed);
    let build = || {
        let (rows, coords) = rows.tensors(device);
        (Inputs::Rolls(rows), coords)
    };
    super::watched_forward(
        model,
        Task::Melody,
        build,
        seed,
        watch,
        device,
        cache.map(|c| (c, fingerprint)),
    )
    .await
}

/// A region's steps as notes `(pitch, first step, end step)`, the region starting at step
/// `from`: an onset starts a note, holds lengthen it, a rest or the next onset ends it.
pub fn melody_notes(steps: &[MelodyStep], from: usize) -> Vec<(u8, usize, usize)> {
    let mut notes: Vec<(u8, usize, usize)> = Vec::new();
    let mut open: Option<(u8, usize)> = None;
    for (i, step) in steps.iter().enumerate() {
        let s = from + i;
        match (step.class, open) {
            (HOLD, Some(_)) => {}
            _ => {
                if let Some((p, start)) = open.take() {
                    notes.push((p, start, s));
                }
                if let Some(p) = class_pitch(step.class) {
                    open = Some((p, s));
                }
            }
        }
    }
    if let Some((p, start)) = open {
        notes.push((p, start, from + steps.len()));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::melody::onset_class;

    #[test]
    fn steps_become_notes() {
        let o = |p| MelodyStep {
            class: onset_class(p),
            pitch: p,
        };
        let h = |p| MelodyStep {
            class: HOLD,
            pitch: p,
        };
        let r = MelodyStep::default();
        // A hold at the region's start continues nothing of the region's: no note.
        let steps = [h(60), o(60), h(60), r, o(62), o(64), h(64)];
        assert_eq!(
            melody_notes(&steps, 10),
            vec![(60, 11, 13), (62, 14, 15), (64, 15, 17)]
        );
        assert!(melody_notes(&[], 0).is_empty());
    }

    #[test]
    fn sampling_settings_are_checked_in_words() {
        let ok = MelodySampling::default();
        assert!(ok.check().is_ok());
        let bad = MelodySampling {
            low: 80,
            high: 60,
            ..ok
        };
        assert!(
            bad.check()
                .unwrap_err()
                .to_string()
                .contains("lowest pitch first")
        );
        let bad = MelodySampling {
            low: 110,
            high: 120,
            ..ok
        };
        assert!(
            bad.check()
                .unwrap_err()
                .to_string()
                .contains("holds no pitch")
        );
        let bad = MelodySampling {
            temperature: 0.0,
            ..ok
        };
        assert!(bad.check().is_err());
        let allowed = ok.allowed(MelodyStep::default());
        assert!(
            allowed[REST] && !allowed[HOLD],
            "nothing to hold after a rest"
        );
        assert!(allowed[onset_class(60)] && !allowed[onset_class(90)]);
    }
}

#[cfg(test)]
mod writing_tests {
    use burn::tensor::Device;

    use super::echo::Echo;
    use super::*;
    use crate::generate::piece_input;
    use crate::model::config::PerformerConfig;
    use crate::model::pe::{PeConfig, PeKind, StructureLevel};
    use crate::music::chords::Chord;
    use crate::music::fixtures;
    use crate::music::piece::Piece;

    fn model(pe: PeKind) -> Performer {
        let pe = PeConfig::new(pe).with_levels(&StructureLevel::MELODY);
        let config = PerformerConfig::tiny(Task::Melody, 0, pe);
        Performer::new(&config, 5, &Device::flex()).unwrap()
    }

    /// The fixture's 8 bars (melody, piano, I–V–vi–IV) with phrases A4 A4.
    fn sheet() -> Sheet {
        let mut piece = Piece::from_song(&fixtures::song(0, 8), "fixture.mid").unwrap();
        piece.phrases = vec![('A', 4), ('A', 4)];
        piece_input(&piece, piece.plan_grid(), true).unwrap().sheet
    }

    fn write(
        model: &Performer,
        sheet: &Sheet,
        s: MelodySampling,
    ) -> Result<Vec<MelodyStep>, GenerateError> {
        pollster::block_on(write_melody(
            model,
            sheet,
            32..128,
            &s,
            16,
            &Device::flex(),
            |_| async { true },
        ))
    }

    #[test]
    fn a_melody_is_written_in_range_and_its_seed_writes_it_again() {
        let sheet = sheet();
        for pe in [PeKind::None, PeKind::SineSpe, PeKind::Fstripe] {
            let m = model(pe);
            let s = MelodySampling {
                low: 60,
                high: 72,
                echo: 0.0,
                ..Default::default()
            };
            let a = write(&m, &sheet, s).unwrap();
            assert_eq!(a.len(), 96);
            let pitches: Vec<u8> = a.iter().filter_map(|x| class_pitch(x.class)).collect();
            assert!(
                !pitches.is_empty(),
                "{pe:?}: an untrained model still sings"
            );
            assert!(
                pitches.iter().all(|p| (60..=72).contains(p)),
                "{pe:?}: {pitches:?}"
            );
            // Holds continue the note before; a hold never follows a rest.
            for w in a.windows(2) {
                if w[1].class == HOLD {
                    assert!(w[0].pitch > 0 && w[1].pitch == w[0].pitch);
                }
            }
            assert_eq!(write(&m, &sheet, s).unwrap(), a, "{pe:?}: the same seed");
            let b = write(&m, &sheet, MelodySampling { seed: 1, ..s }).unwrap();
            assert_ne!(b, a, "{pe:?}: another seed");
        }
    }

    #[test]
    fn a_repeated_phrase_echoes_its_first_occurrence() {
        let sheet = sheet();
        let m = model(PeKind::SineSpe);
        let s = MelodySampling {
            echo: 10.0,
            top_p: 1.0,
            ..Default::default()
        };
        let steps = write(&m, &sheet, s).unwrap();
        // Steps 32..128 written: bars 4–7 (steps 64..128) repeat bars 0–3, whose first two
        // bars are the fixture's melody and the next two were written.
        let mut all = melody_steps(&sheet.rolls.melody, &sheet.labels.melody, 0)[..32].to_vec();
        all.extend(&steps);
        let same = (64..128)
            .filter(|&s| all[s].class == all[s - 64].class)
            .count();
        assert!(same >= 60, "{same} of 64 steps echo their first occurrence");
        let free = write(&m, &sheet, MelodySampling { echo: 0.0, ..s }).unwrap();
        let mut all = melody_steps(&sheet.rolls.melody, &sheet.labels.melody, 0)[..32].to_vec();
        all.extend(&free);
        let same_free = (64..128)
            .filter(|&s| all[s].class == all[s - 64].class)
            .count();
        assert!(same_free < same, "without the echo: {same_free}");
    }

    #[test]
    fn the_echo_part_leans_the_class_its_first_occurrence_sang() {
        use super::echo::{Echoing, Now};
        use crate::generate::steer::Steer;
        let sheet = sheet();
        let bar = |b: usize| sheet.grid.bar_steps(b);
        let (first, repeat) = (bar(0), bar(4));
        // The first A sang a note at its first step and held it at its second.
        let note = MelodyStep::default().then(onset_of(64));
        let mut sung = vec![MelodyStep::default(); repeat.start];
        sung[first.start] = note;
        sung[first.start + 1] = note.then(HOLD);
        let mut echo = Echoing::new(&sheet, 3.0);
        let lean_at = |echo: &mut Echoing, step, before| {
            let mut lean = [0.0; MELODY_CLASSES];
            let now = Now {
                step,
                before,
                sung: &sung,
            };
            echo.lean(&now, &mut lean).then_some(lean)
        };
        let onset = lean_at(&mut echo, repeat.start, MelodyStep::default()).unwrap();
        assert_eq!(onset[onset_of(64)], 3.0, "the note sung there");
        assert_eq!(onset.iter().filter(|&&l| l != 0.0).count(), 1);
        // Its hold continues a note that sounds; over a rest it leans to a rest.
        let held = lean_at(&mut echo, repeat.start + 1, note).unwrap();
        assert_eq!(held[HOLD], 3.0);
        let rested = lean_at(&mut echo, repeat.start + 1, MelodyStep::default()).unwrap();
        assert_eq!((rested[HOLD], rested[REST]), (0.0, 3.0));
        // The first A echoes nothing, and no strength leans nowhere.
        assert!(lean_at(&mut echo, first.start, MelodyStep::default()).is_none());
        let mut none = Echoing::new(&sheet, 0.0);
        assert!(lean_at(&mut none, repeat.start, MelodyStep::default()).is_none());
    }

    #[test]
    fn a_repeat_leans_less_where_its_harmony_moves_and_at_its_cadence() {
        let mut sheet = sheet();
        let bars = |b: usize| sheet.grid.bar_steps(b);
        let (first, cadence, repeat) = (bars(1), bars(7), bars(5));
        // Bar 5 (the second A's second bar) under another chord than bar 1's.
        for s in repeat.clone() {
            sheet.labels.chord[s] = sheet.labels.chord[s].map(|c| Chord {
                root: (c.root + 2) % 12,
                ..c
            });
        }
        let echo = Echo::new(&sheet);
        assert_eq!(echo.source(first.start), None, "the first A echoes nothing");
        assert_eq!(echo.source(bars(4).start + 3), Some((3, 0.0)));
        let moved = echo.source(repeat.start + 1).unwrap();
        assert_eq!(moved, (first.start + 1, ECHO_LESS_UNDER_ANOTHER_CHORD));
        let (e, less) = echo.source(cadence.start).unwrap();
        assert_eq!((e, less), (bars(3).start, ECHO_LESS_AT_A_CADENCE));
        // Written with a moderate echo, bar 5 keeps fewer of bar 1's steps than bar 4 of bar 0's.
        let m = model(PeKind::SineSpe);
        let kept = |from: Range<usize>, to: Range<usize>| {
            let mut n = 0;
            for seed in 0..6 {
                let s = MelodySampling {
                    seed,
                    echo: 3.0,
                    top_p: 1.0,
                    ..Default::default()
                };
                let steps = write(&m, &sheet, s).unwrap();
                let mut all =
                    melody_steps(&sheet.rolls.melody, &sheet.labels.melody, 0)[..32].to_vec();
                all.extend(&steps);
                n += from
                    .clone()
                    .zip(to.clone())
                    .filter(|&(a, b)| all[a].class == all[b].class)
                    .count();
            }
            n
        };
        let (same, other) = (kept(bars(0), bars(4)), kept(first, repeat));
        assert!(
            same > other,
            "kept {same} under the same chords, {other} under others"
        );
    }

    #[test]
    fn a_melody_is_cancelled_or_refused_in_words() {
        let sheet = sheet();
        let m = model(PeKind::SineSpe);
        let s = MelodySampling::default();
        let cancelled = pollster::block_on(write_melody(
            &m,
            &sheet,
            32..128,
            &s,
            16,
            &Device::flex(),
            |p| {
                let go_on = p.done < 32;
                async move { go_on }
            },
        ));
        assert_eq!(cancelled, Err(GenerateError::Cancelled));
        let past = pollster::block_on(write_melody(
            &m,
            &sheet,
            100..400,
            &s,
            16,
            &Device::flex(),
            |_| async { true },
        ));
        assert!(
            past.unwrap_err()
                .to_string()
                .contains("not inside the piece")
        );
        let config = PerformerConfig::tiny(Task::Accompaniment, 0, PeConfig::new(PeKind::SineSpe));
        let other = Performer::new(&config, 5, &Device::flex()).unwrap();
        let wrong = pollster::block_on(write_melody(
            &other,
            &sheet,
            0..16,
            &s,
            16,
            &Device::flex(),
            |_| async { true },
        ));
        assert!(matches!(wrong, Err(GenerateError::WrongTask { .. })));
    }
}
