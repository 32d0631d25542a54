//! Chord recognition against POP909's human chord annotations.

use pianoformer::music::midi::read_midi;
use pianoformer::music::pop909::{self, Split};

use super::{data_root, song_ids};

/// Chord recognition against the human annotations (`chord_midi.txt`) on the validation songs,
/// per beat of `beat_midi.txt`: the figures quoted in the README.
#[test]
fn chord_recognition_accuracy_on_validation_songs() {
    use pianoformer::music::chords::{Chord, RecognizeOptions, recognize};
    let Some(root) = data_root() else { return };
    let (mut beats_total, mut root_ok, mut family_ok, mut exact_ok) =
        (0usize, 0usize, 0usize, 0usize);
    let mut unknown = std::collections::BTreeSet::new();
    for id in song_ids(&root)
        .into_iter()
        .filter(|&id| Split::of(id) == Split::Validation)
    {
        let dir = pop909::song_dir(&root, id);
        let song = read_midi(&std::fs::read(dir.join(format!("{id:03}.mid"))).unwrap()).unwrap();
        let beats =
            pop909::parse_beats(&pop909::read_text(&dir.join("beat_midi.txt")).unwrap()).unwrap();
        let reference =
            pop909::parse_timed_chords(&pop909::read_text(&dir.join("chord_midi.txt")).unwrap())
                .unwrap();
        let ticks: Vec<u64> = beats
            .iter()
            .map(|b| song.tick_at_seconds(b.seconds))
            .collect();
        let notes: Vec<_> = song
            .tracks
            .iter()
            .flat_map(|t| {
                let w = if t.name == "MELODY" { 0.5 } else { 1.0 };
                t.notes.iter().map(move |n| (n, w))
            })
            .collect();
        let predicted = recognize(&notes, &ticks, RecognizeOptions::default());
        for (b, pred) in predicted.iter().enumerate() {
            let mid = (beats[b].seconds + beats[b + 1].seconds) / 2.0;
            let Some(annotated) = reference.iter().find(|c| c.start <= mid && mid < c.end) else {
                continue;
            };
            let truth = match Chord::parse(&annotated.symbol) {
                Ok(Some(c)) => c,
                Ok(None) => continue, // "no chord" beats are not scored
                Err(_) => {
                    unknown.insert(annotated.symbol.clone());
                    continue;
                }
            };
            beats_total += 1;
            if let Some(p) = pred {
                root_ok += (p.root == truth.root) as usize;
                family_ok +=
                    (p.root == truth.root && p.quality.family() == truth.quality.family()) as usize;
                exact_ok += (*p == truth) as usize;
            }
        }
    }
    let pct = |k: usize| 100.0 * k as f64 / beats_total.max(1) as f64;
    eprintln!(
        "chord recognition on {beats_total} validation beats: root {:.1}%, root+family {:.1}%, exact {:.1}%",
        pct(root_ok),
        pct(family_ok),
        pct(exact_ok)
    );
    assert!(unknown.is_empty(), "unparsed chord symbols: {unknown:?}");
    assert!(
        pct(root_ok) > 88.0 && pct(family_ok) > 80.0,
        "recognition got worse"
    );
}
