//! Real-data tests on POP909 (`../shared/data/pop909`, or `$POP909_DIR`). They skip, saying
//! so, when the data is absent.
//!
//! This file finds the data; the tests are by subject: the annotation files and their
//! placement (`annotations`), piano rolls and MIDI writing (`rolls`), chord recognition
//! (`chords`), phrase segmentation (`phrases`), REMI tokens (`tokens`), the metrics
//! (`metrics`), real melodies' repeats (`melodies`), the harmonizer's decoding choice (`harmony`), the CLI trained and
//! evaluated at toy scale (`cli`), and song openings continued as a person would (`openings`).
#![cfg(not(target_arch = "wasm32"))]

use std::path::PathBuf;

mod annotations;
mod chords;
mod cli;
mod harmony;
mod melodies;
mod metrics;
mod openings;
mod phrases;
mod rolls;
mod tokens;

fn data_root() -> Option<PathBuf> {
    let root = std::env::var_os("POP909_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            // This checkout's, read at run time (see tests/shipped.rs).
            std::env::var_os("CARGO_MANIFEST_DIR")
                .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
                .join("../shared/data/pop909")
        });
    if root.join("songs").is_dir() {
        Some(root)
    } else {
        pianoformer::note_skipped_test(&format!(
            "POP909 not found at {} (set POP909_DIR)",
            root.display()
        ));
        None
    }
}

fn song_ids(root: &std::path::Path) -> Vec<u32> {
    let mut ids: Vec<u32> = std::fs::read_dir(root.join("songs"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    ids.sort_unstable();
    ids
}
