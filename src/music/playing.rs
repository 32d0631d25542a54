//! How a piano part plays, measured against the chords it was given and against the real
//! pianist: the share of its onsets that are chord tones, how many notes it strikes per beat,
//! and how often it strikes the same chord again before a beat has passed.

use super::chords::Chord;
use super::roll::{PITCHES, PianoRoll};

/// Of the piano's onsets on beats that have a chord, the share whose pitch class is a chord
/// tone (`None` when there are none): how well an accompaniment follows the chords.
pub fn chord_tone_ratio(
    piano: &PianoRoll,
    chords: &[Option<Chord>],
    steps_per_beat: usize,
) -> Option<f64> {
    let (mut tones, mut all) = (0usize, 0usize);
    for s in 0..piano.num_steps {
        let Some(Some(chord)) = chords.get(s / steps_per_beat.max(1)) else {
            continue;
        };
        for p in 0..PITCHES {
            if piano.onset(s, p) {
                all += 1;
                if chord.pitch_classes().any(|pc| pc as usize == p % 12) {
                    tones += 1;
                }
            }
        }
    }
    (all > 0).then(|| tones as f64 / all as f64)
}

/// Onsets per beat over `steps` (every note struck counts once).
pub fn onsets_per_beat(
    piano: &PianoRoll,
    steps: std::ops::Range<usize>,
    steps_per_beat: usize,
) -> f64 {
    let end = steps.end.min(piano.num_steps);
    let start = steps.start.min(end);
    let onsets: usize = (start..end)
        .map(|s| (0..PITCHES).filter(|&p| piano.onset(s, p)).count())
        .sum();
    let beats = (end - start) as f64 / steps_per_beat.max(1) as f64;
    if beats > 0.0 {
        onsets as f64 / beats
    } else {
        0.0
    }
}

/// Sounding pitches per step over `steps`, averaged (a note held for four steps counts in
/// each): with [`onsets_per_beat`], how long the notes last.
pub fn sounding_per_step(piano: &PianoRoll, steps: std::ops::Range<usize>) -> f64 {
    let end = steps.end.min(piano.num_steps);
    let start = steps.start.min(end);
    let sounding: usize = (start..end)
        .map(|s| (0..PITCHES).filter(|&p| piano.sustain(s, p)).count())
        .sum();
    if end > start {
        sounding as f64 / (end - start) as f64
    } else {
        0.0
    }
}

/// Of the onset groups (the pitches struck at one step), the share that strike exactly the
/// group struck before them, less than a beat earlier: a held chord struck again every
/// sixteenth scores near 1, a pianist who holds or varies the chord near 0. `None` without
/// onsets.
pub fn restrike_rate(piano: &PianoRoll, steps_per_beat: usize) -> Option<f64> {
    let (mut groups, mut again) = (0usize, 0usize);
    let mut last: Option<(usize, Vec<usize>)> = None;
    for s in 0..piano.num_steps {
        let group: Vec<usize> = (0..PITCHES).filter(|&p| piano.onset(s, p)).collect();
        if group.is_empty() {
            continue;
        }
        groups += 1;
        if let Some((t, prev)) = &last
            && s - t < steps_per_beat.max(1)
            && *prev == group
        {
            again += 1;
        }
        last = Some((s, group));
    }
    (groups > 0).then(|| again as f64 / groups as f64)
}

/// How a piano part sits against the melody: of its onsets struck while the melody sounds
/// (`melody`: the melody pitch at each step, 0 for a rest), the share on the melody's very
/// pitch (`doubled`) and the share above it (`crossed`). `None` without such onsets.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct AgainstMelody {
    pub doubled: f64,
    pub crossed: f64,
}

pub fn against_melody(piano: &PianoRoll, melody: &[u8]) -> Option<AgainstMelody> {
    let (mut all, mut doubled, mut crossed) = (0usize, 0usize, 0usize);
    for (s, &m) in melody.iter().enumerate().take(piano.num_steps) {
        if m == 0 {
            continue;
        }
        for p in 0..PITCHES {
            if piano.onset(s, p) {
                all += 1;
                doubled += (p == m as usize) as usize;
                crossed += (p > m as usize) as usize;
            }
        }
    }
    (all > 0).then(|| AgainstMelody {
        doubled: doubled as f64 / all as f64,
        crossed: crossed as f64 / all as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::music::chords::Quality;

    #[test]
    fn a_piano_on_and_above_the_melody_is_counted() {
        let mut roll = PianoRoll::new(4);
        strike(&mut roll, 0, &[48, 60, 64]); // two under the melody's 64, one on it
        strike(&mut roll, 1, &[72]); // above the melody's 64
        strike(&mut roll, 3, &[80]); // the melody rests: not counted
        let melody = [64, 64, 64, 0];
        let a = against_melody(&roll, &melody).unwrap();
        assert_eq!(a.doubled, 0.25);
        assert_eq!(a.crossed, 0.25);
        assert_eq!(against_melody(&PianoRoll::new(4), &melody), None);
    }

    fn strike(roll: &mut PianoRoll, step: usize, pitches: &[usize]) {
        for &p in pitches {
            roll.set(step, p, true, true, 0);
        }
    }

    #[test]
    fn chord_tones_density_and_restrikes() {
        let c = Chord {
            root: 0,
            quality: Quality::Maj,
        };
        // Two beats of four steps: C E G struck at 0, held; C E G again at 2 (a re-strike
        // half a beat later); D at 4 (no chord tone); C E G at 5 (a different group just
        // before it).
        let mut roll = PianoRoll::new(8);
        strike(&mut roll, 0, &[60, 64, 67]);
        roll.set(1, 60, false, true, 0);
        strike(&mut roll, 2, &[60, 64, 67]);
        strike(&mut roll, 4, &[62]);
        strike(&mut roll, 5, &[48, 64, 67]);
        let ratio = chord_tone_ratio(&roll, &[Some(c), Some(c)], 4).unwrap();
        assert!((ratio - 9.0 / 10.0).abs() < 1e-12);
        assert_eq!(chord_tone_ratio(&roll, &[None, None], 4), None);
        assert!((onsets_per_beat(&roll, 0..8, 4) - 5.0).abs() < 1e-12);
        assert!((onsets_per_beat(&roll, 0..4, 4) - 6.0).abs() < 1e-12);
        // Sounding: 3, 1 (the held C), 3, 0, 1, 3, 0, 0.
        assert!((sounding_per_step(&roll, 0..8) - 11.0 / 8.0).abs() < 1e-12);
        assert!((sounding_per_step(&roll, 1..2) - 1.0).abs() < 1e-12);
        assert_eq!(sounding_per_step(&roll, 8..8), 0.0);
        let r = restrike_rate(&roll, 4).unwrap();
        assert!((r - 1.0 / 4.0).abs() < 1e-12, "{r}");
        // The same chord a whole beat later is not a re-strike.
        let mut beat = PianoRoll::new(8);
        strike(&mut beat, 0, &[60, 64]);
        strike(&mut beat, 4, &[60, 64]);
        assert_eq!(restrike_rate(&beat, 4), Some(0.0));
        assert_eq!(restrike_rate(&PianoRoll::new(4), 4), None);
    }
}
