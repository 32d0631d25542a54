//! The step-by-step decoders on wgpu, fused (issue 35): a step of the whole model in one
//! dispatch of one workgroup (`shaders/performer_step.wgsl`), up to [`CHUNK`] steps read back
//! at once. Through tensor ops a step costs 350–440 dispatches and one or two read-backs; a
//! browser's WebGPU pays tens of microseconds a dispatch and milliseconds a read-back, so on a
//! real GPU the calls, not the arithmetic, were the time. Two entry points:
//!
//! - the accompaniment (`shaders/accompaniment_steps.wgsl`, [`FusedSteps::run`]): input rows,
//!   and each step's piano notes drawn on the GPU;
//! - continuation ([`FusedSteps::run_tokens`], `shaders/continuation_steps.wgsl`): a token, and
//!   the next one sampled on the GPU under the grammar, which the next step reads, so a chunk
//!   of tokens runs without the host; the host replays the draws and keeps the steps up to the
//!   first token it writes otherwise ([`FusedSteps::keep`]: the sums are a ring of slots).
//!
//! Alternatives of the accompaniment ([`FusedSteps::prepare_batch`], [`FusedSteps::run_batch`])
//! run in the same dispatches, one workgroup per sequence: each reads the shared weights, its
//! own seed's draws, rows, codes and sums, so the dispatches a step do not grow with K.
//!
//! The weights, each sequence's draws (gate noise, feature-map directions) and the attention
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

use burn::backend::wgpu::{
    CubeTensor, KernelSource, SourceKernel, SourceTemplate, into_contiguous,
};
use burn::cubecl::ir::attributes::BufferIOAttr;
use burn::cubecl::prelude::KernelId;
use burn::cubecl::server::{KernelArguments, MetadataBindingInfo};
use burn::cubecl::{CubeCount, CubeDim};
use burn::tensor::{DType, Device, Shape, Tensor, TensorData};

use super::sample::{PianoSampling, Sampling};
use crate::generate::GenerateError;
use crate::model::config::AttentionKind;
use crate::model::features::FeatureKind;
use crate::model::kernels::{from_cube, pack_u32, wgpu_primitive};
use crate::model::pe::{PeKind, PlainCodes, PlainKernel};
use crate::model::performer::{Performer, State, Sums};
use crate::music::roll::PITCHES;
use crate::music::tokens::{STEPS_PER_BEAT, Token, VOCAB_SIZE};

const STEP_SHADER: &str = include_str!("../../shaders/performer_step.wgsl");
const ACCOMPANIMENT_SHADER: &str = include_str!("../../shaders/accompaniment_steps.wgsl");
const CONTINUATION_SHADER: &str = include_str!("../../shaders/continuation_steps.wgsl");

/// Most steps one read-back brings: a bar of sixteenths, or 16 tokens.
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
    FORCED
        .with(std::cell::Cell::get)
        .unwrap_or_else(|| ENABLED.load(Ordering::Relaxed))
}

thread_local! {
    /// This thread's own setting while the self-check compares both ways (others keep theirs).
    static FORCED: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// Sets this thread's own setting (`None`: the global one again), for the self-check's
/// comparisons.
pub(super) fn force(on: Option<bool>) {
    FORCED.with(|f| f.set(on));
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

/// What a step reads and does with its logits: the entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Mode {
    /// The accompaniment: input rows whose piano planes start at `piano`; the notes drawn.
    Rows { piano: u32 },
    /// Continuation: a token; the next one sampled.
    Tokens,
}

/// Floats a continuation step writes after its logits: its draw and the grammar after it.
const CARRY: usize = 8;

/// Slots of attention sums a continuation chunk rings through: one per step and the start.
const TOKEN_SLOTS: usize = CHUNK + 1;

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
    /// Rows of the input layer: the input width, or the vocabulary.
    inp: u32,
    out: u32,
    layers: u32,
    mode: Mode,
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
        let common = 2 * d
            + 4 * hd
            + 2 * h * self.r as usize
            + 2 * h * self.m as usize
            + h
            + self.ff as usize
            + self.out as usize
            + 3;
        common
            + match self.mode {
                Mode::Rows { .. } => 2 * PITCHES + self.inp as usize + 1,
                Mode::Tokens => 2 * self.out as usize + 7,
            }
    }

    /// Floats of a step's own input before its codes: its row, or nothing (a token is read
    /// from the last step's draw).
    fn own_in(&self) -> usize {
        match self.mode {
            Mode::Rows { .. } => self.inp as usize,
            Mode::Tokens => 0,
        }
    }

    /// Floats a step's input takes in the steps buffer, and its output in the outputs.
    fn step_in(&self) -> usize {
        self.own_in() + 2 * self.codes as usize
    }

    /// Where the watched head's features sit in a step's outputs.
    fn feat_at(&self) -> usize {
        self.out as usize
            + match self.mode {
                Mode::Rows { .. } => 2 * PITCHES,
                Mode::Tokens => CARRY,
            }
    }

    fn step_out(&self) -> usize {
        self.feat_at() + 2 * self.m as usize
    }

    /// The weights buffer with `streams` sequences' draws, in the order the kernel reads it.
    fn weight_floats(&self, streams: usize) -> usize {
        let (d, hd, ff) = (self.d as usize, self.hd() as usize, self.ff as usize);
        let layer = 2 * d
            + 3 * (d * hd + hd)
            + (hd * d + d)
            + 2 * d
            + (d * ff + ff)
            + (ff * d + d)
            + 2 * self.gate() as usize;
        let out = self.out as usize;
        let shared =
            self.inp as usize * d + d + self.layers as usize * layer + 2 * d + d * out + out;
        let draws = self.epsn() as usize + (self.h * self.r * self.dir) as usize;
        shared + streams * self.layers as usize * draws
    }

    /// One slot of attention sums: S and z of every layer.
    fn slot_floats(&self) -> usize {
        let (l, h, m) = (self.layers as usize, self.h as usize, self.m as usize);
        l * h * m * self.dh as usize + l * h * m
    }

    fn slots(&self) -> usize {
        match self.mode {
            Mode::Rows { .. } => 1,
            Mode::Tokens => TOKEN_SLOTS,
        }
    }

    /// The state buffer: the slots, then the previous piano step for the accompaniment.
    fn state_floats(&self) -> usize {
        self.slots() * self.slot_floats()
            + match self.mode {
                Mode::Rows { .. } => 2 * PITCHES,
                Mode::Tokens => 0,
            }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct FusedKernel(Sizes);

impl KernelSource for FusedKernel {
    fn source(&self) -> SourceTemplate {
        let s = &self.0;
        let entry = match s.mode {
            Mode::Rows { .. } => ACCOMPANIMENT_SHADER,
            Mode::Tokens => CONTINUATION_SHADER,
        };
        let mut t = SourceTemplate::new(format!("{STEP_SHADER}\n{entry}"));
        let mut values = vec![
            ("d", s.d),
            ("hd", s.hd()),
            ("h", s.h),
            ("dh", s.dh),
            ("r", s.r),
            ("dir", s.dir),
            ("m", s.m),
            ("ff", s.ff),
            ("in_rows", s.inp),
            ("out", s.out),
            ("layers", s.layers),
            ("wg", WG),
            ("codes", s.codes),
            ("step_in", s.own_in() as u32),
            ("ostep", s.step_out() as u32),
            ("feat_at", s.feat_at() as u32),
            ("slot", s.slot_floats() as u32),
            ("hr", s.h * s.r),
            ("hm", s.h * s.m),
            ("gate", s.gate()),
            ("epsn", s.epsn()),
        ];
        match s.mode {
            Mode::Rows { piano } => values.push(("piano", piano)),
            Mode::Tokens => values.extend([
                ("t_bar", Token::Bar.id()),
                ("t_meter", Token::Meter(1).id()),
                ("t_position", Token::Position(0).id()),
                ("t_chord", Token::Chord(None).id()),
                ("t_tempo", Token::Tempo(0).id()),
                ("t_pitch", Token::Pitch(0).id()),
                ("t_velocity", Token::Velocity(0).id()),
                ("t_duration", Token::Duration(1).id()),
                ("vocab", VOCAB_SIZE as u32),
                ("steps_per_beat", STEPS_PER_BEAT as u32),
            ]),
        }
        for (key, value) in values {
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
    /// Read and written by every dispatch (the accompaniment's in place, continuation's in a
    /// ring of slots): only this holds it.
    state: CubeTensor,
    /// The slot the next chunk starts from, and the steps the last continuation chunk ran.
    base: usize,
    ran: usize,
    /// Sequences decoded together (one workgroup each).
    streams: usize,
    kernel: Option<Arc<dyn PlainKernel>>,
    /// Each stream's Z [heads, dim · J, R] of sine codes, read once.
    mixes: Vec<Option<Vec<f32>>>,
    code_scale: f32,
    feature_scale: f32,
    device: Device,
}

fn flat<const D: usize>(t: Tensor<D>) -> Tensor<1> {
    let n = t.shape().num_elements();
    t.reshape([n])
}

/// The state buffer for `states`' attention sums, one stream after the other: S of every layer
/// then z of every layer in the first slot, the others zero, then the stream's part of
/// `previous` (the accompaniment's piano step). `None` when the sums are not a single
/// sequence's tensors on wgpu.
fn sums(sizes: &Sizes, states: &[State], previous: &[f32], device: &Device) -> Option<CubeTensor> {
    let (h, m, dh) = (sizes.h as usize, sizes.m as usize, sizes.dh as usize);
    let per = previous.len() / states.len().max(1);
    let mut all = Vec::new();
    for (i, state) in states.iter().enumerate() {
        let mut s_parts = Vec::with_capacity(sizes.layers as usize);
        let mut z_parts = Vec::with_capacity(sizes.layers as usize);
        for layer in 0..sizes.layers as usize {
            match state.linear_sums(layer) {
                Sums::Empty => {
                    s_parts.push(Tensor::<1>::zeros([h * m * dh], device));
                    z_parts.push(Tensor::<1>::zeros([h * m], device));
                }
                Sums::Tensors(sums) if sums.s.dims()[0] == 1 => {
                    s_parts.push(flat(sums.s.clone()));
                    z_parts.push(flat(sums.z.clone()));
                }
                _ => return None,
            }
        }
        all.extend(s_parts);
        all.extend(z_parts);
        let others = (sizes.slots() - 1) * sizes.slot_floats();
        if others > 0 {
            all.push(Tensor::zeros([others], device));
        }
        if per > 0 {
            let own = previous[i * per..(i + 1) * per].to_vec();
            all.push(Tensor::from_data(TensorData::new(own, vec![per]), device));
        }
    }
    let t = into_contiguous(wgpu_primitive(&Tensor::cat(all, 0))?);
    (t.meta.num_elements() == states.len() * sizes.state_floats()).then_some(t)
}

/// What a generation's steps read: the accompaniment's input rows, with the piano step before
/// the first, or continuation tokens.
pub enum Steps<'a> {
    /// Rows whose piano planes start at `piano`; `previous` [256 per stream] is the piano step
    /// before the first (onsets, then sustains) of each stream.
    Rows {
        piano: usize,
        previous: &'a [f32],
    },
    Tokens,
}

impl FusedSteps {
    /// Gathers what the kernel reads for `model` decoding `steps` from `state` (a prefill's
    /// sums, or none). `Ok(None)` where the kernel does not apply (see the module's notes).
    pub async fn prepare(
        model: &Performer,
        state: &State,
        steps: Steps<'_>,
        device: &Device,
    ) -> Result<Option<Self>, GenerateError> {
        Self::prepare_batch(model, std::slice::from_ref(state), steps, device).await
    }

    /// [`Self::prepare`] for several sequences of `model` decoded together (alternatives:
    /// each state its own seed's draws and its own sums), one workgroup each in every
    /// dispatch. Continuation decodes one.
    pub async fn prepare_batch(
        model: &Performer,
        states: &[State],
        steps: Steps<'_>,
        device: &Device,
    ) -> Result<Option<Self>, GenerateError> {
        let c = &model.config;
        let Some(state) = states.first() else {
            return Ok(None);
        };
        let k = states.len();
        let (mode, previous) = match steps {
            Steps::Rows { piano, previous } => {
                if model.input.is_none()
                    || c.output_dim != 2 * PITCHES
                    || previous.len() != 2 * PITCHES * k
                    || piano + 2 * PITCHES > c.input_dim
                {
                    return Ok(None);
                }
                let piano = piano as u32;
                (Mode::Rows { piano }, previous)
            }
            Steps::Tokens => {
                let Some(e) = &model.embedding else {
                    return Ok(None);
                };
                if c.output_dim != VOCAB_SIZE
                    || e.weight.dims() != [VOCAB_SIZE, c.d_model]
                    || k != 1
                {
                    return Ok(None);
                }
                (Mode::Tokens, &[][..])
            }
        };
        if c.attention != AttentionKind::Linear
            || !c.is_causal()
            || matches!(c.pe.kind, PeKind::Ape | PeKind::Cape)
            || c.pe.is_structural()
            || states.iter().any(|s| s.maps.len() != c.layers)
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
        if gated && (codes == 0 || states.iter().any(|s| s.draw.eps.len() != c.layers)) {
            return Ok(None);
        }
        let dir = state.maps[0].w.dims()[2];
        let favor = state.maps[0].kind == FeatureKind::Favor;
        if c.features != if favor { 2 * dir } else { dir } {
            return Ok(None);
        }
        let inp = match mode {
            Mode::Rows { .. } => c.input_dim,
            Mode::Tokens => VOCAB_SIZE,
        };
        let sizes = Sizes {
            d: c.d_model as u32,
            h: c.heads as u32,
            dh: c.d_head as u32,
            r: qk_dim as u32,
            dir: dir as u32,
            m: c.features as u32,
            ff: c.d_ff as u32,
            inp: inp as u32,
            out: c.output_dim as u32,
            layers: c.layers as u32,
            mode,
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
        match (&model.input, &model.embedding, mode) {
            (Some(input), _, Mode::Rows { .. }) => parts.extend(linear(input)),
            (_, Some(e), Mode::Tokens) => {
                parts.push(flat(e.weight.val()));
                parts.push(Tensor::zeros([c.d_model], device));
            }
            _ => return Ok(None),
        }
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
            }
        }
        parts.extend(norm(&model.norm));
        parts.extend(linear(&model.head));
        // Each stream's draws: per layer its gate noise and its feature-map directions.
        for state in states {
            for layer in 0..c.layers {
                if gated {
                    parts.push(flat(state.draw.eps[layer].clone()));
                }
                parts.push(flat(state.maps[layer].w.clone()));
            }
        }
        let weights = Tensor::cat(parts, 0);
        let Some(weights) = wgpu_primitive(&weights) else {
            return Ok(None);
        };
        let weights = into_contiguous(weights);
        if weights.meta.num_elements() != sizes.weight_floats(k) {
            return Err(GenerateError::Read(format!(
                "the fused steps' weights do not have the size the kernel reads ({} values, \
                 not {})",
                weights.meta.num_elements(),
                sizes.weight_floats(k),
            )));
        }
        let properties = weights.client.properties();
        let largest = (weights.meta.num_elements().max(k * sizes.state_floats()) * 4) as u64;
        if largest > properties.memory.max_page_size
            || properties.hardware.max_bindings + 1 < STORAGE_BINDINGS
        {
            return Ok(None);
        }
        let Some(state_p) = sums(&sizes, states, previous, device) else {
            return Ok(None);
        };
        let mut mixes = Vec::with_capacity(k);
        for state in states {
            mixes.push(match &state.draw.mix {
                Some(mix) if codes > 0 => Some(
                    crate::model::read(mix.clone())
                        .await
                        .map_err(GenerateError::Read)?,
                ),
                _ => None,
            });
        }
        let code_scale = if codes > 0 {
            let (d, rr) = (c.d_head as f32, qk_dim as f32);
            (d * rr).powf(-0.25) * rr.powf(-0.25)
        } else {
            (c.d_head as f32).powf(-0.25)
        };
        let m = c.features;
        Ok(Some(Self {
            sizes,
            weights,
            state: state_p,
            base: 0,
            ran: 0,
            streams: k,
            kernel,
            mixes,
            code_scale,
            feature_scale: 1.0 / (m as f32).sqrt(),
            device: device.clone(),
        }))
    }

    /// Starts again from `state`'s sums (a continuation that read its view afresh).
    pub fn reload(&mut self, state: &State) -> Result<(), GenerateError> {
        let one = std::slice::from_ref(state);
        self.state = sums(&self.sizes, one, &[], &self.device).ok_or_else(|| {
            GenerateError::Read("the attention sums could not be gathered for the GPU".into())
        })?;
        self.base = 0;
        self.ran = 0;
        Ok(())
    }

    /// Codes `Qbar`, `Kbar` [heads · dim, R] of `state`'s position (advancing nothing), for
    /// stream `stream` (its draws).
    fn codes(
        &self,
        stream: usize,
        state: &mut State,
        out: &mut Vec<f32>,
    ) -> Result<(), GenerateError> {
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
                let Some(mix) = &self.mixes[stream] else {
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
        let one = std::slice::from_mut(state);
        let mut out = self
            .run_batch(&[rows], first, std::slice::from_ref(sampling), watch, one)
            .await?;
        Ok(out.pop().expect("one stream"))
    }

    /// [`Self::run`] for every stream at once, in the same dispatches: stream k's rows
    /// `rows[k]` (as many for each), drawn with `samplings[k]` (they differ only in their seed)
    /// from `states[k]`'s position. Returns each stream's outputs.
    pub async fn run_batch(
        &mut self,
        rows: &[&[f32]],
        first: usize,
        samplings: &[PianoSampling],
        watch: Option<(usize, usize)>,
        states: &mut [State],
    ) -> Result<Vec<Vec<f32>>, GenerateError> {
        let s = self.sizes;
        if !matches!(s.mode, Mode::Rows { .. }) {
            return Err(GenerateError::Read(
                "these fused steps read tokens, not rows".into(),
            ));
        }
        let k = self.streams;
        let Some(sampling) = samplings.first() else {
            return Err(GenerateError::Read("no stream to run".into()));
        };
        let same = |a: &PianoSampling| PianoSampling { seed: 0, ..*a };
        if rows.len() != k
            || samplings.len() != k
            || states.len() != k
            || samplings.iter().any(|x| same(x) != same(sampling))
        {
            return Err(GenerateError::Read(format!(
                "the fused steps decode {k} streams, each with its rows, its state and a \
                 sampling that differs only in its seed"
            )));
        }
        let n = rows[0].len() / s.inp as usize;
        if n == 0 || n > CHUNK || rows.iter().any(|r| r.len() != n * s.inp as usize) {
            return Err(GenerateError::Read(format!(
                "the fused steps take 1 to {CHUNK} rows of {} values",
                s.inp
            )));
        }
        let (threshold, thresholded) = match sampling.threshold {
            Some(t) => (t, 1),
            None => (0.0, 0),
        };
        let common = Common {
            first,
            seed: sampling.seed,
            temperature: sampling.temperature,
            watch,
        };
        let mut own = vec![
            threshold.to_bits(),
            thresholded,
            sampling.hold_temperature.to_bits(),
            sampling.onset_bias().to_bits(),
            n as u32,
        ];
        for x in samplings {
            own.extend([x.seed as u32, (x.seed >> 32) as u32]);
        }
        self.launch(n, Some(rows), &common, &own, states).await
    }

    /// Runs `n` (1 to [`CHUNK`]) continuation steps from `state`'s position, which it advances
    /// by n: the first reads `token` (the music's last, with `grammar` as it stands after it),
    /// each later one the token the step before it drew (`sampling`'s temperature and top-p,
    /// no echo; the uniform of draw `first + j` under its seed; the end of the piece only if
    /// `may_end`). Returns per step ([`Self::step_out`] floats) the logits [vocabulary], the
    /// draw and the grammar after it ([`Drawn::of`] reads them), and the watched features.
    /// Then [`Self::keep`] says how many of the steps stand.
    #[allow(clippy::too_many_arguments)]
    pub async fn run_tokens(
        &mut self,
        n: usize,
        token: u32,
        grammar: [u32; 4],
        may_end: bool,
        first: usize,
        sampling: &Sampling,
        watch: Option<(usize, usize)>,
        state: &mut State,
    ) -> Result<Vec<f32>, GenerateError> {
        if self.sizes.mode != Mode::Tokens || n == 0 || n > CHUNK {
            return Err(GenerateError::Read(format!(
                "these fused steps take 1 to {CHUNK} tokens at a time"
            )));
        }
        if self.ran > 0 {
            return Err(GenerateError::Read(
                "the last fused tokens were not kept or dropped".into(),
            ));
        }
        let common = Common {
            first,
            seed: sampling.seed,
            temperature: sampling.temperature,
            watch,
        };
        let mut own = vec![sampling.top_p.to_bits(), token];
        own.extend(grammar);
        own.push(may_end as u32);
        let mut values = self
            .launch(n, None, &common, &own, std::slice::from_mut(state))
            .await?;
        self.ran = n;
        Ok(values.pop().expect("one stream"))
    }

    /// Of the steps the last [`Self::run_tokens`] ran, the first `steps` stand (each read the
    /// token the music has there): the next chunk starts from the sums they left. The caller
    /// keeps `state`'s position (the codes') where the music is.
    pub fn keep(&mut self, steps: usize) {
        self.base = (self.base + steps.min(self.ran)) % self.sizes.slots();
        self.ran = 0;
    }

    /// The dispatches of `n` steps of every stream (their rows, for the accompaniment) and
    /// their read-back, each stream's outputs apart.
    async fn launch(
        &mut self,
        n: usize,
        rows: Option<&[&[f32]]>,
        common: &Common,
        own: &[u32],
        states: &mut [State],
    ) -> Result<Vec<Vec<f32>>, GenerateError> {
        let s = self.sizes;
        if common
            .watch
            .is_some_and(|(layer, head)| layer >= s.layers as usize || head >= s.h as usize)
        {
            return Err(GenerateError::Read(
                "the watched head is not in the model".into(),
            ));
        }
        let k = states.len();
        let mut input = Vec::with_capacity(k * n * s.step_in());
        for (stream, state) in states.iter_mut().enumerate() {
            for i in 0..n {
                if let Some(rows) = rows {
                    let row = &rows[stream][i * s.inp as usize..(i + 1) * s.inp as usize];
                    input.extend_from_slice(row);
                }
                self.codes(stream, state, &mut input)?;
                state.position += 1;
            }
        }
        debug_assert_eq!(input.len(), k * n * s.step_in());
        // A buffer of one float when a step reads nothing (no rows, no codes).
        let len = input.len().max(1);
        input.resize(len, 0.0);
        let steps = Tensor::<1>::from_data(TensorData::new(input, vec![len]), &self.device);
        let steps = wgpu_primitive(&steps)
            .map(into_contiguous)
            .ok_or_else(|| GenerateError::Read("the steps' buffer is not on wgpu".into()))?;
        let client = self.weights.client.clone();
        let out_floats = k * n * s.step_out();
        let outs = CubeTensor::new_contiguous(
            client.clone(),
            self.weights.device.clone(),
            Shape::new([out_floats]),
            client.empty(out_floats * core::mem::size_of::<f32>()),
            DType::F32,
        );
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
            let mut info = vec![
                per.min(n - at) as u32,
                common.first as u32,
                common.seed as u32,
                (common.seed >> 32) as u32,
                common.temperature.max(1e-4).to_bits(),
                self.code_scale.to_bits(),
                self.feature_scale.to_bits(),
                at as u32,
                common.watch.map_or(u32::MAX, |w| w.0 as u32),
                common.watch.map_or(0, |w| w.1 as u32),
                self.base as u32,
                s.slots() as u32,
            ];
            info.extend_from_slice(own);
            let args = bindings().with_info(MetadataBindingInfo::custom(pack_u32(&info)));
            client.launch(
                Box::new(SourceKernel::new(FusedKernel(s), CubeDim::new_1d(WG))),
                CubeCount::Static(k as u32, 1, 1),
                args,
            );
        }
        let outs = from_cube::<1>(outs);
        let values = crate::model::read(outs)
            .await
            .map_err(|e| GenerateError::Read(format!("the fused steps could not be read: {e}")))?;
        if values.len() != out_floats {
            return Err(GenerateError::Read(
                "the fused steps returned too little".into(),
            ));
        }
        Ok(values
            .chunks(n * s.step_out())
            .map(<[f32]>::to_vec)
            .collect())
    }

    /// Floats per step in what [`Self::run`] returns.
    pub fn step_out(&self) -> usize {
        self.sizes.step_out()
    }

    /// The feature-map width m: the watched head's query and key features are m floats each.
    pub fn features(&self) -> usize {
        self.sizes.m as usize
    }

    /// Where the watched head's query and key features start in a step's outputs.
    pub fn features_at(&self) -> usize {
        self.sizes.feat_at()
    }
}

/// What every dispatch's `info` starts with.
struct Common {
    /// The chunk's first step's index (numbers the draws).
    first: usize,
    seed: u64,
    temperature: f32,
    watch: Option<(usize, usize)>,
}

/// A continuation step's draw and the grammar after it, as [`FusedSteps::run_tokens`] returns
/// them after the step's logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Drawn {
    pub token: u32,
    pub grammar: [u32; 4],
}

impl Drawn {
    /// The draw of the step whose outputs are `step` (with its logits, `vocab` of them).
    pub fn of(step: &[f32], vocab: usize) -> Self {
        let c = &step[vocab..vocab + CARRY];
        let none = |v: f32| if v < 0.0 { u32::MAX } else { v as u32 };
        Self {
            token: c[0] as u32,
            grammar: [c[1] as u32, c[2] as u32, none(c[3]), none(c[4])],
        }
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
