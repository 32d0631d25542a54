//! A texture donor: bars of a piano part a person chose ("play like these bars"), or a named
//! texture of the gallery (`settings/textures.json`, drawn from training songs by
//! `pianoformer textures`). An accompaniment asked to follow it plays the donor's rhythm in
//! the donor's registers over its own chords and melody (`generate::texture::Answers::donor`):
//! the target bars cycle through the donor's bars, step for step within a bar.
//!
//! As JSON (the page's and the CLI's options, the gallery):
//! `{"name": "arpeggio", "bars": [16, 16], "notes": [[48, 0, 4], …], "chords": ["C", "Am"]}`:
//! each bar's steps ([`STEPS_PER_BEAT`] a beat), the notes as (pitch, first step, steps), and
//! a chord cell per bar as the chord lane writes them ("" for none).

use serde::{Deserialize, Serialize};

use crate::music::chords::Chord;
use crate::music::piece::Piece;
use crate::music::roll::{PITCHES, PianoRoll};
use crate::music::tokens::STEPS_PER_BEAT;

/// Most bars a donor holds.
pub const MAX_DONOR_BARS: usize = 32;
/// Most steps in one of its bars (16 beats).
pub const MAX_BAR_STEPS: usize = 16 * STEPS_PER_BEAT;
/// Most notes it holds.
pub const MAX_DONOR_NOTES: usize = 8192;

/// Bars of a piano part to play like.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Donor {
    /// What to call it ("arpeggio", "bars 9-12 of song.mid").
    pub name: String,
    /// Steps of each bar, in order.
    pub bars: Vec<usize>,
    /// Its notes: pitch, first step (from its first bar's start), steps it lasts.
    pub notes: Vec<(u8, usize, usize)>,
    /// The chord cell of each bar ("C", "C G", "" for none).
    pub chords: Vec<String>,
    /// Where it comes from, in words (a gallery texture's song and bars).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl Donor {
    /// Bars `bars` (from 0, the end excluded) of the piano part of `piece`: its generated
    /// track's notes, else the pianist's, with the chord lane's cells of those bars.
    pub fn from_piece(piece: &Piece, bars: std::ops::Range<usize>) -> Result<Self, String> {
        let grid = piece.grid(|_| true);
        let count = grid.num_bars();
        if bars.is_empty() || bars.end > count {
            return Err(format!(
                "bars {}-{} are not in the piece ({count} bars)",
                bars.start + 1,
                bars.end
            ));
        }
        if bars.len() > MAX_DONOR_BARS {
            return Err(format!(
                "a texture is at most {MAX_DONOR_BARS} bars ({} asked)",
                bars.len()
            ));
        }
        let roll = piece.piano_roll(&grid);
        let from = grid.bar_steps(bars.start).start;
        let to = grid.bar_steps(bars.end - 1).end;
        let lens: Vec<usize> = bars.clone().map(|b| grid.bar_steps(b).len()).collect();
        if let Some(&long) = lens.iter().find(|&&l| l > MAX_BAR_STEPS) {
            return Err(format!(
                "a bar of {} beats is too long for a texture",
                long / STEPS_PER_BEAT
            ));
        }
        let chords = bars
            .clone()
            .map(|b| piece.chords.get(b).cloned().unwrap_or_default())
            .collect();
        let name = format!("bars {}-{} of {}", bars.start + 1, bars.end, piece.name);
        let donor = Self::of_roll(name, &roll, from..to, lens, chords);
        if donor.notes.is_empty() {
            return Err(format!(
                "bars {}-{} hold no piano notes to take a texture from",
                bars.start + 1,
                bars.end
            ));
        }
        Ok(donor)
    }

    /// The notes of `roll` that start in `steps` (cut at its end), in bars of `bars` steps with
    /// the chord cells `chords`.
    pub fn of_roll(
        name: String,
        roll: &PianoRoll,
        steps: std::ops::Range<usize>,
        bars: Vec<usize>,
        chords: Vec<String>,
    ) -> Self {
        let mut notes = Vec::new();
        for t in steps.clone() {
            for p in 0..PITCHES {
                if !roll.onset(t, p) {
                    continue;
                }
                let mut end = t + 1;
                while end < steps.end && roll.sustain(end, p) && !roll.onset(end, p) {
                    end += 1;
                }
                notes.push((p as u8, t - steps.start, end - t));
            }
        }
        Self {
            name,
            bars,
            notes,
            chords,
            source: None,
        }
    }

    /// Says in words what is wrong with it (from JSON, it may hold anything).
    pub fn check(&self) -> Result<(), String> {
        let name = &self.name;
        if self.bars.is_empty() || self.bars.len() > MAX_DONOR_BARS {
            return Err(format!(
                "the texture \"{name}\" has {} bars (1 to {MAX_DONOR_BARS})",
                self.bars.len()
            ));
        }
        if let Some(b) = self.bars.iter().position(|&l| l == 0 || l > MAX_BAR_STEPS) {
            return Err(format!(
                "bar {} of the texture \"{name}\" has {} steps (1 to {MAX_BAR_STEPS})",
                b + 1,
                self.bars[b]
            ));
        }
        if self.notes.is_empty() || self.notes.len() > MAX_DONOR_NOTES {
            return Err(format!(
                "the texture \"{name}\" has {} notes (1 to {MAX_DONOR_NOTES})",
                self.notes.len()
            ));
        }
        let steps = self.steps();
        if let Some(&(p, start, len)) = self
            .notes
            .iter()
            .find(|&&(p, start, len)| p as usize >= PITCHES || start >= steps || len == 0)
        {
            return Err(format!(
                "the texture \"{name}\" has a note out of its bars (pitch {p}, step {start}, {len} steps; it has {steps} steps)"
            ));
        }
        if self.chords.len() > self.bars.len() {
            return Err(format!(
                "the texture \"{name}\" has {} chord cells for {} bars",
                self.chords.len(),
                self.bars.len()
            ));
        }
        self.step_chords().map(|_| ())
    }

    /// Its steps, all bars together.
    pub fn steps(&self) -> usize {
        self.bars.iter().sum()
    }

    /// Each bar's first step.
    pub fn bar_starts(&self) -> Vec<usize> {
        self.bars
            .iter()
            .scan(0, |at, &l| {
                let s = *at;
                *at += l;
                Some(s)
            })
            .collect()
    }

    /// Its piano roll (notes past its last step cut there).
    pub fn roll(&self) -> PianoRoll {
        let n = self.steps();
        let mut roll = PianoRoll::new(n);
        for &(p, start, len) in &self.notes {
            let p = p as usize;
            if p >= PITCHES || start >= n {
                continue;
            }
            roll.set(start, p, true, true, 0);
            for t in start + 1..(start + len.max(1)).min(n) {
                roll.set(t, p, roll.onset(t, p), true, 0);
            }
        }
        roll
    }

    /// The chord under each of its steps (a cell's chords share its bar's beats evenly, as in
    /// the chord lane).
    pub fn step_chords(&self) -> Result<Vec<Option<Chord>>, String> {
        let mut out = Vec::with_capacity(self.steps());
        for (b, &len) in self.bars.iter().enumerate() {
            let cell = self.chords.get(b).map_or("", String::as_str);
            let chords = cell
                .split_whitespace()
                .map(Chord::parse_any)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("bar {} of the texture \"{}\": {e}", b + 1, self.name))?;
            let beats = len.div_ceil(STEPS_PER_BEAT);
            let per_beat = crate::music::piece::spread(&chords, beats);
            out.extend((0..len).map(|i| per_beat[i / STEPS_PER_BEAT]));
        }
        Ok(out)
    }
}

/// `pitch` played over chord `from` re-voiced to chord `to`, as a pianist carries a figure to
/// another chord: a chord tone becomes the same degree of `to` (root to root, third to third; a
/// degree `to` lacks, such as a seventh, its last tone), a tone outside `from` moves with the
/// roots; either to the nearest pitch of its new class (a tritone away at most, downwards on a
/// tie). As it was without both chords.
pub fn revoice(pitch: u8, from: Option<Chord>, to: Option<Chord>) -> u8 {
    let (Some(from), Some(to)) = (from, to) else {
        return pitch;
    };
    if from == to {
        return pitch;
    }
    let pc = pitch % 12;
    let from_tones: Vec<u8> = from.pitch_classes().collect();
    let to_tones: Vec<u8> = to.pitch_classes().collect();
    let target = match from_tones.iter().position(|&t| t == pc) {
        Some(k) => to_tones[k.min(to_tones.len() - 1)],
        None => (pc + 12 + to.root - from.root) % 12,
    };
    // The shift to the nearest pitch of class `target`, in -6..=5.
    let shift = (target as i32 - pc as i32 + 18).rem_euclid(12) - 6;
    let q = pitch as i32 + shift;
    if (0..PITCHES as i32).contains(&q) {
        q as u8
    } else {
        (q - 12 * q.signum()) as u8
    }
}

/// The gallery's named textures (`settings/textures.json`), in its order.
pub fn gallery() -> &'static [Donor] {
    static GALLERY: std::sync::OnceLock<Vec<Donor>> = std::sync::OnceLock::new();
    GALLERY.get_or_init(|| {
        serde_json::from_str(include_str!("../../../settings/textures.json"))
            .expect("settings/textures.json is valid (a test checks it)")
    })
}

/// The gallery's texture called `name` (case aside), or what the gallery holds, in words.
pub fn named(name: &str) -> Result<&'static Donor, String> {
    gallery()
        .iter()
        .find(|d| d.name.eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            let names: Vec<&str> = gallery().iter().map(|d| d.name.as_str()).collect();
            format!(
                "no texture is called \"{name}\" (the gallery has {})",
                names.join(", ")
            )
        })
}

#[cfg(test)]
mod tests;
