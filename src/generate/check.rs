//! The fused WebGPU steps checked against tensor ops on the device at hand (issue 35), for the
//! backend's self-check: a driver or a browser that computes the kernels otherwise (lavapipe
//! did, for long dispatches) gets tensor ops instead. Called by the page's Worker
//! (`Session::selfCheck`) and `pianoformer check`, beside `device::check::self_check`.

use burn::tensor::{Device, Tensor};

use super::continuation::ahead::{AheadStats, take_stats};
use super::fused::{self, CHUNK, force, set_enabled};
use super::piano::{Given, PianoProgress, Reports, accompany_steps};
use super::sample::{PianoSampling, Sampling};
use super::{
    GenerateError, Length, accompaniment_input, continue_tokens, input_example, prompt_tokens,
};
use crate::model::config::{Conditioning, PerformerConfig, Task};
use crate::model::pe::{PeConfig, PeKind};
use crate::model::performer::Performer;
use crate::music::fixtures;
use crate::music::tokens::VOCAB_SIZE;

/// What the backend's self-check found of the fused steps ([`fused_steps`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FusedCheck {
    /// Continuation tokens compared, and whether the fused steps wrote the same ones.
    pub tokens: usize,
    pub tokens_agree: bool,
    /// The fused continuation's read-backs, and the GPU's draws the host overrode (none here:
    /// nothing is planned, so every draw should be the host's).
    pub read_backs: usize,
    pub overridden: usize,
    /// Accompaniment steps compared (thresholded), and whether they drew the same notes.
    pub steps: usize,
    pub steps_agree: bool,
    /// Whether the fused steps are on after the check: a browser whose WebGPU computes them
    /// otherwise than its tensor ops (a mis-compiled kernel, a driver's bug) gets tensor ops.
    pub on: bool,
}

/// The fused steps against tensor ops on `device` (the backend's self-check): small random
/// models of both tasks write a continuation and an accompaniment both ways, with the same
/// seed; where they differ the fused steps are turned off ([`fused::set_enabled`]). `None`
/// where they do not run (not wgpu, or turned off already).
pub async fn fused_steps(device: &Device) -> Result<Option<FusedCheck>, GenerateError> {
    if !fused::enabled()
        || crate::model::kernels::wgpu_primitive(&Tensor::<1>::zeros([1], device)).is_none()
    {
        return Ok(None);
    }
    let pe = PeConfig::new(PeKind::SineSpe).with_gate(true);
    let config = PerformerConfig::tiny(Task::Continuation, VOCAB_SIZE, pe.clone());
    let model = Performer::new(&config, 5, device)?;
    let prompt = prompt_tokens(&fixtures::song(0, 2))?;
    let sampling = Sampling {
        seed: 11,
        ..Sampling::default()
    };
    // A chunk of each: a bar of accompaniment, 16 tokens (each drawn on the GPU from the last).
    let tokens = CHUNK;
    let mut written = Vec::new();
    let mut ahead = AheadStats::default();
    for on in [false, true] {
        take_stats();
        force(Some(on));
        let out = continue_tokens(
            &model,
            &prompt,
            Length::tokens(tokens),
            sampling,
            &[],
            &[],
            None,
            device,
            |_| async { true },
        )
        .await;
        force(None);
        ahead = take_stats();
        written.push(out?);
    }
    let config = PerformerConfig::tiny(Task::Accompaniment, 0, pe)
        .with_inputs(Some(Conditioning::AUTOREGRESSIVE));
    let model = Performer::new(&config, 5, device)?;
    let input = accompaniment_input(&fixtures::song(2, 2), None, None)?;
    let e = input_example(&model, &input);
    let sampling = PianoSampling {
        threshold: Some(0.3),
        ..PianoSampling::default()
    };
    let mut rolls = Vec::new();
    for on in [false, true] {
        force(Some(on));
        let quiet = |_: PianoProgress<'_>| async { true };
        let roll = accompany_steps(
            &model,
            &e,
            Given::plain(None, e.len.saturating_sub(CHUNK)..e.len),
            sampling,
            Reports {
                every: CHUNK,
                watch: None,
            },
            device,
            quiet,
        )
        .await;
        force(None);
        rolls.push(roll?);
    }
    let tokens_agree = written[0] == written[1];
    let steps_agree = rolls[0] == rolls[1];
    let on = tokens_agree && steps_agree;
    if !on {
        set_enabled(false);
    }
    Ok(Some(FusedCheck {
        tokens,
        tokens_agree,
        read_backs: ahead.chunks,
        overridden: ahead.misses,
        steps: CHUNK.min(e.len),
        steps_agree,
        on,
    }))
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::device::{self, Preference};
    use pollster::block_on;

    /// On a native GPU (lavapipe in `make test`) the fused steps write what tensor ops write and
    /// stay on; on the CPU there is nothing to check.
    #[test]
    fn the_fused_steps_agree_with_tensor_ops_on_a_native_gpu() {
        assert_eq!(block_on(fused_steps(&Device::flex())).unwrap(), None);
        let Ok(gpu) = block_on(device::init(Preference::Gpu)) else {
            crate::note_skipped_test("no native GPU adapter");
            return;
        };
        let report = block_on(fused_steps(&gpu.device))
            .unwrap()
            .expect("checked on wgpu");
        assert!(
            report.tokens_agree && report.steps_agree && report.on,
            "{report:?}"
        );
        assert!(report.tokens > 0 && report.steps > 0);
        assert_eq!((report.read_backs, report.overridden), (1, 0), "{report:?}");
        assert!(fused::enabled());
    }
}
