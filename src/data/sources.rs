//! Where training data comes from, natively: the POP909 folder (its own train / validation /
//! test split, annotations placed as `music::pop909` places them), or any folder of MIDI files
//! (structure detected; every tenth file held out for validation), or a single MIDI file.

use std::path::{Path, PathBuf};

use super::corpus::{Corpus, Piece};
use crate::music::midi::read_midi;
use crate::music::pop909::{Pop909, Split};
use crate::music::tokens::STEPS_PER_BEAT;

/// The pieces of a data source, split.
#[derive(Debug, Default)]
pub struct Loaded {
    pub train: Corpus,
    pub valid: Corpus,
    pub test: Corpus,
    /// What was read, for logs and manifests ("POP909 at …: 681 train, …").
    pub description: String,
    /// Files that could not be used, with why.
    pub skipped: Vec<String>,
}

/// Which parts of a source to load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parts {
    pub train: bool,
    pub valid: bool,
    pub test: bool,
}

impl Parts {
    pub const ALL: Parts = Parts {
        train: true,
        valid: true,
        test: true,
    };

    fn wants(self, split: Split) -> bool {
        match split {
            Split::Train => self.train,
            Split::Validation => self.valid,
            Split::Test => self.test,
        }
    }
}

/// Whether `path` looks like the POP909 folder.
pub fn is_pop909(path: &Path) -> bool {
    path.join("songs").is_dir() && path.join("startpos.csv").is_file()
}

/// Loads `path`: POP909, a folder of MIDI files, or one MIDI file. `limit` caps the songs
/// read per split (quick runs).
pub fn load(path: &Path, parts: Parts, limit: Option<usize>) -> Result<Loaded, String> {
    if !path.exists() {
        return Err(format!(
            "the data path {} does not exist (give the POP909 folder, a folder of MIDI files, \
             or a MIDI file)",
            path.display()
        ));
    }
    if is_pop909(path) {
        load_pop909(path, parts, limit)
    } else {
        load_midi(path, parts, limit)
    }
}

/// Runs `f` over `items` on every core, keeping the order.
fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = items.len().div_ceil(workers).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| scope.spawn(|| part.iter().map(&f).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a loader thread panicked"))
            .collect()
    })
}

fn load_pop909(root: &Path, parts: Parts, limit: Option<usize>) -> Result<Loaded, String> {
    let pop = Pop909::open(root).map_err(|e| format!("{}: {e}", root.display()))?;
    let mut out = Loaded::default();
    let mut counts = Vec::new();
    for split in [Split::Train, Split::Validation, Split::Test] {
        if !parts.wants(split) {
            continue;
        }
        let mut ids = pop
            .split_ids(split)
            .map_err(|e| format!("{}: {e}", root.display()))?;
        if let Some(n) = limit {
            ids.truncate(n);
        }
        let results = parallel_map(&ids, |&id| {
            let s = pop
                .load(id, STEPS_PER_BEAT)
                .map_err(|e| format!("POP909 song {id:03}: {e}"))?;
            Piece::new(
                format!("pop909/{id:03}"),
                &s.song,
                s.grid,
                s.rolls,
                s.labels,
                s.annotated,
            )
        });
        let corpus = match split {
            Split::Train => &mut out.train,
            Split::Validation => &mut out.valid,
            Split::Test => &mut out.test,
        };
        for r in results {
            match r {
                Ok(p) => corpus.pieces.push(p),
                Err(e) => out.skipped.push(e),
            }
        }
        counts.push(format!("{} {:?}", corpus.pieces.len(), split).to_lowercase());
    }
    out.description = format!("POP909 ({})", counts.join(", "));
    Ok(out)
}

/// Every `.mid` / `.midi` file under `dir`, sorted.
fn midi_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    files_under(dir, &["mid", "midi"])
}

/// Every file under `dir` (its folders walked) whose extension is one of `extensions` (case
/// aside), sorted.
pub fn files_under(dir: &Path, extensions: &[&str]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries =
            std::fs::read_dir(&d).map_err(|e| format!("cannot read {}: {e}", d.display()))?;
        for entry in entries.flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p
                .extension()
                .is_some_and(|e| extensions.iter().any(|x| e.eq_ignore_ascii_case(x)))
            {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn load_midi(path: &Path, parts: Parts, limit: Option<usize>) -> Result<Loaded, String> {
    let mut files = if path.is_dir() {
        midi_files(path)?
    } else {
        vec![path.to_path_buf()]
    };
    if files.is_empty() {
        return Err(format!(
            "{} holds no .mid files and is not the POP909 folder",
            path.display()
        ));
    }
    if let Some(n) = limit {
        files.truncate(n);
    }
    let results = parallel_map(&files, |f| {
        let name = f
            .strip_prefix(path)
            .ok()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(f)
            .display()
            .to_string();
        let bytes = std::fs::read(f).map_err(|e| format!("{name}: {e}"))?;
        let song = read_midi(&bytes).map_err(|e| format!("{name}: {e}"))?;
        Piece::from_song(name, &song)
    });
    let mut out = Loaded::default();
    let hold_out = files.len() >= 10;
    for (i, r) in results.into_iter().enumerate() {
        match r {
            Ok(p) if hold_out && i % 10 == 5 => {
                if parts.valid {
                    out.valid.pieces.push(p)
                }
            }
            Ok(p) => {
                if parts.train {
                    out.train.pieces.push(p)
                }
            }
            Err(e) => out.skipped.push(e),
        }
    }
    if out.train.pieces.is_empty() && out.valid.pieces.is_empty() {
        return Err(format!(
            "none of the {} MIDI files under {} could be used: {}",
            files.len(),
            path.display(),
            out.skipped.first().map_or("", String::as_str)
        ));
    }
    out.description = format!(
        "{} ({} train, {} validation files)",
        path.display(),
        out.train.pieces.len(),
        out.valid.pieces.len()
    );
    Ok(out)
}
