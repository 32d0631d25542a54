//! How real melodies repeat their phrases, against what the melody writer assumes: its echo
//! leans less where the songs' own repeats vary (under another chord than the first time, at a
//! phrase's cadence), by constants measured on the training songs.

use pianoformer::data::melody::melody_steps;
use pianoformer::data::sources::{self, Parts};
use pianoformer::eval::melody::EchoProfile;
use pianoformer::generate::melody::{ECHO_LESS_AT_A_CADENCE, ECHO_LESS_UNDER_ANOTHER_CHORD};

#[test]
fn the_echo_leans_less_where_the_training_songs_vary_their_repeats() {
    let Some(root) = super::data_root() else {
        return;
    };
    let parts = Parts {
        train: true,
        valid: false,
        test: false,
    };
    // The constants are these songs' figures (`eval --task melody` prints them too).
    let data = sources::load(&root, parts, None).unwrap();
    let mut profile = EchoProfile::default();
    for piece in data.train.pieces.iter().filter(|p| p.range.len() >= 16) {
        let labels = &piece.sheet.labels;
        let own = melody_steps(&piece.sheet.rolls.melody, &labels.melody, 0);
        let region = piece.range.start..piece.range.end.min(own.len());
        profile.add(&own, labels, &piece.sheet.grid, region);
    }
    // Repeats keep most onsets where the harmony returns, fewer where it moves or cadences.
    assert!(profile.matched(false, false) > 0.7, "{profile:?}");
    assert!(profile.matched(true, false) < profile.matched(false, false));
    assert!(profile.matched(false, true) < profile.matched(false, false));
    let (chord, cadence) = (
        profile.less_under_another_chord(),
        profile.less_at_a_cadence(),
    );
    assert!(
        (chord - ECHO_LESS_UNDER_ANOTHER_CHORD as f64).abs() < 0.05,
        "measured {chord:.2}, the writer leans {ECHO_LESS_UNDER_ANOTHER_CHORD} less"
    );
    assert!(
        (cadence - ECHO_LESS_AT_A_CADENCE as f64).abs() < 0.05,
        "measured {cadence:.2}, the writer leans {ECHO_LESS_AT_A_CADENCE} less"
    );
}
