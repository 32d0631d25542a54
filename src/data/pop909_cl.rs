//! POP909-CL (`../shared/data/pop909-cl`, MIT): the same songs as POP909 with chords an expert
//! corrected, a second reference for scoring chords. Each song's file holds the whole score on
//! one track and the corrected chords as block chords on a second track, on a grid of
//! whole beats (a beat a quarter note) that may sit some whole beats off POP909's. The chords are
//! on the second MIDI channel (the track is named `chords` in most files). Here a song's
//! corrected chords are read per beat and laid on the POP909 piece's own beats: the offset is
//! found from the notes (the score's onsets against the piece's), never from the chords, so
//! the labels it aligns are not used to align them.

use std::path::Path;

use crate::data::corpus::Piece;
use crate::music::chords::{Chord, Quality};
use crate::music::midi::{Note, Song, read_midi};

/// The channel (from 0) of the block chords.
const CHORD_CHANNEL: u8 = 1;

/// The offsets tried, in beats (the dataset's README: −8 to +2 occur).
const SHIFTS: std::ops::RangeInclusive<i64> = -12..=12;

/// A song's corrected chords on the POP909 piece's beats.
#[derive(Clone, Debug, PartialEq)]
pub struct Corrected {
    /// One per beat of the piece's grid (`None`: no chord there, or beyond the file).
    pub chords: Vec<Option<Chord>>,
    /// The file's beat `c` is the piece's beat `c + shift`.
    pub shift: i64,
    /// The share of the file's note onsets the piece has at the same step and pitch, at that
    /// shift: how sure the alignment is.
    pub onsets_matched: f64,
}

/// The corrected chords of POP909 song `id` (e.g. 10) from `dir` (the POP909-CL folder) laid on
/// `piece`'s beats; `Ok(None)` when the folder has no file for it.
pub fn corrected(dir: &Path, id: u32, piece: &Piece) -> Result<Option<Corrected>, String> {
    let path = dir.join("POP909_processed").join(format!("{id:03}.mid"));
    if !path.is_file() {
        return Ok(None);
    }
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let song = read_midi(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Some(align(&song, piece)))
}

/// The share of a file's onsets the piece must have at the same step and pitch for its
/// alignment to be trusted.
pub const SURE: f64 = 0.5;

/// The POP909 song number a piece was read from (its name ends in it: `…/010`).
pub fn song_id(piece: &Piece) -> Option<u32> {
    piece.name.rsplit('/').next().and_then(|n| n.parse().ok())
}

/// Replaces the chords of every piece of `pieces` whose corrected chords in `dir` align surely
/// ([`SURE`]) with those (training on POP909-CL's labels); returns how many were replaced.
/// The others keep POP909's.
pub fn use_corrected(pieces: &mut [Piece], dir: &Path) -> Result<usize, String> {
    let mut replaced = 0;
    for piece in pieces.iter_mut() {
        let Some(id) = song_id(piece) else {
            continue;
        };
        let Some(c) = corrected(dir, id, piece)? else {
            continue;
        };
        if c.onsets_matched < SURE {
            continue;
        }
        let labels = &mut piece.sheet.labels;
        let spb = labels.steps_per_beat.max(1);
        for (step, chord) in labels.chord.iter_mut().enumerate() {
            *chord = c.chords.get(step / spb).copied().flatten();
        }
        replaced += 1;
    }
    Ok(replaced)
}

/// [`corrected`] for a song already read.
pub fn align(song: &Song, piece: &Piece) -> Corrected {
    let ppq = u64::from(song.ppq.max(1));
    let spb = piece.sheet.grid.steps_per_beat.max(1) as i64;
    // The chords are on the second channel (their track is named `chords` in most files,
    // `MIDI 01` in some), the score on the first.
    let (chord_notes, score_notes): (Vec<&Note>, Vec<&Note>) = song
        .tracks
        .iter()
        .flat_map(|t| t.notes.iter())
        .partition(|n| n.channel == CHORD_CHANNEL);
    // The file's onsets as (step on its own grid, pitch).
    let step_of = |tick: u64| ((tick * spb as u64 + ppq / 2) / ppq) as i64;
    let onsets: Vec<(i64, usize)> = score_notes
        .iter()
        .map(|n| (step_of(n.start), n.pitch as usize))
        .collect();
    let rolls = &piece.sheet.rolls;
    let steps = rolls.num_steps() as i64;
    let sounds = |step: i64, pitch: usize| {
        (step >= 0 && step < steps)
            && [&rolls.melody, &rolls.bridge, &rolls.piano]
                .iter()
                .any(|r| r.onset(step as usize, pitch))
    };
    let matched = |shift: i64| {
        onsets
            .iter()
            .filter(|&&(s, p)| sounds(s + shift * spb, p))
            .count()
    };
    let (shift, hits) = SHIFTS
        .map(|s| (s, matched(s)))
        .max_by_key(|&(s, n)| (n, -s.abs()))
        .unwrap_or((0, 0));
    let beats = piece.sheet.grid.num_beats();
    let chords = (0..beats)
        .map(|b| {
            let c = b as i64 - shift;
            if c < 0 {
                return None;
            }
            let tick = c as u64 * ppq + 1;
            let sounding: Vec<u8> = chord_notes
                .iter()
                .filter(|n| n.start <= tick && tick < n.end)
                .map(|n| n.pitch)
                .collect();
            block_chord(&sounding)
        })
        .collect();
    Corrected {
        chords,
        shift,
        onsets_matched: hits as f64 / onsets.len().max(1) as f64,
    }
}

/// The chord a block chord spells (`pitches` sounding together): the chord whose tones are
/// exactly its pitch classes, the lowest note taken as the root where two chords share them
/// (C6 and Am7); else the same without the lowest note (a chord over another bass); else the
/// chord whose tones overlap them most (cosine of the sets), the lowest note breaking ties.
pub fn block_chord(pitches: &[u8]) -> Option<Chord> {
    let bass = pitches.iter().min().map(|p| p % 12)?;
    let set = |pcs: &mut dyn Iterator<Item = u8>| pcs.fold(0u16, |m, pc| m | 1 << pc);
    let all = set(&mut pitches.iter().map(|p| p % 12));
    let chords: Vec<(Chord, u16)> = (0..12u8)
        .flat_map(|root| {
            Quality::ALL
                .iter()
                .map(move |&quality| Chord { root, quality })
        })
        .map(|c| (c, set(&mut c.pitch_classes())))
        .collect();
    let exact = |mask: u16, prefer: Option<u8>| {
        let found: Vec<Chord> = chords
            .iter()
            .filter(|(_, m)| *m == mask)
            .map(|(c, _)| *c)
            .collect();
        found
            .iter()
            .find(|c| Some(c.root) == prefer)
            .or(found.first())
            .copied()
    };
    if let Some(c) = exact(all, Some(bass)) {
        return Some(c);
    }
    let upper = all & !(1 << bass);
    if upper.count_ones() >= 3
        && let Some(c) = exact(upper, None)
    {
        return Some(c);
    }
    let cosine = |m: u16| {
        f64::from((m & all).count_ones())
            / (f64::from(m.count_ones()) * f64::from(all.count_ones())).sqrt()
    };
    chords
        .iter()
        .max_by(|a, b| {
            cosine(a.1)
                .total_cmp(&cosine(b.1))
                .then((a.0.root == bass).cmp(&(b.0.root == bass)))
        })
        .map(|(c, _)| *c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(pitches: &[u8]) -> String {
        block_chord(pitches).map_or("N".into(), |c| c.name())
    }

    #[test]
    fn block_chords_are_read_as_the_chords_they_spell() {
        assert_eq!(name(&[48, 52, 55]), "C");
        assert_eq!(name(&[57, 60, 64]), "Am");
        assert_eq!(name(&[55, 59, 62, 65]), "G7");
        // The same tones, the bass decides: C6 over C, Am7 over A.
        assert_eq!(block_chord(&[48, 52, 55, 57]).unwrap().root, 0);
        assert_eq!(block_chord(&[45, 48, 52, 55]).unwrap().root, 9);
        // A triad over another bass: the triad (F over G).
        assert_eq!(name(&[43, 53, 57, 60]), "F");
        assert_eq!(name(&[]), "N");
    }

    /// A file whose beats sit two beats before the piece's is laid on the piece's beats: the
    /// offset found from the notes, its block chords read where the piece's beats are.
    #[test]
    fn a_shifted_file_is_aligned_by_its_notes() {
        use crate::music::midi::Track;
        let song = crate::music::fixtures::song(0, 8);
        let piece = Piece::from_song("loop".into(), &song).unwrap();
        let ppq = u64::from(song.ppq);
        let early = |n: &Note| {
            (n.start >= 2 * ppq).then(|| Note {
                start: n.start - 2 * ppq,
                end: n.end - 2 * ppq,
                channel: 0,
                ..*n
            })
        };
        let mut file = song.clone();
        file.tracks = vec![Track {
            pedal: Vec::new(),
            name: "piano".into(),
            notes: song
                .tracks
                .iter()
                .flat_map(|t| t.notes.iter())
                .filter_map(early)
                .collect(),
            ..song.tracks[0].clone()
        }];
        // E minor held over the file's beats 4-7 (the piece's 6-9).
        let chord = |pitch| Note {
            pitch,
            velocity: 60,
            start: 4 * ppq,
            end: 8 * ppq,
            channel: CHORD_CHANNEL,
        };
        file.tracks.push(Track {
            pedal: Vec::new(),
            name: "MIDI 01".into(),
            notes: vec![chord(52), chord(55), chord(59)],
            ..song.tracks[0].clone()
        });
        let c = align(&file, &piece);
        assert_eq!(c.shift, 2);
        assert!(c.onsets_matched > 0.99, "{}", c.onsets_matched);
        let name = |b: usize| c.chords[b].map_or("N".into(), |ch| ch.name());
        assert_eq!(
            (5..11).map(name).collect::<Vec<_>>(),
            ["N", "Em", "Em", "Em", "Em", "N"]
        );
        // Training on the corrected chords: a piece named for song 7 takes them on every step
        // of its beats; one with no song number keeps its own.
        let dir = std::env::temp_dir().join(format!("pop909-cl-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("POP909_processed")).unwrap();
        let bytes = crate::music::midi::write_midi(&file);
        std::fs::write(dir.join("POP909_processed/007.mid"), bytes).unwrap();
        let mut pieces = vec![
            Piece::from_song("POP909/007".into(), &song).unwrap(),
            piece.clone(),
        ];
        assert_eq!(use_corrected(&mut pieces, &dir), Ok(1));
        let labels = &pieces[0].sheet.labels;
        let spb = labels.steps_per_beat;
        let at = |beat: usize| labels.chord[beat * spb + 1].map_or("N".into(), |ch| ch.name());
        assert_eq!(
            (5..11).map(at).collect::<Vec<_>>(),
            ["N", "Em", "Em", "Em", "Em", "N"]
        );
        assert_eq!(pieces[1].sheet.labels, piece.sheet.labels);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
