use super::*;
use crate::music::fixtures;
use crate::music::harmony::ChordSource;
use crate::music::piece::{Piece, TrackRole};

/// The OpenEWLD lead sheets (`../shared/data/openewld`), when the data folder is there.
fn openewld() -> Option<Vec<std::path::PathBuf>> {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/openewld/dataset");
    if !dir.is_dir() {
        eprintln!(
            "skipped: {} is absent (the OpenEWLD lead sheets)",
            dir.display()
        );
        return None;
    }
    let mut files = Vec::new();
    let mut stack = vec![dir];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "mxl") {
                files.push(p);
            }
        }
    }
    files.sort();
    Some(files)
}

/// (pitch, start) of a piece's melody notes, and its chord cells over its first `bars` bars.
fn melody_and_chords(piece: &Piece, bars: usize) -> (Vec<(u8, u64)>, Vec<String>) {
    let mut melody: Vec<(u8, u64)> = piece
        .tracks
        .iter()
        .filter(|t| t.role == TrackRole::Melody)
        .flat_map(|t| t.notes.iter().map(|n| (n.0, n.1)))
        .collect();
    melody.sort();
    (melody, piece.chords.iter().take(bars).cloned().collect())
}

#[test]
fn lead_sheets_read_with_their_own_chord_symbols_and_go_back_out_with_them() {
    let Some(files) = openewld() else { return };
    assert!(files.len() >= 500, "{} lead sheets", files.len());
    let mut failed = Vec::new();
    // Every lead sheet reads; every 10th becomes a piece, whose chord lane is the score's own
    // symbols at each bar line, and goes out as a lead sheet and back with the same melody
    // and chords.
    for (i, f) in files.iter().enumerate() {
        let bytes = std::fs::read(f).unwrap();
        let score = match read_musicxml(&bytes) {
            Ok(s) => s,
            Err(e) => {
                failed.push(format!("{}: {e}", f.display()));
                continue;
            }
        };
        assert!(score.song.note_count() > 0, "{}: no notes", f.display());
        if i % 10 != 0 {
            continue;
        }
        let piece = read_piece(&bytes, "lead.mxl").unwrap();
        assert_eq!(
            piece.chord_source,
            Some(ChordSource::Score),
            "{}",
            f.display()
        );
        let grid = piece.grid(|_| true);
        for (bar, cell) in piece.chords.iter().enumerate().take(grid.num_bars()) {
            let tick = grid.tick_at(grid.bar_steps(bar).start);
            let at = score.chords.partition_point(|c| c.0 <= tick);
            let written = at.checked_sub(1).and_then(|k| score.chords[k].1);
            let first = cell.split_whitespace().next().unwrap_or("N");
            assert_eq!(
                first,
                written.map_or("N".to_string(), |c| c.name()),
                "{} bar {}: the lane is the score's symbol",
                f.display(),
                bar + 1
            );
        }
        let out = write_musicxml(&piece, ScoreKind::LeadSheet).unwrap();
        let back = read_piece(out.as_bytes(), "back.musicxml")
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let bars = grid.num_bars();
        let (m0, c0) = melody_and_chords(&piece, bars);
        let (m1, c1) = melody_and_chords(&back, bars);
        assert_eq!(c1, c0, "{}: the chord symbols come back", f.display());
        // Notes come back on the sixteenth grid the score is written on.
        let on_grid = |m: &[(u8, u64)]| -> Vec<(u8, usize)> {
            m.iter().map(|&(p, s)| (p, grid.step_at(s))).collect()
        };
        assert_eq!(
            on_grid(&m1),
            on_grid(&m0),
            "{}: the melody comes back",
            f.display()
        );
    }
    eprintln!(
        "{} of {} OpenEWLD lead sheets read",
        files.len() - failed.len(),
        files.len()
    );
    assert!(
        failed.len() * 50 <= files.len(),
        "{} of {} not read: {failed:?}",
        failed.len(),
        files.len()
    );
}

#[test]
fn a_piece_goes_out_as_a_score_and_comes_back() {
    let mut piece = Piece::from_song(&fixtures::song(3, 4), "fixture.mid").unwrap();
    piece.chords[1] = "G7 Am".into();
    piece.chords[2] = String::new();
    for kind in [ScoreKind::LeadSheet, ScoreKind::Full] {
        let xml = write_musicxml(&piece, kind).unwrap();
        assert!(xml.contains("<score-partwise version=\"4.0\">"));
        let mxl = write_mxl(&piece, kind).unwrap();
        for bytes in [xml.as_bytes(), &mxl[..]] {
            let back = read_piece(bytes, "back.mxl").unwrap();
            let (m0, c0) = melody_and_chords(&piece, 4);
            let (m1, c1) = melody_and_chords(&back, 4);
            assert_eq!(m1, m0, "{kind:?}: the melody");
            assert_eq!(
                c1[..3],
                c0[..3],
                "{kind:?}: the chord lane, a bar of none included"
            );
            let notes = |p: &Piece| p.tracks.iter().map(|t| t.notes.len()).sum::<usize>();
            match kind {
                ScoreKind::LeadSheet => assert_eq!(back.tracks.len(), 1),
                ScoreKind::Full => {
                    assert_eq!(back.tracks.len(), 2);
                    assert_eq!(notes(&back), notes(&piece), "every note of every part");
                }
            }
        }
    }
    assert_eq!(piece.chords[1], "G7 Am");
}

/// The piano's sustain pedal goes out as pedal marks (start, stop, change where a lift and a
/// press meet) and comes back as the same spans on the score's sixteenths; marks a notation
/// program writes as `<sound damper-pedal>` (yes, no, a percentage) read too, and a bad one
/// is refused in words.
#[test]
fn the_pedal_goes_out_as_marks_and_comes_back() {
    let mut piece = Piece::from_song(&fixtures::song(3, 4), "fixture.mid").unwrap();
    let piano = piece
        .tracks
        .iter()
        .position(|t| t.role == TrackRole::Piano)
        .unwrap();
    // Down bar 1, a change at bar 2 (lift and press at one tick), up after bar 3's second beat.
    piece.tracks[piano].pedal = vec![(0, 64, 127), (1920, 64, 0), (1920, 64, 100), (4800, 64, 0)];
    let xml = write_musicxml(&piece, ScoreKind::Full).unwrap();
    assert!(xml.contains("<pedal type=\"change\""), "{xml}");
    let back = read_piece(xml.as_bytes(), "back.musicxml").unwrap();
    let spans = |p: &Piece| {
        let t = p.tracks.iter().find(|t| !t.pedal.is_empty()).unwrap();
        crate::music::pedal::down_spans(&t.pedal, u64::MAX)
            .into_iter()
            .map(|(a, b)| (a as f64 / p.ppq as f64, b as f64 / p.ppq as f64))
            .collect::<Vec<_>>()
    };
    assert_eq!(spans(&back), spans(&piece));
    let marked = |sound: &str| {
        format!(
            "<score-partwise><part-list><score-part id=\"P1\"/></part-list><part id=\"P1\">\
             <measure number=\"1\"><attributes><divisions>1</divisions></attributes>\
             <direction><direction-type><words>Ped.</words></direction-type>{sound}</direction>\
             <note><pitch><step>C</step><octave>4</octave></pitch><duration>4</duration></note>\
             </measure></part></score-partwise>"
        )
    };
    let read = |sound: &str| read_piece(marked(sound).as_bytes(), "p.musicxml");
    let pedal = read("<sound damper-pedal=\"50\" soft-pedal=\"yes\"/>").unwrap();
    assert_eq!(pedal.tracks[0].pedal, vec![(0, 64, 64), (0, 67, 127)]);
    let err = read("<sound damper-pedal=\"lots\"/>")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("damper-pedal") && err.contains("measure 1"),
        "{err}"
    );
}

/// A score of `count` 4/4 measures (the first empty), each with `notes` quarter notes, one
/// after another, or with `chord` all at once.
fn measures(count: usize, notes: usize, chord: bool) -> Vec<u8> {
    let note = |c: &str| {
        format!(
            "<note>{c}<pitch><step>C</step><octave>4</octave></pitch><duration>1</duration></note>"
        )
    };
    let measure = note("") + &note(if chord { "<chord/>" } else { "" }).repeat(notes - 1);
    let mut xml = String::from(
        "<score-partwise><part-list><score-part id=\"P1\"/></part-list><part id=\"P1\">\
         <measure number=\"1\"><attributes><divisions>1</divisions><time><beats>4</beats>\
         <beat-type>4</beat-type></time></attributes></measure>",
    );
    for m in 2..=count {
        xml.push_str(&format!("<measure number=\"{m}\">{measure}</measure>"));
    }
    xml.push_str("</part></score-partwise>");
    xml.into_bytes()
}

/// The notes of a score are counted once: 1 000 measures of four notes (4 000 notes) read,
/// where the count of every measure's notes so far refused them as more than 200 000.
#[test]
fn a_long_score_reads_whole() {
    let piece = read_piece(&measures(1_000, 4, false), "long.musicxml").unwrap();
    let notes: usize = piece.tracks.iter().map(|t| t.notes.len()).sum();
    assert_eq!(notes, 999 * 4);
}

#[test]
fn hostile_musicxml_gets_a_sentence() {
    let part = |measure: &str| {
        format!(
            "<score-partwise><part-list><score-part id=\"P1\"/></part-list><part id=\"P1\">\
             <measure number=\"1\"><attributes><divisions>1</divisions></attributes>{measure}\
             </measure></part></score-partwise>"
        )
    };
    let laughs = format!(
        "<!DOCTYPE s [<!ENTITY a \"aaaaaaaaaa\">{}]><score-partwise>&j;</score-partwise>",
        (b'b'..=b'j')
            .map(|c| format!(
                "<!ENTITY {} \"{}\">",
                c as char,
                format!("&{};", (c - 1) as char).repeat(10)
            ))
            .collect::<String>()
    );
    let deep = format!("<score-partwise>{}</score-partwise>", "<a>".repeat(100_000));
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    zip.start_file("score.xml", zip::write::SimpleFileOptions::default())
        .unwrap();
    std::io::Write::write_all(&mut zip, &vec![b' '; MAX_XML_BYTES + 10]).unwrap();
    let bomb = zip.finish().unwrap().into_inner();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"".to_vec(), "not"),
        (b"\x00\x01garbage".to_vec(), "not"),
        (b"<html><body/></html>".to_vec(), "<html>"),
        (b"<score-partwise><part-list>".to_vec(), "not well formed"),
        (b"<score-timewise/>".to_vec(), "timewise"),
        (b"<score-partwise/>".to_vec(), "no <part>"),
        (b"PK\x03\x04 truncated".to_vec(), ".mxl"),
        (bomb, "MB"),
        (laughs.into_bytes(), "not well formed"),
        (deep.into_bytes(), "not well formed"),
        (part("<note><pitch><step>H</step><octave>4</octave></pitch><duration>1</duration></note>").into_bytes(), "not one"),
        (part("<note><pitch><step>C</step><octave>40</octave></pitch><duration>1</duration></note>").into_bytes(), "off the MIDI keyboard"),
        (part("<note><pitch><step>C</step><octave>4</octave></pitch><duration>1e30</duration></note>").into_bytes(), "cannot be"),
        (part("<note><pitch><step>C</step></pitch><duration>1</duration></note>").into_bytes(), "without an octave"),
        (part("<attributes><divisions>0</divisions></attributes>").into_bytes(), "divisions"),
        (part("<harmony><kind>major</kind></harmony>").into_bytes(), "without a root"),
        (part("<note><rest/><duration>4</duration></note>").into_bytes(), "no notes"),
        (part("<forward><duration>999999</duration></forward><note><pitch><step>C</step><octave>4</octave></pitch><duration>1</duration></note>").into_bytes(), "quarter notes"),
        // Notes whose durations are not numbers were dropped, and the file then said to hold
        // no notes.
        (part("<note><pitch><step>C</step><octave>4</octave></pitch><duration>NaN</duration></note>").into_bytes(), "lasts \"NaN\" divisions, which is not a number"),
        (part("<note><pitch><step>C</step><octave>4</octave></pitch><duration>inf</duration></note>").into_bytes(), "not a number"),
        // 10 000 measures of four notes: the measures are too many, not the notes.
        (measures(10_000, 4, false), "more than 4096 measures"),
        (measures(3, 120_000, true), "more than 200000 notes"),
    ];
    for (bytes, says) in cases {
        let err = read_piece(&bytes, "bad.musicxml")
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{says:?} in {err:?}");
    }
}

/// The phrase lanes the detector gives the OpenEWLD lead sheets (no labels to score them by):
/// how many lead sheets get a single phrase over 12 bars or more, and the lanes' lengths.
/// `cargo test --lib lead_sheet_phrases -- --ignored --nocapture`.
#[test]
#[ignore]
fn lead_sheet_phrases() {
    let Some(files) = openewld() else { return };
    let (mut one, mut long, mut repeats, mut read) = (0, 0, 0, 0);
    let mut lengths = std::collections::BTreeMap::new();
    for f in &files {
        let Ok(score) = read_musicxml(&std::fs::read(f).unwrap()) else {
            continue;
        };
        let Ok(piece) = Piece::from_song(&score.song, "x.mxl") else {
            continue;
        };
        read += 1;
        let bars: usize = piece.phrases.iter().map(|p| p.1).sum();
        if bars >= 12 {
            long += 1;
            one += (piece
                .phrases
                .iter()
                .filter(|p| p.0.is_ascii_uppercase())
                .count()
                <= 1) as usize;
        }
        let letters: Vec<char> = piece.phrases.iter().map(|p| p.0).collect();
        repeats += letters
            .iter()
            .enumerate()
            .any(|(i, c)| c.is_ascii_uppercase() && letters[..i].contains(c))
            as usize;
        for p in &piece.phrases {
            *lengths.entry(p.1).or_insert(0usize) += 1;
        }
    }
    eprintln!(
        "{read} lead sheets: {one} of the {long} of 12 bars or more get one melodic phrase; \
         {repeats} have a letter that returns; phrase lengths {lengths:?}"
    );
}
