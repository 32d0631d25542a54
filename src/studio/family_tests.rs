//! The task family: a toy task joins in this file alone (one impl, one row of a table of its
//! own beside the real rows) and runs through the Session's path (`generate_json`) and the
//! CLI's (`Family::generate`, `Family::describe`); the real rows give what their studio
//! functions give.

use burn::tensor::Device;

use super::family::{Family, Generated, Kept, Run, Studio, Written, generate_json};
use super::*;
use crate::generate::{GenerateError, MapFeatures};
use crate::model::config::{Direction, PerformerConfig, Task};
use crate::model::pe::{PeConfig, PeKind};
use crate::model::performer::Performer;
use crate::models::ModelDefaults;
use crate::music::fixtures;
use crate::music::piece::{Piece, PieceTrack, TrackRole};
use crate::music::tokens::VOCAB_SIZE;

/// A toy task: a bass note on the root of every bar's first chord, an octave lower for every
/// seed past the first (so alternatives differ), with a report a bar; its cache counts the
/// calls it served.
struct Bass;

#[derive(Default)]
struct Calls(usize);

impl Studio for Bass {
    const MODEL: Task = Task::Accompaniment;
    // Only what every task is asked.
    type Options = Common;
    type Cache = Calls;

    async fn generate<F, Fut>(
        _run: &Run<'_>,
        piece: &Piece,
        options: &Common,
        cache: &mut Calls,
        mut on_progress: F,
    ) -> Result<Generated, GenerateError>
    where
        F: FnMut(Progress) -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        cache.0 += 1;
        let cells = piece.bar_chords()?;
        let mut pieces = Vec::new();
        for k in 0..options.count() {
            let octave = 36 - 12 * (options.alternative(k).seed % 2) as u8;
            let mut notes = Vec::new();
            for (bar, cell) in cells.iter().enumerate() {
                if let Some(chord) = cell.iter().flatten().next() {
                    let end = piece.bar_tick(bar + 1).max(piece.bar_tick(bar) + 1);
                    notes.push((octave + chord.root, piece.bar_tick(bar), end, 80));
                }
                let go_on = on_progress(Progress {
                    done: bar + 1,
                    total: cells.len(),
                    bars: None,
                    notes: Some(notes.clone()),
                    attention: None,
                    alternative: None,
                })
                .await;
                if !go_on {
                    return Err(GenerateError::Cancelled);
                }
            }
            let mut out = piece.clone();
            out.tracks.push(PieceTrack {
                pedal: Vec::new(),
                name: "BASS".into(),
                role: TrackRole::Generated,
                program: 32,
                channel: Some(2),
                notes,
            });
            out.refresh();
            pieces.push(out);
        }
        Ok(Generated::pieces(pieces))
    }

    fn describe(_before: &Piece, written: &Written, _options: &Common) -> String {
        let notes = written.piece.tracks.last().map_or(0, |t| t.notes.len());
        format!("{notes} bass notes")
    }
}

mod table {
    // The real rows, and the toy's.
    crate::tasks! {
        Accompaniment = "accompaniment" => super::super::accompany::Accompany;
        Continuation = "continuation" => super::super::continuation::Continue;
        Harmonization = "harmonization" => super::super::harmonize::Harmonize;
        Melody = "melody" => super::super::melody::Melody;
        Bass = "bass" => super::Bass;
    }
}
use table::TaskKind as WithBass;

fn piece() -> Piece {
    Piece::from_song(&fixtures::song(0, 8), "fixture.mid").unwrap()
}

fn tiny(task: Task, device: &Device) -> Performer {
    let config = PerformerConfig::tiny(task, VOCAB_SIZE, PeConfig::new(PeKind::SineSpe));
    Performer::new(&config, 1, device).unwrap()
}

fn run<'a>(model: &'a Performer, defaults: &'a ModelDefaults, device: &'a Device) -> Run<'a> {
    Run {
        model,
        defaults,
        device,
        dynamics: None,
        pedal: None,
    }
}

#[test]
fn a_toy_task_runs_through_the_sessions_path_and_the_clis() {
    let device = Device::flex();
    let model = tiny(Task::Accompaniment, &device);
    let defaults = ModelDefaults::default();
    let run = run(&model, &defaults, &device);
    let piece = piece();
    let mut kept = Kept::default();

    // The Session's: by name, the page's JSON in and out.
    let mut reports = 0;
    let json = pollster::block_on(generate_json::<WithBass, _, _>(
        "bass",
        &run,
        &piece,
        r#"{"seed": 4, "alternatives": 2}"#,
        &mut kept,
        |_| {
            reports += 1;
            async { true }
        },
    ))
    .unwrap();
    let bars = piece.bar_chords().unwrap().len();
    assert_eq!(reports, 2 * bars, "a report a bar for each alternative");
    let out: serde_json::Value = serde_json::from_str(&json).unwrap();
    let pieces: Vec<Piece> = serde_json::from_value(out["alternatives"].clone()).unwrap();
    assert_eq!(pieces.len(), 2);
    let bass = |p: &Piece| p.tracks.last().unwrap().notes.clone();
    let roots: Vec<u8> = piece
        .bar_chords()
        .unwrap()
        .iter()
        .filter_map(|cell| cell.iter().flatten().next().map(|c| c.root))
        .collect();
    assert_eq!(
        bass(&pieces[0]).iter().map(|n| n.0).collect::<Vec<_>>(),
        roots.iter().map(|r| 36 + r).collect::<Vec<_>>(),
        "seed 4: the roots from C2"
    );
    assert!(
        bass(&pieces[1]).iter().all(|n| n.0 < 36),
        "seed 5: an octave lower"
    );

    // The CLI's: the kind parsed from --task, the settings its flags fill, the report in words.
    let kind: WithBass = "bass".parse().unwrap();
    assert_eq!(kind.model(), Task::Accompaniment);
    let options = serde_json::json!({ "seed": 4, "threshold": 0.5 });
    let written =
        pollster::block_on(kind.generate(&run, &piece, &options, &mut kept, |_| async { true }))
            .unwrap()
            .into_pieces();
    assert_eq!(written.len(), 1);
    assert_eq!(
        bass(&written[0].piece),
        bass(&pieces[0]),
        "the same seed, the same bass"
    );
    assert_eq!(
        kind.describe(&piece, &written[0], &options),
        format!("{} bass notes", bass(&pieces[0]).len())
    );
    assert_eq!(
        kept.cache::<Calls>().0,
        2,
        "the task's cache is kept between calls"
    );

    // Cancelled in words; no map for a task without one.
    let cancelled =
        pollster::block_on(kind.generate(&run, &piece, &options, &mut kept, |_| async { false }));
    assert!(matches!(cancelled, Err(GenerateError::Cancelled)));
    let mut features = MapFeatures::default();
    let map =
        pollster::block_on(
            kind.attention(&run, &piece, &options, &mut features, |_| async { true }),
        );
    let said = map.unwrap_err().to_string();
    assert!(
        said.contains(
            "bass model's attention is not shown: pick a model of another task (accompaniment, \
             continuation, harmonization or melody)"
        ),
        "{said}"
    );
}

#[test]
fn the_table_names_every_task_and_refuses_the_wrong_model_in_words() {
    let names: Vec<&str> = TaskKind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(
        names,
        [
            "accompaniment",
            "continuation",
            "harmonization",
            "melody",
            "live"
        ]
    );
    for &kind in TaskKind::ALL {
        assert_eq!(kind.name().parse::<TaskKind>(), Ok(kind));
        // A map is drawn for a model: by the first row that runs its kind.
        let mapped = TaskKind::for_model(kind.model()).expect("a row");
        assert_eq!(mapped.model(), kind.model());
        assert!(
            TaskKind::ALL.iter().position(|&k| k == mapped)
                <= TaskKind::ALL.iter().position(|&k| k == kind)
        );
    }
    assert_eq!(
        TaskKind::for_model(Task::Accompaniment),
        Some(TaskKind::Accompaniment)
    );
    let unknown = "drums".parse::<TaskKind>().unwrap_err();
    assert!(
        unknown.contains("use accompaniment, continuation, harmonization, melody, live"),
        "{unknown}"
    );

    let device = Device::flex();
    let model = tiny(Task::Accompaniment, &device);
    let defaults = ModelDefaults::default();
    let run = run(&model, &defaults, &device);
    let mut kept = Kept::default();
    let wrong = pollster::block_on(generate_json::<TaskKind, _, _>(
        "melody",
        &run,
        &piece(),
        "{}",
        &mut kept,
        |_| async { true },
    ))
    .unwrap_err();
    assert!(matches!(wrong, GenerateError::WrongTask { .. }), "{wrong}");
    let unreadable = pollster::block_on(generate_json::<TaskKind, _, _>(
        "accompaniment",
        &run,
        &piece(),
        r#"{"seed": "four"}"#,
        &mut kept,
        |_| async { true },
    ))
    .unwrap_err();
    assert!(
        unreadable
            .to_string()
            .contains("the generation settings are not readable"),
        "{unreadable}"
    );
    let harmonizer = PerformerConfig::tiny(Task::Harmonization, 0, PeConfig::new(PeKind::SineSpe))
        .with_direction(Some(Direction::Bidirectional));
    let model = Performer::new(&harmonizer, 1, &device).unwrap();
    let run = super::family::Run {
        model: &model,
        defaults: &defaults,
        device: &device,
        dynamics: None,
        pedal: None,
    };
    let chords = pollster::block_on(generate_json::<TaskKind, _, _>(
        "harmonization",
        &run,
        &piece(),
        r#"{"bars": "all"}"#,
        &mut kept,
        |_| async { true },
    ))
    .unwrap_err();
    assert!(
        chords
            .to_string()
            .contains("the chord settings are not readable"),
        "{chords}"
    );
}

#[test]
fn the_rows_give_what_their_studio_functions_give() {
    let device = Device::flex();
    let piece = piece();
    let mut kept = Kept::default();
    // One settings object for both tasks, as the page sends it.
    let settings = serde_json::json!({ "seed": 3, "threshold": 0.45, "bars": 1, "tokens": 24 });
    let json = settings.to_string();
    let options = AccompanyOptions::deserialize(&settings).unwrap();

    let model = tiny(Task::Accompaniment, &device);
    let defaults = ModelDefaults::default();
    let run = run(&model, &defaults, &device);
    let direct = pollster::block_on(accompany_piece(
        &model,
        &ModelPlay::of(&defaults),
        &piece,
        &options,
        &device,
        |_| async { true },
    ))
    .unwrap();
    let through = pollster::block_on(generate_json::<TaskKind, _, _>(
        "accompaniment",
        &run,
        &piece,
        &json,
        &mut kept,
        |_| async { true },
    ))
    .unwrap();
    assert_eq!(through, serde_json::to_string(&direct).unwrap());

    // A continuation: the model's own temperature unless one is given.
    let model = tiny(Task::Continuation, &device);
    let defaults = ModelDefaults {
        temperature: Some(0.5),
        ..ModelDefaults::default()
    };
    let run = super::family::Run {
        model: &model,
        defaults: &defaults,
        device: &device,
        dynamics: None,
        pedal: None,
    };
    let at_half = ContinueOptions {
        temperature: Some(0.5),
        ..ContinueOptions::deserialize(&settings).unwrap()
    };
    let direct = pollster::block_on(continue_piece(
        &model,
        &piece,
        &at_half,
        &device,
        |_| async { true },
    ))
    .unwrap();
    let through = pollster::block_on(TaskKind::Continuation.generate(
        &run,
        &piece,
        &settings,
        &mut kept,
        |_| async { true },
    ))
    .unwrap()
    .into_pieces();
    assert_eq!(through[0].piece, direct);
    let tokens = through[0].tokens.as_ref().unwrap();
    assert!(!tokens.added.is_empty() && !tokens.prompt.is_empty());
    let said = TaskKind::Continuation.describe(&piece, &through[0], &settings);
    assert!(
        said.contains(&format!("{} new tokens", tokens.added.len())),
        "{said}"
    );

    // Each model keeps its own map features and caches: a map through the family is the map.
    let mut map = MapFeatures::default();
    let watched = ContinueOptions {
        common: Common {
            watch: Some(WatchOptions { layer: 0, head: 0 }),
            ..Common::default()
        },
        ..ContinueOptions::default()
    };
    let direct = pollster::block_on(continuation_attention(
        &model,
        &piece,
        &watched,
        &device,
        Some(&mut map),
        |_| async { true },
    ))
    .unwrap();
    let through = pollster::block_on(super::family::attention::<TaskKind, _, _>(
        &run,
        &piece,
        &serde_json::to_string(&watched).unwrap(),
        &mut MapFeatures::default(),
        |_| async { true },
    ))
    .unwrap();
    assert_eq!(through, direct);
}
