//! Which track of a user's MIDI file carries the melody: by name first, then by register and
//! how monophonic the track is. The page shows the choice and lets the user change it.

use super::midi::{Song, Track};

/// Words in a track name that announce a melody (whole words, lower case).
const MELODY_NAMES: [&str; 11] = [
    "melody", "melodie", "melodia", "mel", "vocal", "vocals", "voice", "voix", "lead", "singer",
    "vox",
];
/// Words that announce anything but.
const NOT_MELODY_NAMES: [&str; 9] = [
    "bass",
    "drum",
    "drums",
    "perc",
    "chord",
    "chords",
    "pad",
    "accomp",
    "accompaniment",
];

fn words(name: &str) -> Vec<String> {
    name.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// Fraction of the time a track sounds during which at most one of its notes sounds.
pub fn monophony(track: &Track) -> f64 {
    let mut events: Vec<(u64, i32)> = track
        .notes
        .iter()
        .flat_map(|n| [(n.start, 1), (n.end, -1)])
        .collect();
    events.sort_unstable();
    let (mut sounding, mut last, mut mono, mut any) = (0i32, 0u64, 0u64, 0u64);
    for (tick, delta) in events {
        let span = tick - last;
        if sounding >= 1 {
            any += span;
            if sounding == 1 {
                mono += span;
            }
        }
        sounding += delta;
        last = tick;
    }
    if any == 0 {
        0.0
    } else {
        mono as f64 / any as f64
    }
}

fn mean_pitch(track: &Track) -> f64 {
    track.notes.iter().map(|n| n.pitch as f64).sum::<f64>() / track.notes.len().max(1) as f64
}

/// Index into `song.tracks` of the melody, or `None` when no track looks like one (then the
/// caller can fall back to the skyline of all tracks).
pub fn pick_melody_track(song: &Song) -> Option<usize> {
    let candidates: Vec<usize> = (0..song.tracks.len())
        .filter(|&i| !song.tracks[i].is_drums() && song.tracks[i].notes.len() >= 8)
        .collect();
    let named = |i: usize, list: &[&str]| {
        words(&song.tracks[i].name)
            .iter()
            .any(|w| list.contains(&w.as_str()))
    };
    let candidates: Vec<usize> = candidates
        .into_iter()
        .filter(|&i| !named(i, &NOT_MELODY_NAMES))
        .collect();
    if let Some(&i) = candidates.iter().find(|&&i| named(i, &MELODY_NAMES)) {
        return Some(i);
    }
    // Otherwise: the highest-sounding track among the mostly monophonic ones.
    candidates
        .into_iter()
        .filter(|&i| monophony(&song.tracks[i]) >= 0.8)
        .max_by(|&a, &b| mean_pitch(&song.tracks[a]).total_cmp(&mean_pitch(&song.tracks[b])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::music::midi::Note;

    fn track(name: &str, notes: &[(u8, u64, u64)]) -> Track {
        Track {
            pedal: Vec::new(),
            name: name.into(),
            notes: notes
                .iter()
                .map(|&(pitch, start, end)| Note {
                    pitch,
                    velocity: 80,
                    start,
                    end,
                    channel: 0,
                })
                .collect(),
            ..Default::default()
        }
    }

    fn line(base: u8) -> Vec<(u8, u64, u64)> {
        (0..16)
            .map(|i| (base + (i % 5) as u8, i * 240, i * 240 + 200))
            .collect()
    }

    fn chords(base: u8) -> Vec<(u8, u64, u64)> {
        (0..16)
            .flat_map(|i| [0, 4, 7].map(|k| (base + k, i * 480, i * 480 + 470)))
            .collect()
    }

    fn song(tracks: Vec<Track>) -> Song {
        Song {
            ppq: 480,
            tempos: vec![],
            time_signatures: vec![],
            key_signatures: vec![],
            tracks,
        }
    }

    #[test]
    fn a_named_melody_wins() {
        let s = song(vec![
            track("Piano", &chords(60)),
            track("Lead Vocal", &line(55)),
        ]);
        assert_eq!(pick_melody_track(&s), Some(1));
    }

    #[test]
    fn otherwise_the_highest_monophonic_track() {
        let s = song(vec![
            track("Track 1", &chords(72)), // high but chordal
            track("Track 2", &line(40)),
            track("Track 3", &line(67)),
        ]);
        assert_eq!(pick_melody_track(&s), Some(2));
        assert!(monophony(&s.tracks[0]) < 0.1);
        assert_eq!(monophony(&s.tracks[2]), 1.0);
    }

    #[test]
    fn no_candidate_is_none() {
        assert_eq!(
            pick_melody_track(&song(vec![track("Pad", &chords(60))])),
            None
        );
    }
}
