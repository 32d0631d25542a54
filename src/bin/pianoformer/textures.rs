//! `pianoformer textures`: the gallery of named textures (`settings/textures.json`), found in
//! the training songs' piano parts by the rules of `pianoformer::music::texture::gallery`:
//! for each kind the four bars of 4/4 inside the annotated span that fit it best, each from
//! another song. Printed with their songs, bars and fits.

use std::path::PathBuf;

use pianoformer::data::corpus::Piece;
use pianoformer::data::sources::{self, Parts};
use pianoformer::music::piece::chord_cell;
use pianoformer::music::texture::donor::Donor;
use pianoformer::music::texture::gallery::{BAR, BARS, Kind, window_fit};

#[derive(clap::Args)]
pub struct Args {
    /// The POP909 folder (its training split is searched).
    #[arg(long, default_value = "../shared/data/pop909")]
    data: PathBuf,
    /// Where the gallery goes.
    #[arg(long, default_value = "settings/textures.json")]
    out: PathBuf,
    /// Read at most this many songs of each split (for a quick look).
    #[arg(long)]
    limit: Option<usize>,
}

pub fn run(args: Args) -> Result<(), String> {
    let parts = Parts {
        train: true,
        valid: false,
        test: false,
    };
    let data = sources::load(&args.data, parts, args.limit)?;
    eprintln!("data: {}", data.description);
    let pieces: Vec<&Piece> = data
        .train
        .pieces
        .iter()
        .filter(|p| p.has_accompaniment() && p.has_harmony())
        .collect();
    let mut taken: Vec<&str> = Vec::new();
    let mut gallery = Vec::new();
    for kind in Kind::ALL {
        let best = pieces
            .iter()
            .filter(|p| !taken.contains(&p.name.as_str()))
            .filter_map(|p| best_window(p, kind).map(|(bar, fit)| (*p, bar, fit)))
            .max_by(|a, b| a.2.total_cmp(&b.2).then(b.0.name.cmp(&a.0.name)));
        let Some((piece, bar, fit)) = best else {
            return Err(format!(
                "no training song has four steady bars of the {} rule",
                kind.name()
            ));
        };
        taken.push(&piece.name);
        let donor = donor(piece, bar, kind);
        println!(
            "{:<11} song {} bars {}-{}: fit {fit:.3}, {} notes",
            kind.name(),
            piece.name,
            bar + 1,
            bar + BARS,
            donor.notes.len()
        );
        gallery.push(donor);
    }
    let json = serde_json::to_string_pretty(&gallery).map_err(|e| e.to_string())?;
    std::fs::write(&args.out, json + "\n")
        .map_err(|e| format!("cannot write {}: {e}", args.out.display()))?;
    println!(
        "gallery: {} textures into {}",
        gallery.len(),
        args.out.display()
    );
    Ok(())
}

/// The first bar of `piece`'s four 4/4 bars inside its annotated span, with chords, that fit
/// `kind` best, and the fit; `None` where none does.
fn best_window(piece: &Piece, kind: Kind) -> Option<(usize, f64)> {
    let grid = &piece.sheet.grid;
    let labels = &piece.sheet.labels;
    let roll = &piece.sheet.rolls.piano;
    (0..grid.num_bars().saturating_sub(BARS - 1))
        .filter(|&b| {
            (b..b + BARS).all(|k| {
                let steps = grid.bar_steps(k);
                steps.len() == BAR
                    && piece.range.contains(&steps.start)
                    && steps.end <= piece.range.end
                    && labels.chord[steps].iter().any(Option::is_some)
            })
        })
        .map(|b| (b, window_fit(roll, grid.bar_steps(b).start, kind)))
        .filter(|&(_, fit)| fit > 0.0)
        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
}

/// Bars `bar..bar + 4` of `piece`'s piano as the gallery's `kind`.
fn donor(piece: &Piece, bar: usize, kind: Kind) -> Donor {
    let grid = &piece.sheet.grid;
    let roll = &piece.sheet.rolls.piano;
    let from = grid.bar_steps(bar).start;
    let to = grid.bar_steps(bar + BARS - 1).end;
    let beat_chords = piece.sheet.labels.beat_chords();
    let chords = (bar..bar + BARS)
        .map(|k| {
            let beats = grid.bar_beats(k);
            chord_cell(beat_chords.get(beats).unwrap_or(&[]))
        })
        .collect();
    let mut donor = Donor::of_roll(kind.name().into(), roll, from..to, vec![BAR; BARS], chords);
    let song = piece.name.rsplit('/').next().unwrap_or(&piece.name);
    donor.source = Some(format!(
        "POP909 song {song}, bars {}-{} (training split)",
        bar + 1,
        bar + BARS
    ));
    donor
}
