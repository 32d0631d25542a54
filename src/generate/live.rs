//! Live accompaniment: the piano for a melody while it is being played, a sixteenth at a time,
//! each step decided before it sounds from what has been heard by then.
//!
//! The player's keys arrive as they are pressed and released ([`Live::note_on`],
//! [`Live::note_off`], in steps of the grid, fractional); [`Live::decide`] writes the piano's
//! steps up to a given one through the model's recurrent form (constant cost a step). A key
//! still down counts as sounding on (as heard, it has not ended). A model trained with
//! `melody_lag` 1 reads, at step `t`, the melody of step `t − 1` — all of which has been heard
//! when `t` is decided; a model without it reads step `t` as heard so far (held keys, and any
//! note played early), so it never hears a melody note's onset in time: what that costs is
//! measured by `eval --live`.
//!
//! Chords: where the chord lane was planned its chords are played; elsewhere a causal
//! harmonizer (one that reads only up to the current beat) decides each beat's chord as the
//! beat starts, from the melody heard so far (keys held on are taken to last the beat), with the
//! same harmonic-rhythm decision as a file's causal reading ([`causal_step`]).

use std::ops::Range;

use burn::tensor::{Device, Tensor, TensorData};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::GenerateError;
use super::accompany::AccompanimentInput;
use super::piano::{PianoSampling, draw_step};
use super::steer::{Steer, lean_all};
use super::texture::{PianoNow, TextureEcho, TextureSteer};
use crate::data::beats::{BeatInputs, BeatReader, add_beat_chroma};
use crate::data::example::{RowAt, write_row};
use crate::data::features::LabelFeatures;
use crate::model::config::Task;
use crate::model::pe::StructureLevel;
use crate::model::performer::{Inputs, Performer, State, StepInput};
use crate::music::chords::Chord;
use crate::music::harmony::decode::{HarmonyDecode, causal_step, log_softmax_rows};
use crate::music::harmony::{BeatPlaces, CHORD_CLASSES, chord_class, class_chord};
use crate::music::labels::{StepLabels, sounding_pitch};
use crate::music::pedal::model::PedalStream;
use crate::music::roll::{PITCHES, PianoRoll};
use crate::music::texture::echo::sources;

/// A causal harmonizer and how its probabilities become chords.
#[derive(Clone, Copy)]
pub struct LiveChords<'a> {
    pub model: &'a Performer,
    pub decode: &'a HarmonyDecode,
    /// Let a chord change a beat after a bar line or half bar as freely as on it. A beat's
    /// chord is decided as the beat starts, before its melody is heard: a change the melody
    /// makes on a bar line shows only on the beat after it, where the harmonic rhythm of files
    /// would hold the old chord until the next half bar.
    pub late_changes: bool,
}

impl<'a> LiveChords<'a> {
    /// `model` decoded with `decode`, changes allowed a beat late (what the page plays).
    pub fn new(model: &'a Performer, decode: &'a HarmonyDecode) -> Self {
        Self {
            model,
            decode,
            late_changes: true,
        }
    }
}

/// One decided step: the piano's notes that start at it (a pitch already sounding is struck
/// again), the pitches that sounded at the step before and stop at it (struck-again ones
/// included), where a beat starts whose chord was decided live, that chord, and the moves of
/// the piano's sustain pedal the step starts ([`Live::pedal`]: `(tick, value)` in order; a
/// change is a lift and a press a 64th later).
#[derive(Clone, Debug, PartialEq)]
pub struct LiveStep {
    pub step: usize,
    pub onsets: Vec<u8>,
    pub ends: Vec<u8>,
    pub chord: Option<Option<Chord>>,
    pub pedal: Vec<(u64, u8)>,
}

struct Harmony {
    state: State,
    inputs: BeatInputs,
    places: BeatPlaces,
    /// `prefix[b]`: the melody and bridge chroma summed over beats `0..b` (beats heard).
    prefix: Vec<[f32; 12]>,
    /// The chord class of the beat before (the harmonic rhythm's decision needs it).
    before: Option<usize>,
}

/// A live accompaniment in progress.
pub struct Live {
    /// The grid, the melody as heard, the bridge, the piano written so far, the lanes (chords
    /// planned or decided) and the chords per beat.
    pub input: AccompanimentInput,
    /// Per beat: the chord lane planned it (else the harmonizer decides it live).
    planned: Vec<bool>,
    /// The first live step, and the next step to decide.
    pub from: usize,
    next: usize,
    /// Per pitch: the step a key still down went down at, and the last step written as
    /// sounding for it.
    held: Vec<Option<(usize, usize)>>,
    state: State,
    harmony: Option<Harmony>,
    sampling: PianoSampling,
    rng: StdRng,
    width: usize,
    levels: Option<Vec<StructureLevel>>,
    /// The texture echo leaning each step towards the step of the phrase's first occurrence
    /// it answers (in the take or the piano before it; [`Self::set_texture`]), and the take's
    /// density of the steps it leans where that is kept per song.
    texture: Option<TextureSteer<TextureEcho>>,
    /// The piano's sustain pedal, decided with its notes step by step (a causal pedal model);
    /// `None`: none while the take plays.
    pub pedal: Option<PedalStream>,
    /// For a model that reads the reference lane: the step each step answers (the phrase
    /// lane's repeats, fixed for the take); empty otherwise.
    answered: Vec<Option<usize>>,
}

/// Step `t`'s answered step in `answered` and whether the chord under the two differs in
/// `labels` as they stand (a take decides its open beats' chords as it goes).
fn answer_at(answered: &[Option<usize>], labels: &StepLabels, t: usize) -> Option<(usize, bool)> {
    let s = answered.get(t).copied().flatten()?;
    Some((s, labels.chord.get(t) != labels.chord.get(s)))
}

impl Live {
    /// Starts at step `from` of `input` (its grid already holds the room to play into): the
    /// melody from there on is what will be played (cleared now), the piano before it is
    /// `given`'s (read in one parallel pass, so the live piano continues from it), `planned`
    /// says per beat whether the chord lane holds a chord to play (`input`'s chord there),
    /// and `chords`, when given, decides the others live.
    #[allow(clippy::too_many_arguments)]
    pub async fn start(
        model: &Performer,
        chords: Option<LiveChords<'_>>,
        mut input: AccompanimentInput,
        planned: Vec<bool>,
        given: &PianoRoll,
        from: usize,
        sampling: PianoSampling,
        device: &Device,
    ) -> Result<Live, GenerateError> {
        sampling.check()?;
        let c = &model.config;
        if !c.is_autoregressive() {
            return Err(GenerateError::Read(
                "live playing needs an accompaniment model that writes step by step (such as \
                 the default): this one writes the whole piece at once"
                    .into(),
            ));
        }
        let len = input.sheet.grid.num_steps();
        let spb = input.sheet.grid.steps_per_beat.max(1);
        if from >= len {
            return Err(GenerateError::Read(
                "there is no room to play into after the take's start".into(),
            ));
        }
        if !from.is_multiple_of(spb) {
            return Err(GenerateError::Read("a live take starts on a beat".into()));
        }
        if let Some(h) = chords
            && (h.model.config.task != Task::Harmonization || !h.model.config.is_causal())
        {
            return Err(GenerateError::Read(
                "live chords need a causal harmonizer (one that reads only up to the current \
                 beat), such as harmonizer-causal"
                    .into(),
            ));
        }
        // The take replaces the melody from its start; the piano there is to be written.
        for t in from..len {
            for p in 0..PITCHES {
                input.sheet.rolls.melody.set(t, p, false, false, 0);
            }
            input.sheet.labels.melody[t] = 0;
        }
        let mut piano = given.clone();
        if piano.num_steps != len {
            let mut fitted = PianoRoll::new(len);
            for t in 0..len.min(piano.num_steps) {
                for p in 0..PITCHES {
                    fitted.set(t, p, piano.onset(t, p), piano.sustain(t, p), 0);
                }
            }
            piano = fitted;
        }
        for t in from..len {
            for p in 0..PITCHES {
                piano.set(t, p, false, false, 0);
            }
        }
        input.sheet.rolls.piano = piano;
        let mut planned = planned;
        planned.resize(input.sheet.grid.num_beats(), false);
        let width = c.input_dim;
        let levels =
            c.pe.is_structural()
                .then(|| c.pe.structure_levels().to_vec());
        let stepping = model.stepping(device).await?;
        let mut state = model
            .start(sampling.seed, false, device)
            .stepping(&stepping);
        let answered = match c.conditioning {
            Some(cond) if cond.reference => sources(&input.sheet.labels),
            _ => Vec::new(),
        };
        // What comes before the take is known: one parallel pass reads it.
        if from > 0 {
            let mut x = vec![0f32; from * width];
            let labels = &input.sheet.labels;
            for (t, row) in x.chunks_mut(width).enumerate() {
                let at = RowAt::song(t, answer_at(&answered, labels, t));
                write_row(&input.sheet.rolls, labels, at, c.conditioning, row);
            }
            let inputs = Tensor::<3>::from_data(TensorData::new(x, vec![1, from, width]), device);
            let coords = levels.as_ref().map(|l| {
                let values = input.sheet.labels.slice(0..from).coordinates(l);
                let dims = values.len() / from;
                Tensor::<3>::from_data(TensorData::new(values, vec![1, from, dims]), device)
            });
            model.forward(Inputs::Rolls(inputs), coords, &mut state, None)?;
        }
        let harmony = match chords {
            Some(h) => Some(Harmony::start(h, &input, from / spb, sampling.seed, device).await?),
            None => None,
        };
        Ok(Live {
            input,
            planned,
            from,
            next: from,
            held: vec![None; PITCHES],
            state,
            harmony,
            sampling,
            rng: StdRng::seed_from_u64(sampling.seed ^ 0x11FE),
            width,
            levels,
            texture: None,
            pedal: None,
            answered,
        })
    }

    /// Leans each step the take decides from now towards the step it answers (`None`: no
    /// echo), the density of the leaned steps kept from here where the echo keeps it per song.
    pub fn set_texture(&mut self, echo: Option<TextureEcho>) {
        self.texture = echo.map(TextureSteer::new);
    }

    /// Steps in the grid.
    pub fn len(&self) -> usize {
        self.input.sheet.grid.num_steps()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next step to decide.
    pub fn next(&self) -> usize {
        self.next
    }

    fn quantise(&self, at: f64) -> usize {
        let last = self.len().saturating_sub(1);
        (at.max(0.0).round() as usize).clamp(self.from.min(last), last)
    }

    /// A key went down at `at` (in steps of the grid): the melody has a note from the
    /// sixteenth nearest to it, sounding while the key is held.
    pub fn note_on(&mut self, pitch: u8, at: f64) {
        let p = pitch as usize;
        if p >= PITCHES || self.is_empty() {
            return;
        }
        if at < self.from as f64 - 0.5 {
            // Before the take (the count-in): not part of it, as the page's take drops it.
            return;
        }
        self.note_off(pitch, at);
        let q = self.quantise(at);
        self.input.sheet.rolls.melody.set(q, p, true, true, 0);
        self.held[p] = Some((q, q));
    }

    /// A key came up at `at`: its note ends at the sixteenth nearest to it (a note lasts a
    /// sixteenth at least), and what was written as sounding on after that is taken back.
    pub fn note_off(&mut self, pitch: u8, at: f64) {
        let p = pitch as usize;
        let Some((q, _)) = self.held.get_mut(p).and_then(Option::take) else {
            return;
        };
        let len = self.len();
        let end = self.quantise(at).max(q + 1).min(len);
        let melody = &mut self.input.sheet.rolls.melody;
        for s in q..end {
            let onset = s == q;
            melody.set(s, p, onset, true, 0);
        }
        let mut s = end;
        while s < len && melody.sustain(s, p) && !melody.onset(s, p) {
            melody.set(s, p, false, false, 0);
            s += 1;
        }
    }

    /// Writes the keys still down as sounding through step `until` (as heard: they go on).
    fn hold_through(&mut self, until: usize) {
        let until = until.min(self.len().saturating_sub(1));
        for p in 0..PITCHES {
            if let Some((q, done)) = self.held[p]
                && done < until
            {
                for s in done.max(q) + 1..=until {
                    self.input.sheet.rolls.melody.set(s, p, false, true, 0);
                }
                self.held[p] = Some((q, until));
            }
        }
    }

    /// Decides every step from the next one up to `step` (in order; none when `step` is
    /// already decided), each from the melody heard so far.
    pub async fn decide(
        &mut self,
        model: &Performer,
        chords: Option<LiveChords<'_>>,
        step: usize,
        device: &Device,
    ) -> Result<Vec<LiveStep>, GenerateError> {
        let mut out = Vec::new();
        let spb = self.input.sheet.grid.steps_per_beat.max(1);
        let conditioning = model.config.conditioning;
        let end = (step + 1).min(self.len());
        while self.next < end {
            let t = self.next;
            let mut chord = None;
            if t.is_multiple_of(spb) {
                // A beat starts: the keys down are taken to last it, and its chord is decided.
                let beat = t / spb;
                self.hold_through(t + spb - 1);
                chord = self.beat_chord(chords, beat, device).await?;
            } else {
                self.hold_through(t);
            }
            for s in t..(t - t % spb + spb).min(self.len()) {
                self.input.sheet.labels.melody[s] =
                    sounding_pitch(&self.input.sheet.rolls.melody, s);
            }
            let mut row = vec![0f32; self.width];
            let labels = &self.input.sheet.labels;
            let at = RowAt::song(t, answer_at(&self.answered, labels, t));
            write_row(&self.input.sheet.rolls, labels, at, conditioning, &mut row);
            let coords = self.levels.as_ref().map(|l| {
                let mut c = Vec::new();
                self.input.sheet.labels.write_coordinates(t, l, &mut c);
                c
            });
            let values = model
                .step(
                    StepInput::Roll(&row),
                    coords.as_deref(),
                    &mut self.state,
                    device,
                )
                .await?;
            let (on, sus) = values.split_at(PITCHES);
            let chords_now = &self.input.sheet.labels.chord;
            let piano = &mut self.input.sheet.rolls.piano;
            let rng = &mut self.rng;
            let now = PianoNow {
                written: piano,
                chords: Some(&chords_now[..]),
                step: t,
                sampling: &self.sampling,
                onsets: on,
            };
            let mut parts: Vec<&mut dyn Steer<PianoNow>> = Vec::new();
            if let Some(x) = self.texture.as_mut() {
                parts.push(x);
            }
            let lean = lean_all(&mut parts, &now, &[0.0; PITCHES]);
            draw_step(
                piano,
                t,
                on,
                sus,
                &self.sampling,
                lean.as_deref(),
                &mut |_, _| rng.random::<f32>(),
            );
            let onsets = (0..PITCHES).filter(|&p| piano.onset(t, p)).map(|p| p as u8);
            let ends = (0..PITCHES)
                .filter(|&p| t > 0 && piano.sustain(t - 1, p))
                .filter(|&p| piano.onset(t, p) || !piano.sustain(t, p))
                .map(|p| p as u8);
            out.push(LiveStep {
                step: t,
                onsets: onsets.collect(),
                ends: ends.collect(),
                chord,
                pedal: Vec::new(),
            });
            self.next += 1;
        }
        self.pedal_through(&mut out);
        Ok(out)
    }

    /// The pedal's moves over the steps just decided (`out`), each given to its step.
    fn pedal_through(&mut self, out: &mut [LiveStep]) {
        let Some(stream) = self.pedal.as_mut() else {
            return;
        };
        let sheet = &self.input.sheet;
        let rolls = (&sheet.rolls.piano, &sheet.rolls.melody);
        let events = stream.advance(&sheet.grid, &sheet.labels, rolls, self.next);
        for (step, tick, value) in events {
            if let Some(s) = out.iter_mut().find(|s| s.step == step) {
                s.pedal.push((tick, value));
            }
        }
    }

    /// The chord of `beat`: the planned one, else the harmonizer's decision from what was
    /// heard (returned, so the page can show it); the harmonizer reads every beat either way.
    async fn beat_chord(
        &mut self,
        chords: Option<LiveChords<'_>>,
        beat: usize,
        device: &Device,
    ) -> Result<Option<Option<Chord>>, GenerateError> {
        let (Some(h), Some(harmony)) = (chords, self.harmony.as_mut()) else {
            return Ok(None);
        };
        let log_probs = harmony.read_beat(h, &self.input, beat, device).await?;
        let planned = self.planned.get(beat).copied().unwrap_or(false);
        let class = if planned {
            chord_class(self.input.chords.get(beat).copied().flatten())
        } else {
            let mut slot = harmony.places.slot(beat);
            if h.late_changes && beat > 0 {
                // Slots run from the likeliest place of a change (0, the bar line) down.
                slot = slot.min(harmony.places.slot(beat - 1));
            }
            causal_step(&log_probs, slot, h.decode, harmony.before)
        };
        harmony.before = Some(class);
        if planned {
            return Ok(None);
        }
        let chord = class_chord(class);
        let spb = self.input.sheet.grid.steps_per_beat.max(1);
        if let Some(c) = self.input.chords.get_mut(beat) {
            *c = chord;
        }
        let steps = beat * spb..((beat + 1) * spb).min(self.input.sheet.labels.len());
        for s in steps {
            self.input.sheet.labels.chord[s] = chord;
        }
        Ok(Some(chord))
    }

    /// The piano written over `steps`.
    pub fn piano(&self) -> &PianoRoll {
        &self.input.sheet.rolls.piano
    }

    /// The chords per beat as played (planned or decided).
    pub fn chords(&self) -> &[Option<Chord>] {
        &self.input.chords
    }

    /// Whether open bars get their chords live (a harmonizer was given).
    pub fn decides_chords(&self) -> bool {
        self.harmony.is_some()
    }

    /// Whether the chord lane planned `beat`'s chord (else it is decided live, or none).
    pub fn planned(&self, beat: usize) -> bool {
        self.planned.get(beat).copied().unwrap_or(false)
    }

    /// The steps decided so far.
    pub fn decided(&self) -> Range<usize> {
        self.from..self.next
    }
}

impl Harmony {
    async fn start(
        h: LiveChords<'_>,
        input: &AccompanimentInput,
        from_beat: usize,
        seed: u64,
        device: &Device,
    ) -> Result<Harmony, GenerateError> {
        let model = h.model;
        let inputs = model.config.beat_inputs();
        let stepping = model.stepping(device).await?;
        let mut state = model.start(seed, false, device).stepping(&stepping);
        let (melody, bridge, labels) = (
            &input.sheet.rolls.melody,
            &input.sheet.rolls.bridge,
            &input.sheet.labels,
        );
        let places = BeatPlaces::from_labels(labels);
        let mut prefix = vec![[0f32; 12]];
        let mut sum = [0f32; 12];
        for b in 0..from_beat {
            add_beat_chroma(melody, bridge, labels, b, &mut sum);
            prefix.push(sum);
        }
        let mut places = places;
        if from_beat > 0 {
            let width = inputs.width();
            let reader = BeatReader::with_parts(melody, bridge, labels, places, inputs, prefix);
            let mut x = vec![0f32; from_beat * width];
            for (b, row) in x.chunks_mut(width).enumerate() {
                reader.write(b, 0, row);
            }
            (places, prefix) = reader.into_parts();
            let coords = model.config.pe.is_structural().then(|| {
                let spb = labels.steps_per_beat.max(1);
                let beats = crate::data::beats::beat_labels(&labels.slice(0..from_beat * spb));
                let values = beats.coordinates(model.config.pe.structure_levels());
                let dims = values.len() / from_beat;
                Tensor::<3>::from_data(TensorData::new(values, vec![1, from_beat, dims]), device)
            });
            let x = Tensor::<3>::from_data(TensorData::new(x, vec![1, from_beat, width]), device);
            model.forward(Inputs::Rolls(x), coords, &mut state, None)?;
        }
        let before = from_beat
            .checked_sub(1)
            .map(|b| chord_class(input.chords.get(b).copied().flatten()));
        Ok(Harmony {
            state,
            inputs,
            places,
            prefix,
            before,
        })
    }

    /// The harmonizer's log-probabilities of every chord class at `beat`, reading the beat as
    /// heard (its chroma summed now, then taken back: the beat is not over).
    async fn read_beat(
        &mut self,
        h: LiveChords<'_>,
        input: &AccompanimentInput,
        beat: usize,
        device: &Device,
    ) -> Result<Vec<f32>, GenerateError> {
        let (melody, bridge, labels) = (
            &input.sheet.rolls.melody,
            &input.sheet.rolls.bridge,
            &input.sheet.labels,
        );
        // Beats before this one are over: their sums are final.
        while self.prefix.len() <= beat {
            let b = self.prefix.len() - 1;
            let mut sum = *self.prefix.last().expect("prefix starts with zeros");
            add_beat_chroma(melody, bridge, labels, b, &mut sum);
            self.prefix.push(sum);
        }
        let mut sum = self.prefix[beat];
        add_beat_chroma(melody, bridge, labels, beat, &mut sum);
        self.prefix.push(sum);
        let width = self.inputs.width();
        let mut row = vec![0f32; width];
        let reader = BeatReader::with_parts(
            melody,
            bridge,
            labels,
            std::mem::take(&mut self.places),
            self.inputs,
            std::mem::take(&mut self.prefix),
        );
        reader.write(beat, 0, &mut row);
        (self.places, self.prefix) = reader.into_parts();
        self.prefix.truncate(beat + 1);
        let coords = h.model.config.pe.is_structural().then(|| {
            // A harmonizer reads a beat's first step; every level (position in sixteenths,
            // time in beats) comes out as `beat_labels` gives it there.
            let mut c = Vec::new();
            let step = beat * labels.steps_per_beat.max(1);
            labels.write_coordinates(step, h.model.config.pe.structure_levels(), &mut c);
            c
        });
        let logits = h
            .model
            .step(
                StepInput::Roll(&row),
                coords.as_deref(),
                &mut self.state,
                device,
            )
            .await?;
        debug_assert_eq!(logits.len(), CHORD_CLASSES);
        Ok(log_softmax_rows(&logits))
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
