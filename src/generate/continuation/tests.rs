use super::*;
use crate::model::config::PerformerConfig;
use crate::model::pe::{PeConfig, PeKind};
use Token as T;

/// `Bos`, then `bars` bars of `per_bar` notes each (4 tokens a note plus `Bar`).
fn bars(bars: usize, per_bar: usize) -> Vec<u32> {
    let mut ids = vec![T::Bos.id()];
    for b in 0..bars {
        ids.push(T::Bar.id());
        for k in 0..per_bar {
            ids.extend([
                T::Position(k as u8).id(),
                T::Pitch(60 + (b % 12) as u8).id(),
                T::Velocity(4).id(),
                T::Duration(1).id(),
            ]);
        }
    }
    ids
}

/// An untrained tiny continuation model with sineSPE.
fn tiny_sinespe(device: &Device) -> Performer {
    let config = PerformerConfig::tiny(
        Task::Continuation,
        tokens::VOCAB_SIZE,
        PeConfig::new(PeKind::SineSpe),
    );
    Performer::new(&config, 4, device).unwrap()
}

#[test]
fn a_view_keeps_the_first_bars_and_the_last_ones_from_bar_lines() {
    let ids = bars(40, 3); // 13 tokens a bar
    let view = View::of(&ids, 128);
    // The anchor: the whole bars within the first 32 tokens (Bos and two bars).
    assert_eq!(view.anchor, 27);
    assert_eq!(view.ids[..view.anchor], ids[..27]);
    // The end: from the first bar line among the last 64 tokens.
    let recent = view.anchor + view.gap;
    assert_eq!(ids[recent], T::Bar.id());
    assert!(ids.len() - recent <= 64 && ids.len() - recent > 64 - 13);
    assert_eq!(view.ids[view.anchor..], ids[recent..]);
    assert!(view.ids.len() <= 128 / 4 + 128 / 2 + 1);
    // Short music: all of it.
    assert_eq!(View::of(&ids[..60], 128), View::all(&ids[..60]));
    // No bar line among the last tokens: all of it, whatever the length.
    let mut long_bar = vec![T::Bos.id(), T::Bar.id()];
    long_bar.extend(std::iter::repeat_n(T::Position(0).id(), 300));
    assert_eq!(View::of(&long_bar, 128).gap, 0);
}

#[test]
fn attention_rows_of_a_view_are_placed_over_the_whole_sequence() {
    let view = View {
        ids: vec![],
        anchor: 2,
        gap: 3,
    };
    // Two rows (view queries 3 and 4) over 5 keys: keys 0–1 stay, then 3 zeros, then 2–4.
    let rows = AttentionRows {
        start: 3,
        keys: 5,
        values: (0..10).map(|v| v as f32).collect(),
    };
    let placed = view.place(Some(rows)).unwrap();
    assert_eq!(placed.start, 6);
    assert_eq!(placed.keys, 8);
    assert_eq!(
        placed.values,
        [
            0., 1., 0., 0., 0., 2., 3., 4., 5., 6., 0., 0., 0., 7., 8., 9.
        ]
    );
    // A block that starts in the anchor: its rows there are left out.
    let rows = AttentionRows {
        start: 1,
        keys: 3,
        values: (0..6).map(|v| v as f32).collect(),
    };
    let placed = view.place(Some(rows)).unwrap();
    assert_eq!((placed.start, placed.keys), (5, 6));
    assert_eq!(placed.values, [3., 4., 0., 0., 0., 5.]);
    assert_eq!(View::all(&[1, 2]).place(None), None);
}

/// With a context, the model starts again (its positions never pass the context), the
/// grammar still holds, and the watched rows stay placed in order over the whole music.
#[test]
fn a_continuation_with_a_context_never_reads_past_it() {
    let device = Device::flex();
    let model = tiny_sinespe(&device);
    let prompt = bars(8, 4);
    let length = Length {
        context: Some(64),
        ..Length::tokens(300)
    };
    let watch = Some(Watch { layer: 0, head: 0 });
    let mut last_row = 0;
    let mut starts = Vec::new();
    let added = pollster::block_on(continue_tokens(
        &model,
        &prompt,
        length,
        Sampling {
            seed: 5,
            ..Sampling::default()
        },
        &[],
        &[],
        watch,
        &device,
        |p| {
            if let (Some(_), Some(rows)) = (p.token, &p.attention) {
                assert_eq!(rows.values.len(), rows.keys, "one row a token");
                assert!(rows.start >= last_row, "rows move forward");
                assert!(rows.keys <= rows.start + 1);
                last_row = rows.start;
                starts.push(rows.start);
            }
            std::future::ready(true)
        },
    ))
    .unwrap();
    assert_eq!(added.len(), 300);
    let mut grammar = Grammar::new();
    for &id in prompt.iter().chain(&added) {
        grammar.advance(Token::from_id(id).unwrap()).unwrap();
    }
    // Rows went missing where the model started again, and reached past the context.
    assert!(starts.len() < 300, "some restarts");
    assert!(last_row > 64 + prompt.len());
}

/// A restart reads the anchor once: later restarts copy the state after it, and their
/// logits and state match reading the whole view afresh (plain steps after each too).
#[test]
fn a_restart_reuses_the_anchor_and_matches_a_fresh_read() {
    let device = Device::flex();
    for kind in [PeKind::SineSpe, PeKind::Ape] {
        let config =
            PerformerConfig::tiny(Task::Continuation, tokens::VOCAB_SIZE, PeConfig::new(kind));
        let model = Performer::new(&config, 4, &device).unwrap();
        let stepping = pollster::block_on(model.stepping(&device)).unwrap();
        let start = |device: &Device| model.start(9, false, device).stepping(&stepping);
        let music = bars(30, 4);
        let mut anchored = None;
        for end in [200, 240, 300] {
            let view = View::of(&music[..end], 128);
            assert!(view.anchor > 0 && view.gap > 0);
            let (mut state, logits) =
                pollster::block_on(restart(&model, &view, &[], &mut anchored, &start, &device))
                    .unwrap();
            let mut fresh = start(&device);
            let expected =
                pollster::block_on(quiet_prefill(&model, &mut fresh, &view.ids, &[], &device))
                    .unwrap();
            let close = |a: &[f32], b: &[f32]| {
                a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-4) && a.len() == b.len()
            };
            assert!(close(&logits, &expected), "{kind:?} logits at {end}");
            assert_eq!(state.position, fresh.position);
            let id = T::Bar.id();
            let a =
                pollster::block_on(step_logits(&model, &mut state, &[id], &[], &device)).unwrap();
            let b =
                pollster::block_on(step_logits(&model, &mut fresh, &[id], &[], &device)).unwrap();
            assert!(close(&a, &b), "{kind:?} a step after the restart at {end}");
            let kept = anchored.as_ref().map(|(ids, _)| ids.clone());
            assert_eq!(kept.as_deref(), Some(&view.ids[..view.anchor]));
        }
    }
}

/// Every chord change of a planned cell is written where it falls (both chords of a two-chord
/// bar), the model writes no chord of its own on a planned bar, and unplanned bars are its own.
#[test]
fn a_planned_two_chord_bar_forces_both_chords_and_no_other() {
    let device = Device::flex();
    let model = tiny_sinespe(&device);
    let chord = |s: &str| Some(crate::music::chords::Chord::parse_any(s).unwrap().unwrap());
    let (dm, g7, c) = (chord("Dm"), chord("G7"), chord("C"));
    // Bar 1: Dm then G7 at its half; bar 2: unplanned; bar 3: C (the whole bar).
    let plan = [vec![dm, g7], vec![], vec![c]];
    for seed in 0..4 {
        let added = pollster::block_on(continue_tokens(
            &model,
            &bars(4, 2),
            Length {
                bars: Some(3),
                ..Length::tokens(2000)
            },
            Sampling {
                seed,
                ..Sampling::default()
            },
            &plan,
            &[],
            None,
            &device,
            |_| std::future::ready(true),
        ))
        .unwrap();
        let tokens: Vec<Token> = added
            .iter()
            .map(|&id| Token::from_id(id).unwrap())
            .collect();
        let mut grammar = Grammar::new();
        for &id in bars(4, 2).iter().chain(&added) {
            grammar.advance(Token::from_id(id).unwrap()).unwrap();
        }
        // The chords of each new bar, with their positions.
        let mut per_bar: Vec<Vec<(u8, Option<crate::music::chords::Chord>)>> = Vec::new();
        let mut position = 0;
        for t in &tokens {
            match *t {
                T::Bar => per_bar.push(Vec::new()),
                T::Position(p) => position = p,
                T::Chord(ch) => {
                    if let Some(bar) = per_bar.last_mut() {
                        bar.push((position, ch));
                    }
                }
                _ => {}
            }
        }
        assert!(
            per_bar.len() >= 3,
            "seed {seed}: {} new bars",
            per_bar.len()
        );
        assert_eq!(per_bar[0], [(0, dm), (8, g7)], "seed {seed}");
        assert_eq!(per_bar[2], [(0, c)], "seed {seed}");
    }
}

/// A continuation model with F-StrIPE reads each token's place and the phrase lane: reading
/// the music at once gives the logits of reading it token by token, another phrase lane gives
/// other logits, and a continuation planned with a lane past the prompt stays grammatical.
#[test]
fn fstripe_continuation_reads_the_places_and_the_phrase_lane() {
    use crate::model::pe::StructureLevel;
    use crate::music::labels::PhraseLabel;
    use crate::music::tokens::places::places;
    let device = Device::flex();
    let pe = PeConfig::new(PeKind::Fstripe).with_levels(&StructureLevel::CONTINUATION);
    let config = PerformerConfig::tiny(Task::Continuation, tokens::VOCAB_SIZE, pe);
    let model = Performer::new(&config, 4, &device).unwrap();
    let stepping = pollster::block_on(model.stepping(&device)).unwrap();
    let music = bars(6, 3);
    let lane = |second: char| -> Vec<Option<PhraseLabel>> {
        (0..16)
            .map(|b| {
                Some(PhraseLabel {
                    letter: if b / 4 % 2 == 0 { 'A' } else { second },
                    index: (b / 4) as u16,
                    bar: (b % 4) as u16,
                    bars: 4,
                })
            })
            .collect()
    };
    let (ab, ac) = (lane('B'), lane('C'));
    let read = |phrases: &[Option<PhraseLabel>], one_by_one: bool| -> Vec<f32> {
        let structure = Structure {
            levels: model.config.pe.structure_levels(),
            phrases,
        };
        let coordinates = structure.of(&places(&music));
        let c = config.pe.coordinates();
        assert_eq!(coordinates.len(), music.len() * c);
        let mut state = model.start(3, false, &device).stepping(&stepping);
        if !one_by_one {
            return pollster::block_on(step_logits(
                &model,
                &mut state,
                &music,
                &coordinates,
                &device,
            ))
            .unwrap();
        }
        let mut last = Vec::new();
        for (k, &id) in music.iter().enumerate() {
            let at = &coordinates[k * c..(k + 1) * c];
            last = pollster::block_on(step_logits(&model, &mut state, &[id], at, &device)).unwrap();
        }
        last
    };
    let whole = read(&ab, false);
    let steps = read(&ab, true);
    let gap = whole
        .iter()
        .zip(&steps)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(gap < 1e-3, "at once and token by token differ by {gap}");
    let other = read(&ac, false);
    let moved = whole
        .iter()
        .zip(&other)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(moved > 1e-4, "the phrase lane changes nothing ({moved})");
    // Planned past the prompt (6 bars of the lane's 16), with restarts of a short context.
    let length = Length {
        bars: Some(4),
        context: Some(64),
        ..Length::tokens(300)
    };
    let added = pollster::block_on(continue_tokens(
        &model,
        &music,
        length,
        Sampling::default(),
        &[],
        &ab,
        None,
        &device,
        |_| async { true },
    ))
    .unwrap();
    let mut grammar = Grammar::new();
    for &id in music.iter().chain(&added) {
        grammar.advance(Token::from_id(id).unwrap()).unwrap();
    }
}

/// A bar the phrase lane marks as a repeat echoes its first occurrence: with a strong echo an
/// untrained model plays the first bar's notes again over the same (planned) chord, without
/// it something else.
#[test]
fn a_planned_repeat_echoes_its_first_occurrence() {
    use crate::music::labels::PhraseLabel;
    let device = Device::flex();
    let config = PerformerConfig::tiny(
        Task::Continuation,
        tokens::VOCAB_SIZE,
        PeConfig::new(PeKind::SineSpe),
    );
    let model = Performer::new(&config, 2, &device).unwrap();
    // Bar 0 (A): C E G on beats; bar 1 (B): one D. Then one new bar, A again.
    let mut prompt = vec![T::Bos.id(), T::Bar.id()];
    for (k, pitch) in [(0u8, 60u8), (4, 64), (8, 67), (12, 72)] {
        prompt.extend([
            T::Position(k).id(),
            T::Pitch(pitch).id(),
            T::Velocity(20).id(),
            T::Duration(4).id(),
        ]);
    }
    prompt.extend([
        T::Bar.id(),
        T::Position(0).id(),
        T::Pitch(62).id(),
        T::Velocity(20).id(),
        T::Duration(16).id(),
    ]);
    let label = |letter, index| {
        Some(PhraseLabel {
            letter,
            index,
            bar: 0,
            bars: 1,
        })
    };
    let lane = [label('A', 0), label('B', 1), label('A', 2)];
    let onsets = |echo: f32, seed: u64| {
        let added = pollster::block_on(continue_tokens(
            &model,
            &prompt,
            Length {
                bars: Some(1),
                ..Length::tokens(200)
            },
            Sampling {
                seed,
                echo,
                ..Sampling::default()
            },
            // Planned "no chord", as the first time.
            &[vec![None]],
            &lane,
            None,
            &device,
            |_| std::future::ready(true),
        ))
        .unwrap();
        // The new bar's notes (the tokens before its bar line end bar 1).
        let start = added.iter().position(|&id| id == T::Bar.id()).unwrap();
        let mut at = 0;
        let mut notes = Vec::new();
        for &id in &added[start..] {
            match Token::from_id(id).unwrap() {
                T::Position(p) => at = p,
                T::Pitch(p) => notes.push((at, p)),
                _ => {}
            }
        }
        notes
    };
    let first = vec![(0, 60), (4, 64), (8, 67), (12, 72)];
    for seed in 0..3 {
        assert_eq!(onsets(20.0, seed), first, "seed {seed}");
        assert_ne!(onsets(0.0, seed), first, "seed {seed}");
    }
}

/// `Sampling::density` steers how many notes a beat the new part holds against the prompt's,
/// whatever the model would play. An untrained model plays about five times the prompt's rate
/// here; asked for half it plays well under half of that, asked for twice more than the half
/// but less than its own (a trained model lands close to each: `tests/shipped.rs`, and
/// `eval --plan --density`).
#[test]
fn a_density_asked_for_steers_the_note_rate() {
    let device = Device::flex();
    let model = tiny_sinespe(&device);
    // Four 4/4 bars of two notes: half a note a beat.
    let prompt = bars(4, 2);
    let rate = |density: Option<f32>, seed: u64| {
        let added = pollster::block_on(continue_tokens(
            &model,
            &prompt,
            Length {
                bars: Some(8),
                ..Length::tokens(3000)
            },
            Sampling {
                seed,
                density,
                ..Sampling::default()
            },
            &[],
            &[],
            None,
            &device,
            |_| std::future::ready(true),
        ))
        .unwrap();
        let onsets = added
            .iter()
            .filter(|&&id| matches!(Token::from_id(id), Some(T::Pitch(_))))
            .count();
        onsets as f64 / (8.0 * 4.0) / 0.5
    };
    for seed in 0..2 {
        let free = rate(None, seed);
        let (sparse, busy) = (rate(Some(0.5), seed), rate(Some(2.0), seed));
        let got =
            format!("seed {seed}: free {free:.2}, asked 0.5: {sparse:.2}, asked 2: {busy:.2}");
        assert!(free > 3.0, "{got}");
        assert!(sparse < free / 2.5, "{got}");
        assert!(busy > 1.5 * sparse && busy < free, "{got}");
    }
}

/// `Sampling::key` (at the default strength) keeps an unplanned continuation on the prompt's
/// pitch classes, and leaves bars whose chords are planned to their plan. The prompt plays four
/// pitch classes (C–D#); an untrained model plays them about a quarter of the time, held more
/// than half.
#[test]
fn a_key_hold_keeps_unplanned_bars_on_the_prompts_pitch_classes() {
    let device = Device::flex();
    let model = tiny_sinespe(&device);
    // Eight notes a bar, a pitch class a bar.
    let prompt = bars(4, 8);
    let plan = vec![vec![Chord::parse("G").unwrap()]; 8];
    let share = |key: f32, plan: &[Vec<Option<Chord>>], seed: u64| {
        let added = pollster::block_on(continue_tokens(
            &model,
            &prompt,
            Length {
                bars: Some(8),
                ..Length::tokens(3000)
            },
            Sampling {
                seed,
                key,
                ..Sampling::default()
            },
            plan,
            &[],
            None,
            &device,
            |_| std::future::ready(true),
        ))
        .unwrap();
        // Pitches from the first new bar line on.
        let from = added.iter().position(|&id| id == T::Bar.id()).unwrap_or(0);
        let pitches: Vec<u8> = added[from..]
            .iter()
            .filter_map(|&id| match Token::from_id(id) {
                Some(T::Pitch(p)) => Some(p),
                _ => None,
            })
            .collect();
        assert!(pitches.len() > 20, "seed {seed}: {} notes", pitches.len());
        pitches.iter().filter(|&&p| p % 12 < 4).count() as f64 / pitches.len() as f64
    };
    for seed in 0..2 {
        let (free, held) = (
            share(0.0, &[], seed),
            share(crate::generate::DEFAULT_KEY, &[], seed),
        );
        let planned = share(crate::generate::DEFAULT_KEY, &plan, seed);
        let got = format!("seed {seed}: free {free:.2}, held {held:.2}, planned {planned:.2}");
        assert!(free < 0.4, "{got}");
        assert!(held > 0.55, "{got}");
        assert!(planned < 0.4, "{got}");
    }
}

/// The default density (`density_on_plan: false`) steers only bars nobody planned: bars with
/// planned chords are the model's, as if no density were asked, while an asked density
/// (`density_on_plan: true`) steers them too. An untrained model plays about five times the
/// prompt's rate; asked for half, the unplanned bars are steered either way.
#[test]
fn the_default_density_leaves_planned_bars_to_the_model() {
    let device = Device::flex();
    let model = tiny_sinespe(&device);
    let prompt = bars(4, 2);
    // Bars 1–4 unplanned, 5–8 planned.
    let mut plan = vec![vec![]; 4];
    plan.extend(vec![vec![Chord::parse("G").unwrap()]; 4]);
    let run = |density: Option<f32>, on_plan: bool, seed: u64| {
        pollster::block_on(continue_tokens(
            &model,
            &prompt,
            Length {
                bars: Some(8),
                ..Length::tokens(3000)
            },
            Sampling {
                seed,
                density,
                density_on_plan: on_plan,
                ..Sampling::default()
            },
            &plan,
            &[],
            None,
            &device,
            |_| std::future::ready(true),
        ))
        .unwrap()
    };
    // Onsets in each new bar.
    let per_bar = |ids: &[u32]| {
        let mut bars: Vec<usize> = Vec::new();
        for &id in ids {
            match Token::from_id(id) {
                Some(T::Bar) => bars.push(0),
                Some(T::Pitch(_)) => {
                    if let Some(b) = bars.last_mut() {
                        *b += 1;
                    }
                }
                _ => {}
            }
        }
        bars
    };
    for seed in 0..2 {
        let default = per_bar(&run(Some(0.5), false, seed));
        let asked = per_bar(&run(Some(0.5), true, seed));
        assert_eq!(
            default[..4],
            asked[..4],
            "seed {seed}: the unplanned bars are steered alike"
        );
        let (free, steered) = (
            default[4..].iter().sum::<usize>(),
            asked[4..].iter().sum::<usize>(),
        );
        let got = format!("seed {seed}: planned bars {free} notes by default, {steered} asked");
        assert!(free as f64 > 2.5 * steered as f64, "{got}");
    }
}
