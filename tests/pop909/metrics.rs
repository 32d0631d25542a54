//! The accompaniment and style metrics on real test windows, against the paper's anchors.

use super::data_root;

/// The metrics on real data against the anchors F-StrIPE's Table I implies: an (almost) empty
/// prediction of a 16-bar test window scores CS ≈ 0–3, SSMD ≈ 29, GS ≈ 6–8 and NDD ≈ 94. Ours
/// give CS 0, GS 5.9 and NDD 90.9 for an empty one, but SSMD 42.8: the paper's SSMD is lower
/// than its definition gives on these songs (see reports/labels-and-metrics.md). The bridge
/// track played as if it were the piano part is a weak but real "prediction".
#[test]
fn metrics_on_test_windows_match_the_papers_anchors() {
    use pianoformer::music::metrics::{
        accompaniment_scores, beat_notes, mean_std, style_similarity,
    };
    use pianoformer::music::pop909::{Pop909, Split};
    use pianoformer::music::roll::PianoRoll;
    let Some(root) = data_root() else { return };
    let data = Pop909::open(&root).unwrap();
    let window = 16 * 4 * 4; // 16 bars of 4 beats, 4 steps a beat
    let (mut empty, mut bridge, mut style) = (Vec::new(), Vec::new(), Vec::new());
    for id in data.split_ids(Split::Test).unwrap() {
        let s = data.load(id, 4).unwrap();
        let mut start = s.annotated.start;
        while start + window <= s.annotated.end {
            let crop = |r: &PianoRoll| {
                let mut out = PianoRoll::new(window);
                for t in 0..window {
                    for p in 0..128 {
                        if r.sustain(start + t, p) {
                            out.set(t, p, r.onset(start + t, p), true, 64);
                        }
                    }
                }
                out
            };
            let target = crop(&s.rolls.piano);
            empty.push(accompaniment_scores(&PianoRoll::new(window), &target, 4));
            bridge.push(accompaniment_scores(&crop(&s.rolls.bridge), &target, 4));
            start += window;
        }
        let track = |name: &str| s.song.tracks.iter().find(|t| t.name == name).unwrap();
        let (od, tp) = style_similarity(
            &beat_notes(&track("PIANO").notes, &s.grid),
            &beat_notes(&track("MELODY").notes, &s.grid),
        );
        style.push((od.unwrap_or(0.0), tp.unwrap_or(0.0)));
    }
    let summary = |v: &[pianoformer::music::metrics::AccompanimentScores]| {
        let f = |g: fn(&pianoformer::music::metrics::AccompanimentScores) -> f64| {
            mean_std(&v.iter().map(g).collect::<Vec<_>>()).0
        };
        (f(|s| s.cs), f(|s| s.ssmd), f(|s| s.gs), f(|s| s.ndd))
    };
    let e = summary(&empty);
    let b = summary(&bridge);
    eprintln!(
        "{} test windows of 16 bars. Empty prediction: CS {:.2} SSMD {:.2} GS {:.2} NDD {:.2}; \
         bridge as prediction: CS {:.2} SSMD {:.2} GS {:.2} NDD {:.2}; style similarity of piano \
         to melody: onset-duration {:.3}, time-pitch {:.3}",
        empty.len(),
        e.0,
        e.1,
        e.2,
        e.3,
        b.0,
        b.1,
        b.2,
        b.3,
        mean_std(&style.iter().map(|s| s.0).collect::<Vec<_>>()).0,
        mean_std(&style.iter().map(|s| s.1).collect::<Vec<_>>()).0,
    );
    assert!(empty.len() >= 300);
    assert_eq!(e.0, 0.0);
    assert!((20.0..50.0).contains(&e.1), "SSMD of nothing {}", e.1);
    assert!(e.2 < 15.0 && e.3 > 85.0);
    assert!(
        b.0 > e.0 && b.2 > e.2 && b.3 < e.3,
        "the bridge should beat nothing"
    );
}
