//! The step-by-step accompaniment on wgpu, fused (issue 35): up to [`CHUNK`] steps of the whole
//! model and the drawing of their notes in one dispatch of `shaders/accompaniment_steps.wgsl`,
//! read back once. Through tensor ops a step costs about 440 dispatches and two read-backs (the
//! logits, then the drawn step); a browser's WebGPU pays tens of microseconds a dispatch and
//! milliseconds a read-back, so on a real GPU the calls, not the arithmetic, were the time.
//!
//! The weights, the sequence's draws (gate noise, feature-map directions) and the attention
//! sums a prefill left are gathered into device buffers once, on the device (nothing read
//! back); each chunk uploads its input rows and its positional codes (computed here, as the
//! plain-slice decoder computes them) and reads back its logits and drawn steps. The kernel
//! keeps the attention sums and the last drawn step in its state buffer between chunks.
//!
//! [`FusedSteps::prepare`] declines (`None`) whatever the kernel does not do — another device,
//! softmax attention, F-StrIPE's exact features, added sinusoids (APE), sizes past WebGPU's
//! default limits — and the caller steps through tensor ops as before.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use burn::backend::Cube;
use burn::backend::wgpu::{
    CubeTensor, KernelSource, SourceKernel, SourceTemplate, into_contiguous,
};
use burn::cubecl::ir::attributes::BufferIOAttr;
use burn::cubecl::prelude::KernelId;
use burn::cubecl::server::{KernelArguments, MetadataBindingInfo};
use burn::cubecl::{CubeCount, CubeDim};
use burn::tensor::{DType, Device, Shape, Tensor, TensorData};

use super::PianoSampling;
use crate::generate::GenerateError;
use crate::model::config::AttentionKind;
use crate::model::features::FeatureKind;
use crate::model::kernels::{pack_u32, wgpu_primitive};
use crate::model::pe::{PeKind, PlainCodes, PlainKernel};
use crate::model::performer::{Performer, State, Sums};
use crate::music::roll::PITCHES;

const SHADER: &str = include_str!("../../../shaders/accompaniment_steps.wgsl");

/// Most steps one dispatch runs: a bar of sixteenths, one read-back a bar.
pub const CHUNK: usize = 16;

/// Invocations in the one workgroup (WebGPU's default limit is 256).
const WG: u32 = 128;

/// WebGPU's default workgroup storage (`maxComputeWorkgroupStorageSize`), in bytes.
const WORKGROUP_BYTES: usize = 16_384;

/// Storage buffers the kernel binds: four and the info buffer.
const STORAGE_BINDINGS: u32 = 5;

static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turns the fused steps on or off (on by default): for benchmarks (the tensor-op steps are
/// the "before"), and a way out if a browser's WebGPU mis-compiles the kernel.
pub fn set_enabled(enabled: bool) {
    ENABLED.store(enabled, Ordering::Relaxed);
}

pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

static PER_DISPATCH: AtomicUsize = AtomicUsize::new(1);

/// Steps one dispatch runs (1 by default, at most [`CHUNK`]); a chunk takes as many dispatches
/// as it needs, all read back at once. On Mesa's lavapipe a dispatch of more than five or six
/// steps of the shipped model's size returned wrong numbers from its sixth or seventh step on
/// (the same kernel, every earlier step exact; smaller models were right over 16), so steps go
/// one a dispatch unless a benchmark asks otherwise.
pub fn set_steps_per_dispatch(steps: usize) {
    PER_DISPATCH.store(steps.clamp(1, CHUNK), Ordering::Relaxed);
}

pub fn steps_per_dispatch() -> usize {
    PER_DISPATCH.load(Ordering::Relaxed)
}

/// The kernel's sizes: its template values and its pipeline-cache key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Sizes {
    d: u32,
    h: u32,
    dh: u32,
    /// The feature map's input per head: R codes, or d_head without codes.
    r: u32,
    dir: u32,
    m: u32,
    ff: u32,
    inp: u32,
    out: u32,
    layers: u32,
    piano: u32,
    /// Codes per step and side (heads · d_head · R), 0 without codes.
    codes: u32,
    gated: bool,
    favor: bool,
}

impl Sizes {
    fn hd(&self) -> u32 {
        self.h * self.dh
    }

    fn gate(&self) -> u32 {
        if self.gated { self.hd() } else { 0 }
    }

    fn epsn(&self) -> u32 {
        if self.gated && self.codes > 0 {
            self.h * self.dh * self.r
        } else {
            0
        }
    }

    /// Floats of workgroup memory the template declares.
    fn workgroup_floats(&self) -> usize {
        let (d, hd, h) = (self.d as usize, self.hd() as usize, self.h as usize);
        2 * d
            + 4 * hd
            + 2 * h * self.r as usize
            + 2 * h * self.m as usize
            + h
            + self.ff as usize
            + self.out as usize
            + 2 * PITCHES
            + self.inp as usize
            + 4
    }

    /// Floats a step's input takes in the steps buffer, and its output in the outputs.
    fn step_in(&self) -> usize {
        (self.inp + 2 * self.codes) as usize
    }

    fn step_out(&self) -> usize {
        self.out as usize + 2 * PITCHES + 2 * self.m as usize
    }

    /// The weights buffer, in the order the kernel reads it.
    fn weight_floats(&self) -> usize {
        let (d, hd, ff) = (self.d as usize, self.hd() as usize, self.ff as usize);
        let layer = 2 * d
            + 3 * (d * hd + hd)
            + (hd * d + d)
            + 2 * d
            + (d * ff + ff)
            + (ff * d + d)
            + 2 * self.gate() as usize
            + self.epsn() as usize
            + (self.h * self.r * self.dir) as usize;
        let out = self.out as usize;
        self.inp as usize * d + d + self.layers as usize * layer + 2 * d + d * out + out
    }

    /// The state buffer: S and z of every layer, then the previous piano step.
    fn state_floats(&self) -> usize {
        let (l, h, m) = (self.layers as usize, self.h as usize, self.m as usize);
        l * h * m * self.dh as usize + l * h * m + 2 * PITCHES
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct AccompanimentSteps(Sizes);

impl KernelSource for AccompanimentSteps {
    fn source(&self) -> SourceTemplate {
        let s = &self.0;
        let mut t = SourceTemplate::new(SHADER);
        for (key, value) in [
            ("d", s.d),
            ("hd", s.hd()),
            ("h", s.h),
            ("dh", s.dh),
            ("r", s.r),
            ("dir", s.dir),
            ("m", s.m),
            ("ff", s.ff),
            ("inp", s.inp),
            ("out", s.out),
            ("layers", s.layers),
            ("wg", WG),
            ("piano", s.piano),
            ("codes", s.codes),
            ("hr", s.h * s.r),
            ("hm", s.h * s.m),
            ("gate", s.gate()),
            ("epsn", s.epsn()),
        ] {
            t = t.register(key, value.to_string());
        }
        t.register("gated", s.gated.to_string())
            .register("favor", s.favor.to_string())
    }

    fn id(&self) -> KernelId {
        KernelId::new::<Self>().info(self.0)
    }

    fn lang(&self) -> &'static str {
        "wgsl"
    }
}

/// What the fused steps of one generation hold on the device, and what computes their codes.
pub struct FusedSteps {
    sizes: Sizes,
    weights: CubeTensor,
    /// Read and written by every dispatch, in place: only this holds it.
    state: CubeTensor,
    kernel: Option<Arc<dyn PlainKernel>>,
    /// Z [heads, dim · J, R] of sine codes, read once.
    mix: Option<Vec<f32>>,
    code_scale: f32,
    feature_scale: f32,
    device: Device,
}

fn flat<const D: usize>(t: Tensor<D>) -> Tensor<1> {
    let n = t.shape().num_elements();
    t.reshape([n])
}

impl FusedSteps {
    /// Gathers what the kernel reads for `model` decoding from `state` (a prefill's sums, or
    /// none) with `previous` [256] as the piano step before the first (onsets, then sustains).
    /// `Ok(None)` where the kernel does not apply (see the module's notes).
    pub async fn prepare(
        model: &Performer,
        state: &State,
        piano: usize,
        previous: &[f32],
        device: &Device,
    ) -> Result<Option<Self>, GenerateError> {
        let c = &model.config;
        if c.attention != AttentionKind::Linear
            || model.input.is_none()
            || c.output_dim != 2 * PITCHES
            || previous.len() != 2 * PITCHES
            || piano + 2 * PITCHES > c.input_dim
            || !c.is_causal()
            || matches!(c.pe.kind, PeKind::Ape | PeKind::Cape)
            || c.pe.is_structural()
            || state.maps.len() != c.layers
        {
            return Ok(None);
        }
        // Only a wgpu device: the probe tensor tells.
        if wgpu_primitive(&Tensor::<1>::zeros([1], device)).is_none() {
            return Ok(None);
        }
        let kernel = model.pe.plain().await?;
        let qk_dim = model.pe.qk_dim();
        let codes = match kernel {
            Some(_) => c.heads * c.d_head * qk_dim,
            None if qk_dim == c.d_head => 0,
            None => return Ok(None),
        };
        let gated = model.pe.gate(0).is_some();
        if gated && (codes == 0 || state.draw.eps.len() != c.layers) {
            return Ok(None);
        }
        let dir = state.maps[0].w.dims()[2];
        let favor = state.maps[0].kind == FeatureKind::Favor;
        if c.features != if favor { 2 * dir } else { dir } {
            return Ok(None);
        }
        let sizes = Sizes {
            d: c.d_model as u32,
            h: c.heads as u32,
            dh: c.d_head as u32,
            r: qk_dim as u32,
            dir: dir as u32,
            m: c.features as u32,
            ff: c.d_ff as u32,
            inp: c.input_dim as u32,
            out: c.output_dim as u32,
            layers: c.layers as u32,
            piano: piano as u32,
            codes: codes as u32,
            gated,
            favor,
        };
        if sizes.workgroup_floats() * 4 > WORKGROUP_BYTES {
            return Ok(None);
        }

        // The weights in the kernel's order, gathered on the device.
        let linear = |l: &burn::nn::Linear| -> [Tensor<1>; 2] {
            let bias = match &l.bias {
                Some(b) => b.val(),
                None => Tensor::zeros([l.weight.dims()[1]], device),
            };
            [flat(l.weight.val()), bias]
        };
        let norm = |n: &burn::nn::LayerNorm| -> [Tensor<1>; 2] {
            let beta = match &n.beta {
                Some(b) => b.val(),
                None => Tensor::zeros([n.gamma.dims()[0]], device),
            };
            [n.gamma.val(), beta]
        };
        let mut parts: Vec<Tensor<1>> = Vec::new();
        parts.extend(linear(model.input.as_ref().expect("checked above")));
        for (layer, b) in model.blocks.iter().enumerate() {
            parts.extend(norm(&b.norm1));
            for l in [&b.wq, &b.wk, &b.wv, &b.wo] {
                parts.extend(linear(l));
            }
            parts.extend(norm(&b.norm2));
            parts.extend(linear(&b.ff1));
            parts.extend(linear(&b.ff2));
            if gated {
                let Some((a, g)) = model.pe.gate(layer) else {
                    return Ok(None);
                };
                parts.push(flat(a));
                parts.push(flat(g));
                parts.push(flat(state.draw.eps[layer].clone()));
            }
            parts.push(flat(state.maps[layer].w.clone()));
        }
        parts.extend(norm(&model.norm));
        parts.extend(linear(&model.head));
        let weights = Tensor::cat(parts, 0);

        // The attention sums, S of every layer then z of every layer, then the piano step.
        let (h, m, dh) = (c.heads, c.features, c.d_head);
        let mut s_parts = Vec::with_capacity(c.layers);
        let mut z_parts = Vec::with_capacity(c.layers);
        for layer in 0..c.layers {
            match state.linear_sums(layer) {
                Sums::Empty => {
                    s_parts.push(Tensor::<1>::zeros([h * m * dh], device));
                    z_parts.push(Tensor::<1>::zeros([h * m], device));
                }
                Sums::Tensors(sums) if sums.s.dims()[0] == 1 => {
                    s_parts.push(flat(sums.s.clone()));
                    z_parts.push(flat(sums.z.clone()));
                }
                _ => return Ok(None),
            }
        }
        let mut all = s_parts;
        all.extend(z_parts);
        all.push(Tensor::from_data(
            TensorData::new(previous.to_vec(), vec![2 * PITCHES]),
            device,
        ));
        let state_t = Tensor::cat(all, 0);

        let (Some(weights), Some(state_p)) = (wgpu_primitive(&weights), wgpu_primitive(&state_t))
        else {
            return Ok(None);
        };
        let (weights, state_p) = (into_contiguous(weights), into_contiguous(state_p));
        if weights.meta.num_elements() != sizes.weight_floats()
            || state_p.meta.num_elements() != sizes.state_floats()
        {
            return Err(GenerateError::Read(format!(
                "the fused steps' buffers do not have the sizes the kernel reads ({} and {} \
                 values, not {} and {})",
                weights.meta.num_elements(),
                state_p.meta.num_elements(),
                sizes.weight_floats(),
                sizes.state_floats()
            )));
        }
        let properties = weights.client.properties();
        let largest = (weights.meta.num_elements() * 4) as u64;
        if largest > properties.memory.max_page_size
            || properties.hardware.max_bindings + 1 < STORAGE_BINDINGS
        {
            return Ok(None);
        }
        let mix = match &state.draw.mix {
            Some(mix) if codes > 0 => Some(
                crate::model::read(mix.clone())
                    .await
                    .map_err(GenerateError::Read)?,
            ),
            _ => None,
        };
        let code_scale = if codes > 0 {
            let (d, rr) = (c.d_head as f32, qk_dim as f32);
            (d * rr).powf(-0.25) * rr.powf(-0.25)
        } else {
            (c.d_head as f32).powf(-0.25)
        };
        Ok(Some(Self {
            sizes,
            weights,
            state: state_p,
            kernel,
            mix,
            code_scale,
            feature_scale: 1.0 / (m as f32).sqrt(),
            device: device.clone(),
        }))
    }

    /// Codes `Qbar`, `Kbar` [heads · dim, R] of `state`'s position (advancing nothing).
    fn codes(&self, state: &mut State, out: &mut Vec<f32>) -> Result<(), GenerateError> {
        let Some(kernel) = &self.kernel else {
            return Ok(());
        };
        let (hd, r) = (
            (self.sizes.h * self.sizes.dh) as usize,
            self.sizes.r as usize,
        );
        match kernel.step(state.position, None, &mut state.draw) {
            PlainCodes::Bars(q, k) => {
                out.extend_from_slice(&q);
                out.extend_from_slice(&k);
            }
            PlainCodes::Factored(q, k, j) => {
                let Some(mix) = &self.mix else {
                    return Err(GenerateError::Read(
                        "the sine codes' mix was not drawn".into(),
                    ));
                };
                for omega in [&q, &k] {
                    let start = out.len();
                    out.resize(start + hd * r, 0.0);
                    let bars = &mut out[start..];
                    for (i, o) in bars.chunks_exact_mut(r).enumerate() {
                        let z = &mix[i * j * r..(i + 1) * j * r];
                        for (w, zr) in omega[i * j..(i + 1) * j].iter().zip(z.chunks_exact(r)) {
                            for (o, z) in o.iter_mut().zip(zr) {
                                *o += w * z;
                            }
                        }
                    }
                }
            }
            PlainCodes::Exact(..) => {
                return Err(GenerateError::Read(
                    "the fused steps take no exact features".into(),
                ));
            }
        }
        Ok(())
    }

    /// Runs the steps whose input rows are `rows` [n · input_dim] (their piano planes are
    /// ignored), the first being step `first` of the piece (it numbers the draws), from
    /// `state`'s position, which it advances by n. Returns per step ([`Self::step_out`] floats)
    /// the logits [256], the drawn step [256] (onsets, then sustains, 0 or 1) and the query
    /// and key features [m] each of the head `watch` names (layer, head), if any.
    pub async fn run(
        &mut self,
        rows: &[f32],
        first: usize,
        sampling: &PianoSampling,
        watch: Option<(usize, usize)>,
        state: &mut State,
    ) -> Result<Vec<f32>, GenerateError> {
        let s = self.sizes;
        if watch.is_some_and(|(layer, head)| layer >= s.layers as usize || head >= s.h as usize) {
            return Err(GenerateError::Read(
                "the watched head is not in the model".into(),
            ));
        }
        let n = rows.len() / s.inp as usize;
        if n == 0 || n > CHUNK || rows.len() != n * s.inp as usize {
            return Err(GenerateError::Read(format!(
                "the fused steps take 1 to {CHUNK} rows of {} values",
                s.inp
            )));
        }
        let mut input = Vec::with_capacity(n * s.step_in());
        for row in rows.chunks_exact(s.inp as usize) {
            input.extend_from_slice(row);
            self.codes(state, &mut input)?;
            state.position += 1;
        }
        debug_assert_eq!(input.len(), n * s.step_in());
        let steps =
            Tensor::<1>::from_data(TensorData::new(input, vec![n * s.step_in()]), &self.device);
        let steps = wgpu_primitive(&steps)
            .map(into_contiguous)
            .ok_or_else(|| GenerateError::Read("the steps' buffer is not on wgpu".into()))?;
        let client = self.weights.client.clone();
        let out_floats = n * s.step_out();
        let outs = CubeTensor::new_contiguous(
            client.clone(),
            self.weights.device.clone(),
            Shape::new([out_floats]),
            client.empty(out_floats * core::mem::size_of::<f32>()),
            DType::F32,
        );
        let (threshold, thresholded) = match sampling.threshold {
            Some(t) => (t, 1),
            None => (0.0, 0),
        };
        let per = steps_per_dispatch().clamp(1, CHUNK);
        let bindings = || {
            KernelArguments::new()
                .with_buffer_io(
                    self.weights.handle.clone().binding(),
                    BufferIOAttr::ReadOnly,
                )
                .with_buffer_io(steps.handle.clone().binding(), BufferIOAttr::ReadOnly)
                .with_buffer_io(self.state.handle.clone().binding(), BufferIOAttr::ReadWrite)
                .with_buffer_io(outs.handle.clone().binding(), BufferIOAttr::ReadWrite)
        };
        for at in (0..n).step_by(per) {
            let info = [
                per.min(n - at) as u32,
                (first + at) as u32,
                sampling.seed as u32,
                (sampling.seed >> 32) as u32,
                sampling.temperature.max(1e-4).to_bits(),
                threshold.to_bits(),
                thresholded,
                sampling.hold_temperature.to_bits(),
                self.code_scale.to_bits(),
                self.feature_scale.to_bits(),
                at as u32,
                watch.map_or(u32::MAX, |w| w.0 as u32),
                watch.map_or(0, |w| w.1 as u32),
            ];
            let args = bindings().with_info(MetadataBindingInfo::custom(pack_u32(&info)));
            client.launch(
                Box::new(SourceKernel::new(
                    AccompanimentSteps(s),
                    CubeDim::new_1d(WG),
                )),
                CubeCount::Static(1, 1, 1),
                args,
            );
        }
        let outs = Tensor::<1>::from_primitive::<Cube>(outs);
        let values = crate::model::read(outs)
            .await
            .map_err(|e| GenerateError::Read(format!("the fused steps could not be read: {e}")))?;
        if values.len() != out_floats {
            return Err(GenerateError::Read(
                "the fused steps returned too little".into(),
            ));
        }
        Ok(values)
    }

    /// Floats per step in what [`Self::run`] returns.
    pub fn step_out(&self) -> usize {
        self.sizes.step_out()
    }

    /// The feature-map width m: the watched head's query and key features are m floats each.
    pub fn features(&self) -> usize {
        self.sizes.m as usize
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::device::{self, Preference};
    use crate::generate::piano::{accompany_steps, uniform};
    use crate::generate::{AttentionRows, Watch};
    use crate::generate::{accompaniment_input, input_example};
    use crate::model::config::{Conditioning, PerformerConfig, Task};
    use crate::model::pe::PeConfig;
    use crate::music::fixtures::song;
    use crate::music::roll::PianoRoll;
    use pollster::block_on;

    fn config(pe: PeConfig) -> PerformerConfig {
        PerformerConfig::tiny(Task::Accompaniment, 0, pe)
            .with_inputs(Some(Conditioning::AUTOREGRESSIVE))
    }

    /// The accompaniment of steps 8.. of a two-bar song, reported every `every` steps (so
    /// chunks of that many, and a last shorter one), with every report's logits.
    fn accompany(
        m: &Performer,
        sampling: PianoSampling,
        every: usize,
        device: &Device,
    ) -> (PianoRoll, Vec<Vec<f32>>) {
        let (roll, logits, _) = watched(m, sampling, every, None, device);
        (roll, logits)
    }

    /// [`accompany`], watching `watch`'s head: also every report's attention rows.
    fn watched(
        m: &Performer,
        sampling: PianoSampling,
        every: usize,
        watch: Option<Watch>,
        device: &Device,
    ) -> (PianoRoll, Vec<Vec<f32>>, Vec<AttentionRows>) {
        let input = accompaniment_input(&song(2, 3), None, None).unwrap();
        let e = input_example(m, &input);
        let mut logits = Vec::new();
        let mut rows = Vec::new();
        let roll = block_on(accompany_steps(
            m,
            &e,
            None,
            8..e.len,
            sampling,
            every,
            watch,
            device,
            |p| {
                logits.push(p.logits.to_vec());
                rows.extend(p.attention);
                async { true }
            },
        ))
        .unwrap();
        (roll, logits, rows)
    }

    /// The counter-based uniforms look uniform and independent: mean, variance and the
    /// correlation of neighbouring pitches' and steps' draws over 60 000 draws.
    #[test]
    fn the_counter_uniforms_are_uniform_and_independent() {
        let mut values = Vec::new();
        for step in 0..300 {
            for pitch in 0..PITCHES {
                values.push((
                    uniform(7, step, pitch, 0),
                    uniform(7, step, pitch, 1),
                    uniform(7, step + 1, pitch, 0),
                    uniform(8, step, pitch, 0),
                ));
            }
        }
        let n = values.len() as f64;
        let mean = values.iter().map(|v| v.0 as f64).sum::<f64>() / n;
        let var = values
            .iter()
            .map(|v| (v.0 as f64 - mean).powi(2))
            .sum::<f64>()
            / n;
        assert!((mean - 0.5).abs() < 0.005, "{mean}");
        assert!((var - 1.0 / 12.0).abs() < 0.002, "{var}");
        assert!(values.iter().all(|v| (0.0..1.0).contains(&v.0)));
        type Draws = (f32, f32, f32, f32);
        let corr = |f: &dyn Fn(&Draws) -> f32| {
            values
                .iter()
                .map(|v| (v.0 as f64 - 0.5) * (f(v) as f64 - 0.5))
                .sum::<f64>()
                / n
                * 12.0
        };
        for (what, c) in [
            ("kinds", corr(&|v| v.1)),
            ("steps", corr(&|v| v.2)),
            ("seeds", corr(&|v| v.3)),
        ] {
            assert!(c.abs() < 0.02, "{what}: correlation {c}");
        }
    }

    /// On the CPU the kernel declines, and the piece a seed gives does not depend on how often
    /// progress is reported (the draws are counters, not a stream).
    #[test]
    fn off_wgpu_it_declines_and_a_seed_gives_one_piece() {
        let device = Device::flex();
        let m = Performer::new(
            &config(PeConfig::new(PeKind::SineSpe).with_gate(true)),
            3,
            &device,
        )
        .unwrap();
        let state = m.start(0, false, &device);
        let prev = vec![0f32; 2 * PITCHES];
        assert!(
            block_on(FusedSteps::prepare(&m, &state, 0, &prev, &device))
                .unwrap()
                .is_none()
        );
        let sampling = PianoSampling {
            seed: 11,
            ..Default::default()
        };
        let (a, _) = accompany(&m, sampling, 5, &device);
        let (b, _) = accompany(&m, sampling, 16, &device);
        assert_eq!(a, b);
        assert!(a.onset_plane().iter().any(|&x| x > 0.0));
    }

    /// On a native GPU when there is one (lavapipe in `make test`): the fused steps write the
    /// same piece as the CPU's plain-slice decoder with the same seed, drawn and thresholded,
    /// for the shipped shape and the tiny one: sineSPE (gated and not), NoPE and convSPE, with
    /// FAVOR+ and ReLU features; every
    /// report's logits agree to 1e-4 of their scale.
    #[test]
    fn fused_steps_match_the_cpu_on_a_native_gpu() {
        let Ok(gpu) = block_on(device::init(Preference::Gpu)) else {
            crate::note_skipped_test("no native GPU adapter");
            return;
        };
        let relu = {
            let mut c = config(PeConfig::new(PeKind::SineSpe).with_gate(true));
            c.feature_kind = FeatureKind::Relu;
            c
        };
        // The shipped model's shape (random weights): a whole chunk of 16 steps, one dispatch a
        // step and one read-back, at the size where longer dispatches went wrong on lavapipe.
        let shipped = PerformerConfig::small_sized(
            Task::Accompaniment,
            crate::model::config::ACCOMPANIMENT_INPUTS,
            2 * PITCHES,
            PeConfig::new(PeKind::SineSpe).with_gate(true),
        )
        .with_inputs(Some(Conditioning::AUTOREGRESSIVE));
        let configs = [
            shipped,
            config(PeConfig::new(PeKind::SineSpe).with_gate(true)),
            config(PeConfig::new(PeKind::SineSpe)),
            config(PeConfig::new(PeKind::None)),
            config(PeConfig::new(PeKind::ConvSpe).with_gate(true)),
            relu,
        ];
        for c in configs {
            let cpu = Performer::new(&c, 3, &Device::flex()).unwrap();
            let gpu_m = Performer::new(&c, 3, &gpu.device).unwrap();
            let state = gpu_m.start(0, false, &gpu.device);
            let prev = vec![0f32; 2 * PITCHES];
            let piano = c.input_dim - 2 * PITCHES;
            let fused = block_on(FusedSteps::prepare(
                &gpu_m,
                &state,
                piano,
                &prev,
                &gpu.device,
            ));
            assert!(
                fused.unwrap().is_some(),
                "{:?}: the kernel declined",
                c.pe.kind
            );
            for sampling in [
                PianoSampling {
                    seed: 5,
                    hold_temperature: 0.5,
                    ..Default::default()
                },
                PianoSampling {
                    threshold: Some(0.3),
                    ..Default::default()
                },
            ] {
                let every = if c.d_model > 32 { 16 } else { 5 };
                if every == 16 && sampling.threshold.is_some() {
                    continue; // the shipped shape once: it is the slow one on lavapipe
                }
                let (want, want_logits) = accompany(&cpu, sampling, every, &Device::flex());
                let (got, got_logits) = accompany(&gpu_m, sampling, every, &gpu.device);
                assert_eq!(want_logits.len(), got_logits.len());
                for (w, g) in want_logits.iter().zip(&got_logits) {
                    let scale = w.iter().fold(1f32, |a, x| a.max(x.abs()));
                    let worst = w.iter().zip(g).fold(0f32, |a, (x, y)| a.max((x - y).abs()));
                    assert!(
                        worst <= 1e-4 * scale,
                        "{:?}: logits differ by {worst}",
                        c.pe.kind
                    );
                }
                assert_eq!(want, got, "{:?} {sampling:?}: another piece", c.pe.kind);
                assert!(want.onset_plane().iter().any(|&x| x > 0.0));
            }
        }
        // The attention map a watched head shows: the same rows, the prefill's keys in them.
        let c = config(PeConfig::new(PeKind::SineSpe).with_gate(true));
        let cpu = Performer::new(&c, 3, &Device::flex()).unwrap();
        let gpu_m = Performer::new(&c, 3, &gpu.device).unwrap();
        let watch = Some(Watch { layer: 1, head: 1 });
        let sampling = PianoSampling::default();
        let (want, _, want_rows) = watched(&cpu, sampling, 5, watch, &Device::flex());
        let (got, _, got_rows) = watched(&gpu_m, sampling, 5, watch, &gpu.device);
        assert_eq!(want, got);
        assert_eq!(want_rows.len(), got_rows.len());
        for (w, g) in want_rows.iter().zip(&got_rows) {
            assert_eq!(
                (w.start, w.keys, w.values.len()),
                (g.start, g.keys, g.values.len())
            );
            let worst = w
                .values
                .iter()
                .zip(&g.values)
                .fold(0f32, |a, (x, y)| a.max((x - y).abs()));
            assert!(worst <= 1e-4, "attention rows differ by {worst}");
        }
    }

    fn sizes(codes: bool, gated: bool, favor: bool) -> Sizes {
        Sizes {
            d: 32,
            h: 2,
            dh: 16,
            r: if codes { 8 } else { 16 },
            dir: 8,
            m: if favor { 16 } else { 8 },
            ff: 64,
            inp: 824,
            out: 256,
            layers: 2,
            piano: 568,
            codes: if codes { 2 * 16 * 8 } else { 0 },
            gated,
            favor,
        }
    }

    /// Every form of the template (codes or none, gated or not, FAVOR+ or ReLU, the default
    /// model's sizes) is valid WGSL for naga, the compiler wgpu uses natively.
    #[test]
    fn the_template_is_valid_wgsl() {
        use burn::backend::wgpu::wgpu::naga;
        let default = Sizes {
            d: 128,
            h: 4,
            dh: 32,
            r: 32,
            dir: 32,
            m: 64,
            ff: 512,
            inp: 824,
            out: 256,
            layers: 4,
            piano: 568,
            codes: 4 * 32 * 32,
            gated: true,
            favor: true,
        };
        let forms = [
            sizes(true, true, true),
            sizes(true, false, true),
            sizes(false, false, true),
            sizes(true, true, false),
            default,
        ];
        for s in forms {
            let source = AccompanimentSteps(s).source().complete();
            assert!(!source.contains("{{"), "unfilled placeholder: {s:?}");
            let module = naga::front::wgsl::parse_str(&source)
                .unwrap_or_else(|e| panic!("{s:?}: {}", e.emit_to_string(&source)));
            naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                naga::valid::Capabilities::empty(),
            )
            .validate(&module)
            .unwrap_or_else(|e| panic!("{s:?}: {e:?}"));
            assert!(s.workgroup_floats() * 4 <= WORKGROUP_BYTES, "{s:?}");
        }
    }
}
