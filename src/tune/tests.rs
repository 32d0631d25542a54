use super::files::training_piece;
use super::*;
use crate::music::fixtures;
use crate::music::piece::TrackRole;

fn pieces(n: u8, bars: u64) -> Vec<Piece> {
    (0..n)
        .map(|k| {
            Piece::from_song(&fixtures::song(k * 5 % 12, bars), &format!("song{k}.mid")).unwrap()
        })
        .collect()
}

#[test]
fn every_file_is_split_at_a_bar_line_and_the_training_part_keeps_nothing_after_it() {
    let piece = &pieces(1, 10)[0];
    let p = prepare(piece, Task::Accompaniment, 0.2).unwrap();
    let held = p.held_out.expect("10 bars hold out 2");
    let cut = p.train.range.end;
    assert_eq!(held.range.start, cut);
    assert_eq!(
        p.train.sheet.grid.bar_of_step(cut).1,
        0,
        "cut on a bar line"
    );
    assert_eq!(p.train.sheet.rolls.num_steps(), cut);
    assert_eq!(p.train.sheet.labels.len(), cut);
    assert_eq!(
        p.report.train_bars + p.report.held_out_bars,
        p.train.sheet.grid.num_bars()
    );
    assert!(p.report.held_out_bars >= 2);
    // Tokens: the training part ends where the held-out part starts, on a bar.
    let whole = training_piece(piece, Task::Accompaniment).unwrap();
    assert_eq!(p.train.tokens.len() + held.tokens.len(), whole.tokens.len());
    assert_eq!(held.token_bars.first(), Some(&0));
    assert!(p.train.token_bars.iter().all(|&i| i < p.train.tokens.len()));
}

#[test]
fn files_without_what_the_task_needs_are_reported_in_words() {
    let mut piece = pieces(1, 8).remove(0);
    for t in &mut piece.tracks {
        if t.role == TrackRole::Piano {
            t.role = TrackRole::Other;
        }
    }
    let reports = inspect(std::slice::from_ref(&piece), Task::Accompaniment, 0.2);
    assert!(
        reports[0]
            .problem
            .as_deref()
            .unwrap()
            .contains("no accompaniment")
    );
    let ok = inspect(std::slice::from_ref(&piece), Task::Continuation, 0.2);
    assert_eq!(ok[0].problem, None, "continuation needs no piano track");
    assert!(ok[0].tokens > 0);
    let sung = inspect(std::slice::from_ref(&piece), Task::Melody, 0.2);
    assert_eq!(
        sung[0].problem, None,
        "the melody task needs no piano track"
    );
    for t in &mut piece.tracks {
        if matches!(t.role, TrackRole::Melody | TrackRole::Bridge) {
            t.role = TrackRole::Other;
        }
    }
    let reports = inspect(&[piece], Task::Melody, 0.2);
    let problem = reports[0].problem.as_deref().unwrap();
    assert!(
        problem.contains("no track is marked as the melody"),
        "{problem}"
    );
}

#[test]
fn every_task_has_a_window_the_files_can_fill() {
    let options = TuneOptions::default();
    for task in [
        Task::Accompaniment,
        Task::Continuation,
        Task::Harmonization,
        Task::Melody,
    ] {
        let window = options.window_for(task);
        assert!((16..=256).contains(&window), "{task:?}: {window}");
    }
}

use crate::model::config::PerformerConfig;
use crate::model::pe::{PeConfig, PeKind};
use crate::music::tokens::VOCAB_SIZE;
use burn::module::Module;
use burn::tensor::Device;
use pollster::block_on;

fn base(task: Task, device: &Device) -> Performer {
    let pe = PeConfig::new(PeKind::SineSpe).with_gate(true);
    let config = PerformerConfig::tiny(task, VOCAB_SIZE, pe);
    Performer::new(&config, 3, &device.clone().autodiff()).unwrap()
}

#[test]
fn thirty_steps_on_two_songs_lower_both_losses() {
    let device = Device::flex();
    for task in [Task::Accompaniment, Task::Continuation, Task::Melody] {
        let options = TuneOptions {
            steps: 30,
            learning_rate: 3e-3,
            eval_every: 30,
            ..TuneOptions::default()
        };
        let mut run = FineTune::new(base(task, &device), &pieces(2, 12), &options).unwrap();
        assert!(
            run.validation_windows() > 0,
            "{task:?}: held-out bars measured"
        );
        let first_valid = block_on(run.validate()).unwrap().unwrap();
        let mut reports = Vec::new();
        while !run.is_done() {
            reports.push(block_on(run.train_step()).unwrap());
        }
        assert_eq!(reports.len(), 30);
        let head: f32 = reports[..5].iter().map(|r| r.loss).sum::<f32>() / 5.0;
        let tail: f32 = reports[25..].iter().map(|r| r.loss).sum::<f32>() / 5.0;
        assert!(
            tail < 0.8 * head,
            "{task:?}: training loss {head} -> {tail}"
        );
        let last_valid = reports[29]
            .valid_loss
            .expect("measured after the last step");
        assert!(
            last_valid < first_valid,
            "{task:?}: held-out loss {first_valid} -> {last_valid}"
        );
        assert_eq!(run.valid_losses.len(), 2);
    }
}

#[test]
fn training_only_the_top_leaves_the_lower_layers_alone() {
    let device = Device::flex();
    let model = base(Task::Accompaniment, &device);
    let before = model.blocks[0].wq.weight.val();
    let head_before = model.head.weight.val();
    let options = TuneOptions {
        steps: 3,
        learning_rate: 1e-3,
        trainable: Trainable::Top,
        top_layers: 1,
        ..TuneOptions::default()
    };
    let mut run = FineTune::new(model, &pieces(1, 8), &options).unwrap();
    while !run.is_done() {
        block_on(run.train_step()).unwrap();
    }
    let m = run.model();
    let same = |a: burn::tensor::Tensor<2>, b: burn::tensor::Tensor<2>| {
        a.sub(b).abs().max().into_scalar::<f32>() == 0.0
    };
    assert!(same(m.blocks[0].wq.weight.val(), before), "block 1 froze");
    assert!(!same(m.head.weight.val(), head_before), "the head trained");
    let last = m.blocks.len() - 1;
    assert!(m.blocks[last].wq.weight.val().is_require_grad());
    assert!(!m.blocks[0].wq.weight.val().is_require_grad());
    assert!(m.num_params() > 0);
}

#[test]
fn a_diverging_run_stops_and_puts_back_the_last_good_weights() {
    let device = Device::flex();
    let options = TuneOptions {
        steps: 200,
        learning_rate: 1e-3,
        ..TuneOptions::default()
    };
    let mut run =
        FineTune::new(base(Task::Continuation, &device), &pieces(2, 12), &options).unwrap();
    for _ in 0..4 {
        block_on(run.train_step()).unwrap();
    }
    // Far beyond what the options allow: the weights blow up within a few steps.
    run.set_learning_rate(1e4);
    let mut snapshots = Vec::new();
    let err = loop {
        snapshots.push(block_on(run.model().to_bytes_async()).unwrap());
        match block_on(run.train_step()) {
            Ok(_) => assert!(snapshots.len() < 50, "never diverged"),
            Err(e) => break e,
        }
    };
    let TuneError::Diverged { step, restored, .. } = err.clone() else {
        panic!("{err}")
    };
    assert!(err.to_string().contains("lower learning rate"), "{err}");
    assert_eq!(restored + 2, step, "back to the step before the bad one");
    assert!(run.is_done());
    // The weights now are those the last sound step started from.
    let now = block_on(run.model().to_bytes_async()).unwrap();
    assert_eq!(&now, &snapshots[snapshots.len() - 2]);
    assert!(matches!(
        block_on(run.train_step()),
        Err(TuneError::Finished)
    ));
}

#[test]
fn weights_read_asynchronously_are_the_records_bytes_and_load_back() {
    let device = Device::flex();
    for task in [Task::Accompaniment, Task::Continuation] {
        let model = base(task, &device);
        let asynchronous = block_on(model.to_bytes_async()).unwrap();
        assert_eq!(asynchronous, model.clone().to_bytes().unwrap(), "{task:?}");
        let back = Performer::from_bytes(&model.config, &asynchronous, &device).unwrap();
        assert_eq!(back.to_bytes().unwrap(), asynchronous);
    }
}

#[test]
fn bad_settings_are_refused_in_words() {
    let bad = TuneOptions {
        learning_rate: 0.5,
        ..TuneOptions::default()
    };
    assert!(bad.validate().unwrap_err().contains("learning rate"));
    let bad = TuneOptions {
        steps: 0,
        ..TuneOptions::default()
    };
    assert!(bad.validate().unwrap_err().contains("steps"));
}

#[test]
fn a_run_restored_from_a_snapshot_goes_on_from_its_step_with_its_weights_and_losses() {
    // What the page does when the GPU a run trains on is lost: a new run of the same base,
    // files and settings (on the CPU) takes the last step's snapshot and goes on from there.
    let device = Device::flex();
    let options = TuneOptions {
        steps: 5,
        learning_rate: 1e-3,
        trainable: Trainable::Top,
        top_layers: 1,
        eval_every: 2,
        ..TuneOptions::default()
    };
    let songs = pieces(2, 12);
    let model = base(Task::Accompaniment, &device);
    let mut run = FineTune::new(model.clone(), &songs, &options).unwrap();
    block_on(run.validate()).unwrap();
    for _ in 0..2 {
        block_on(run.train_step()).unwrap();
    }
    let (progress, weights) = block_on(run.snapshot()).unwrap();
    assert_eq!(progress.step, 2);
    assert_eq!(progress.losses.len(), 2);
    assert_eq!(
        progress.valid_losses.len(),
        2,
        "before the first step and after the second"
    );
    // Through JSON, as the Worker keeps it.
    let progress: Progress =
        serde_json::from_str(&serde_json::to_string(&progress).unwrap()).unwrap();

    let mut resumed = FineTune::new(model, &songs, &options).unwrap();
    resumed.restore(progress.clone(), &weights).unwrap();
    assert_eq!(resumed.step(), 2);
    assert_eq!(block_on(resumed.model().to_bytes_async()).unwrap(), weights);
    assert_eq!(resumed.losses, run.losses);
    // The frozen blocks stay frozen.
    assert!(!resumed.model().blocks[0].wq.weight.val().is_require_grad());
    let next = block_on(resumed.train_step()).unwrap();
    assert_eq!(next.step, 3);
    assert!(next.loss.is_finite());
    // Its batch is the one step 3 of the first run reads: the same loss from the same weights.
    let ahead = block_on(run.train_step()).unwrap();
    assert!(
        (ahead.loss - next.loss).abs() < 1e-5,
        "{} against {}",
        ahead.loss,
        next.loss
    );
    while !resumed.is_done() {
        block_on(resumed.train_step()).unwrap();
    }
    assert_eq!(resumed.losses.len(), 5);
    assert_eq!(
        resumed.losses.iter().map(|&(s, _)| s).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );

    // A snapshot from a longer run than this one is refused in words.
    let short = TuneOptions {
        steps: 1,
        ..options
    };
    let mut other = FineTune::new(base(Task::Accompaniment, &device), &songs, &short).unwrap();
    let err = other.restore(progress, &weights).unwrap_err();
    assert!(err.to_string().contains("past this run's 1 steps"), "{err}");
}
