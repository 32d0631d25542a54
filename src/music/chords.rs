//! Chords: Harte-style symbols (`C#:min7/b7`), pitch-class templates, and recognition from notes
//! (per beat, template matching with a bass cue, then smoothing across beats).

use super::midi::Note;

/// Chord qualities with their pitch-class templates (intervals above the root).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Quality {
    Maj,
    Min,
    Dim,
    Aug,
    Sus2,
    Sus4,
    Dom7,
    Maj7,
    Min7,
    HalfDim7,
    Dim7,
    Maj6,
    Min6,
    MinMaj7,
}

impl Quality {
    pub const ALL: [Quality; 14] = [
        Quality::Maj,
        Quality::Min,
        Quality::Dim,
        Quality::Aug,
        Quality::Sus2,
        Quality::Sus4,
        Quality::Dom7,
        Quality::Maj7,
        Quality::Min7,
        Quality::HalfDim7,
        Quality::Dim7,
        Quality::Maj6,
        Quality::Min6,
        Quality::MinMaj7,
    ];

    pub fn intervals(self) -> &'static [u8] {
        match self {
            Quality::Maj => &[0, 4, 7],
            Quality::Min => &[0, 3, 7],
            Quality::Dim => &[0, 3, 6],
            Quality::Aug => &[0, 4, 8],
            Quality::Sus2 => &[0, 2, 7],
            Quality::Sus4 => &[0, 5, 7],
            Quality::Dom7 => &[0, 4, 7, 10],
            Quality::Maj7 => &[0, 4, 7, 11],
            Quality::Min7 => &[0, 3, 7, 10],
            Quality::HalfDim7 => &[0, 3, 6, 10],
            Quality::Dim7 => &[0, 3, 6, 9],
            Quality::Maj6 => &[0, 4, 7, 9],
            Quality::Min6 => &[0, 3, 7, 9],
            Quality::MinMaj7 => &[0, 3, 7, 11],
        }
    }

    /// The Harte shorthand.
    pub fn symbol(self) -> &'static str {
        match self {
            Quality::Maj => "maj",
            Quality::Min => "min",
            Quality::Dim => "dim",
            Quality::Aug => "aug",
            Quality::Sus2 => "sus2",
            Quality::Sus4 => "sus4",
            Quality::Dom7 => "7",
            Quality::Maj7 => "maj7",
            Quality::Min7 => "min7",
            Quality::HalfDim7 => "hdim7",
            Quality::Dim7 => "dim7",
            Quality::Maj6 => "maj6",
            Quality::Min6 => "min6",
            Quality::MinMaj7 => "minmaj7",
        }
    }

    /// The triad family used for "root + quality" accuracy (the MIREX-style reduction): sevenths
    /// and sixths count as their triad, sus2 and sus4 as one "sus" family.
    pub fn family(self) -> Family {
        match self {
            Quality::Maj | Quality::Dom7 | Quality::Maj7 | Quality::Maj6 => Family::Major,
            Quality::Min | Quality::Min7 | Quality::Min6 | Quality::MinMaj7 => Family::Minor,
            Quality::Dim | Quality::HalfDim7 | Quality::Dim7 => Family::Diminished,
            Quality::Aug => Family::Augmented,
            Quality::Sus2 | Quality::Sus4 => Family::Suspended,
        }
    }

    /// Parses a Harte quality such as `min7`, `maj(9)`, `sus4(b7)`, `9`; extensions beyond the
    /// seventh are folded into the nearest seventh chord.
    pub fn parse(s: &str) -> Option<Quality> {
        let base = s.split(['(', '/']).next().unwrap_or("").trim();
        if base.is_empty() {
            // Harte's intervals alone (`C:(3,5)`) or nothing: the triad.
            return Some(Quality::Maj);
        }
        Quality::of_symbol(GRAMMAR.harte.get(base)?)
    }

    /// The quality whose Harte shorthand is `symbol` ([`Quality::symbol`]).
    fn of_symbol(symbol: &str) -> Option<Quality> {
        Quality::ALL.into_iter().find(|q| q.symbol() == symbol)
    }
}

/// The chord symbols the lanes hold, written once in `settings/chords.json` and read here and by
/// the page (`www/labels.js`): the readable suffixes and the Harte qualities, each mapped to
/// the Harte shorthand of the quality the models read.
#[derive(serde::Deserialize)]
struct Grammar {
    shorthand: std::collections::HashMap<String, String>,
    harte: std::collections::HashMap<String, String>,
    harte_bass: Vec<String>,
}

static GRAMMAR: std::sync::LazyLock<Grammar> = std::sync::LazyLock::new(|| {
    serde_json::from_str(include_str!("../../settings/chords.json"))
        .expect("settings/chords.json is valid (a test reads it)")
});

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Family {
    Major,
    Minor,
    Diminished,
    Augmented,
    Suspended,
}

/// A chord: a root pitch class (0 = C) and a quality.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Chord {
    pub root: u8,
    pub quality: Quality,
}

/// Pitch-class names as the page and the CLI print them.
pub const PITCH_CLASS_NAMES: [&str; 12] = [
    "C", "C#", "D", "Eb", "E", "F", "F#", "G", "Ab", "A", "Bb", "B",
];

/// Pitch class of a note name such as `C`, `F#`, `Bb`, `Cb`.
pub fn parse_pitch_class(s: &str) -> Option<u8> {
    let mut chars = s.chars();
    let base: i32 = match chars.next()? {
        'C' => 0,
        'D' => 2,
        'E' => 4,
        'F' => 5,
        'G' => 7,
        'A' => 9,
        'B' => 11,
        _ => return None,
    };
    let mut pc = base;
    for c in chars {
        pc += match c {
            '#' => 1,
            'b' => -1,
            _ => return None,
        };
    }
    Some(pc.rem_euclid(12) as u8)
}

impl Chord {
    /// Parses `Root:quality[(ext)][/bass]`; `N` and `X` are "no chord" (`Ok(None)`).
    pub fn parse(symbol: &str) -> Result<Option<Chord>, String> {
        let symbol = symbol.trim();
        if symbol == "N" || symbol == "X" {
            return Ok(None);
        }
        // Harte shorthand without a quality means major, with or without a bass: `C`, `C/5`.
        let (root, quality) = symbol
            .split_once(':')
            .unwrap_or_else(|| (symbol.split('/').next().unwrap_or(symbol), "maj"));
        let root =
            parse_pitch_class(root).ok_or_else(|| format!("unknown chord root in '{symbol}'"))?;
        let quality = Quality::parse(quality)
            .ok_or_else(|| format!("unknown chord quality in '{symbol}'"))?;
        Ok(Some(Chord { root, quality }))
    }

    /// Parses a chord symbol as a person types it and the lanes hold it (the grammar of
    /// `settings/chords.json`, which the page's chord dialog checks too): a root (a letter and at
    /// most one `#` or `b`) with a readable suffix as [`Chord::name`] writes it (`Am`, `F#7`,
    /// `Bm7b5`, `Cmaj7`), or with `:` and a Harte quality (`A:min7`, `G:min7(9)`); `N` or
    /// nothing is "no chord".
    pub fn parse_any(symbol: &str) -> Result<Option<Chord>, String> {
        let symbol = symbol.trim();
        if symbol.is_empty() || symbol == "N" {
            return Ok(None);
        }
        let letter = symbol.chars().next().filter(|c| ('A'..='G').contains(c));
        let root_len = match symbol.as_bytes().get(1) {
            Some(b'#' | b'b') => 2,
            _ => 1,
        };
        let root = letter
            .and_then(|_| parse_pitch_class(&symbol[..root_len]))
            .ok_or_else(|| format!("unknown chord root in '{symbol}'"))?;
        // A bass after `/` (an inversion): a note after a shorthand suffix, a degree after a
        // Harte quality. The models read the root and the quality, so it is checked, not kept.
        let (rest, bass) = match symbol[root_len..].split_once('/') {
            Some((rest, bass)) => (rest, Some(bass)),
            None => (&symbol[root_len..], None),
        };
        let harte = rest.starts_with(':');
        let bass_known = |bass: &str| match harte {
            true => GRAMMAR.harte_bass.iter().any(|d| d == bass),
            false => {
                let note = bass.len() <= 2 && bass.starts_with(|c| ('A'..='G').contains(&c));
                note && parse_pitch_class(bass).is_some()
            }
        };
        if let Some(bass) = bass.filter(|b| !bass_known(b)) {
            let kind = ["a note, as in C/E", "a degree, as in B:maj/3"][usize::from(harte)];
            return Err(format!(
                "unknown bass '{bass}' in '{symbol}' (the bass after / is {kind})"
            ));
        }
        let canonical = match rest.strip_prefix(':') {
            Some(harte) => {
                let (base, extensions) = harte.split_once('(').unwrap_or((harte, ")"));
                let closed = extensions
                    .strip_suffix(')')
                    .is_some_and(|inner| !inner.contains(['(', ')']));
                GRAMMAR.harte.get(base).filter(|_| closed)
            }
            None => GRAMMAR.shorthand.get(rest),
        };
        let quality = canonical
            .and_then(|q| Quality::of_symbol(q))
            .ok_or_else(|| format!("unknown chord quality in '{symbol}'"))?;
        Ok(Some(Chord { root, quality }))
    }

    /// The chord's pitch classes.
    pub fn pitch_classes(self) -> impl Iterator<Item = u8> {
        self.quality
            .intervals()
            .iter()
            .map(move |i| (self.root + i) % 12)
    }

    /// A readable name: `C`, `Am7`, `F#dim`, `Gsus4`.
    pub fn name(self) -> String {
        let suffix = match self.quality {
            Quality::Maj => "",
            Quality::Min => "m",
            Quality::Dom7 => "7",
            Quality::Min7 => "m7",
            Quality::HalfDim7 => "m7b5",
            Quality::Min6 => "m6",
            Quality::MinMaj7 => "m(maj7)",
            Quality::Maj6 => "6",
            q => q.symbol(),
        };
        format!("{}{}", PITCH_CLASS_NAMES[self.root as usize], suffix)
    }
}

/// Tuning of [`recognize`].
#[derive(Clone, Copy, Debug)]
pub struct RecognizeOptions {
    /// Cost of changing chord between two beats, in template-score units: larger is smoother.
    pub change_penalty: f32,
    /// Extra weight of the lowest sounding note of a beat (the bass suggests the root).
    pub bass_weight: f32,
    /// Below this much sounding weight a beat is "no chord".
    pub silence: f32,
}

impl Default for RecognizeOptions {
    fn default() -> Self {
        Self {
            change_penalty: 0.12,
            bass_weight: 0.5,
            silence: 1e-6,
        }
    }
}

/// Pitch-class weights per beat: how long each pitch class sounds in each beat span
/// (`beats[b]..beats[b+1]` in ticks), normalised, plus the pitch class of the lowest note.
fn beat_profiles(notes: &[(&Note, f32)], beats: &[u64]) -> Vec<([f32; 12], Option<u8>)> {
    let n = beats.len().saturating_sub(1);
    let mut profiles = vec![([0f32; 12], None::<(u8, u8)>); n];
    for &(note, weight) in notes {
        // First beat whose span ends after the note starts.
        let first = beats
            .partition_point(|&t| t <= note.start)
            .saturating_sub(1);
        for b in first..n {
            let (lo, hi) = (beats[b], beats[b + 1]);
            if lo >= note.end {
                break;
            }
            let overlap = note.end.min(hi).saturating_sub(note.start.max(lo));
            if overlap == 0 || hi == lo {
                continue;
            }
            let (profile, lowest) = &mut profiles[b];
            profile[(note.pitch % 12) as usize] += weight * overlap as f32 / (hi - lo) as f32;
            if lowest.is_none_or(|(p, _)| note.pitch < p) {
                *lowest = Some((note.pitch, note.pitch % 12));
            }
        }
    }
    profiles
        .into_iter()
        .map(|(p, lowest)| (p, lowest.map(|(_, pc)| pc)))
        .collect()
}

/// Recognises one chord per beat from `notes` (each with a weight: e.g. 1 for accompaniment,
/// 0.5 for melody). `beats` are the ticks of beat boundaries; the result has one entry per
/// beat span, `None` where nothing sounds.
pub fn recognize(
    notes: &[(&Note, f32)],
    beats: &[u64],
    options: RecognizeOptions,
) -> Vec<Option<Chord>> {
    let profiles = beat_profiles(notes, beats);
    let candidates: Vec<Chord> = (0..12u8)
        .flat_map(|root| {
            Quality::ALL
                .iter()
                .map(move |&quality| Chord { root, quality })
        })
        .collect();
    // Template vectors, unit length, so a 4-note chord needs its 4th note to beat its triad.
    let templates: Vec<[f32; 12]> = candidates
        .iter()
        .map(|c| {
            let mut t = [0f32; 12];
            let k = c.quality.intervals().len() as f32;
            for pc in c.pitch_classes() {
                t[pc as usize] = 1.0 / k.sqrt();
            }
            t
        })
        .collect();
    let no_chord = candidates.len(); // state index of "no chord"
    // scores[b][s]: how well state s explains beat b (higher is better).
    let scores: Vec<Vec<f32>> = profiles
        .iter()
        .map(|(p, bass)| {
            let norm = p.iter().map(|x| x * x).sum::<f32>().sqrt();
            let mut row = vec![0f32; candidates.len() + 1];
            if norm <= options.silence {
                row[no_chord] = 1.0;
                return row;
            }
            for (s, (c, t)) in candidates.iter().zip(&templates).enumerate() {
                let cosine: f32 = p.iter().zip(t).map(|(a, b)| a * b).sum::<f32>() / norm;
                let bass_bonus = if *bass == Some(c.root) {
                    options.bass_weight * 0.2
                } else {
                    0.0
                };
                row[s] = cosine + bass_bonus;
            }
            row[no_chord] = -1.0;
            row
        })
        .collect();
    // Viterbi with a flat change penalty: O(beats × states).
    let argmax = |v: &[f32]| {
        v.iter().copied().enumerate().fold(
            (0, f32::MIN),
            |acc, (i, x)| if x > acc.1 { (i, x) } else { acc },
        )
    };
    let states = candidates.len() + 1;
    let mut best = vec![0f32; states];
    let mut back: Vec<Vec<u16>> = Vec::with_capacity(scores.len());
    for (b, row) in scores.iter().enumerate() {
        let (arg_prev, max_prev) = argmax(&best);
        let mut next = vec![0f32; states];
        let mut from = vec![0u16; states];
        for s in 0..states {
            let (stay, switch) = (best[s], max_prev - options.change_penalty);
            let (prev, value) = if b == 0 || stay >= switch {
                (s, stay)
            } else {
                (arg_prev, switch)
            };
            next[s] = value + row[s];
            from[s] = prev as u16;
        }
        best = next;
        back.push(from);
    }
    let mut path = vec![None; scores.len()];
    if let Some(last) = back.len().checked_sub(1) {
        let mut s = argmax(&best).0;
        for b in (0..=last).rev() {
            path[b] = (s != no_chord).then(|| candidates[s]);
            s = back[b][s] as usize;
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_readable_name_parses_back() {
        for quality in Quality::ALL {
            for root in 0..12 {
                let chord = Chord { root, quality };
                assert_eq!(
                    Chord::parse_any(&chord.name()),
                    Ok(Some(chord)),
                    "{}",
                    chord.name()
                );
            }
        }
        assert_eq!(Chord::parse_any(" N "), Ok(None));
        assert_eq!(Chord::parse_any(""), Ok(None));
        assert!(Chord::parse_any("Hm").is_err());
        assert!(Chord::parse_any("Cwhatever").is_err());
    }

    /// The symbols a person types, as settings/chords.json has them (the page's dialog reads
    /// the same file): every suffix and Harte quality names a quality the models read; what
    /// the page refuses is refused here too.
    #[test]
    fn typed_symbols_follow_the_shared_grammar() {
        for (suffix, q) in GRAMMAR.shorthand.iter().chain(&GRAMMAR.harte) {
            assert!(Quality::of_symbol(q).is_some(), "{suffix} -> {q}");
        }
        let c = |s| Chord::parse_any(s).unwrap().unwrap();
        assert_eq!(
            c("Bbmaj7"),
            Chord {
                root: 10,
                quality: Quality::Maj7
            }
        );
        assert_eq!(
            c("C+"),
            Chord {
                root: 0,
                quality: Quality::Aug
            }
        );
        assert_eq!(
            c("G:min7(9)"),
            Chord {
                root: 7,
                quality: Quality::Min7
            }
        );
        assert_eq!(
            c("F#:hdim7"),
            Chord {
                root: 6,
                quality: Quality::HalfDim7
            }
        );
        for bad in [
            "H", "c", "Cmaj9", "C#b", "N7", "C:", "C:foo", "C:min7(9", "X", "C/H", "C/3",
            "C:maj/E", "B:maj/8", "C/E/G", "C/", "Am/Ebb",
        ] {
            assert!(Chord::parse_any(bad).is_err(), "{bad}");
        }
        // An inversion reads as its chord (the models read no bass), as POP909 and a lead
        // sheet write it; the bass is named when it is not one.
        for (inverted, chord) in [
            ("B:maj/3", "B"),
            ("D:7/b7", "D7"),
            ("C:min7(9)/b3", "Cm7"),
            ("C/E", "C"),
            ("F#m7/C#", "F#m7"),
            ("Bb/Ab", "Bb"),
        ] {
            assert_eq!(c(inverted), c(chord), "{inverted}");
        }
        let said = Chord::parse_any("C/H").unwrap_err();
        assert!(
            said.contains("unknown bass 'H'") && said.contains("C/E"),
            "{said}"
        );
    }

    #[test]
    fn harte_symbols() {
        let c = |s| Chord::parse(s).unwrap().unwrap();
        assert_eq!(
            c("C#:min7/b7"),
            Chord {
                root: 1,
                quality: Quality::Min7
            }
        );
        assert_eq!(
            c("Bb:maj(9)"),
            Chord {
                root: 10,
                quality: Quality::Maj
            }
        );
        assert_eq!(c("G:sus4(b7,9)").quality, Quality::Sus4);
        assert_eq!(c("Cb:hdim7").root, 11);
        assert_eq!(
            c("C/5"),
            Chord {
                root: 0,
                quality: Quality::Maj
            }
        );
        assert_eq!(Chord::parse("N"), Ok(None));
        assert!(Chord::parse("H:maj").is_err());
        assert_eq!(c("A:min7").name(), "Am7");
        assert_eq!(c("F#:dim").name(), "F#dim");
    }

    use crate::music::midi::tests::note as n;

    #[test]
    fn recognises_a_progression_and_its_sevenths() {
        // | C | Am7 | F | G7 |, one chord per 4 beats, with a melody passing note.
        let bars: [&[u8]; 4] = [
            &[48, 64, 67, 72],
            &[45, 60, 64, 67],
            &[41, 60, 65, 69],
            &[43, 59, 65, 67],
        ];
        let mut notes = Vec::new();
        for (i, chord) in bars.iter().enumerate() {
            for &p in *chord {
                notes.push(n(p, i as u64 * 4 * 480, (i as u64 + 1) * 4 * 480));
            }
        }
        notes.push(n(74, 480, 720)); // D over C: a passing note, not a chord change
        let weighted: Vec<(&Note, f32)> = notes.iter().map(|x| (x, 1.0)).collect();
        let beats: Vec<u64> = (0..=16).map(|b| b * 480).collect();
        let got = recognize(&weighted, &beats, RecognizeOptions::default());
        let names: Vec<String> = got
            .iter()
            .map(|c| c.map(|c| c.name()).unwrap_or("N".into()))
            .collect();
        assert_eq!(&names[0..4], ["C", "C", "C", "C"]);
        assert_eq!(names[5], "Am7");
        assert_eq!(names[9], "F");
        assert_eq!(names[13], "G7");
    }

    #[test]
    fn silence_is_no_chord() {
        let notes = [n(60, 0, 480), n(64, 0, 480), n(67, 0, 480)];
        let weighted: Vec<(&Note, f32)> = notes.iter().map(|x| (x, 1.0)).collect();
        let got = recognize(&weighted, &[0, 480, 960, 1440], RecognizeOptions::default());
        assert_eq!(
            got[0],
            Some(Chord {
                root: 0,
                quality: Quality::Maj
            })
        );
        assert_eq!(got[1..], [None, None]);
    }
}
