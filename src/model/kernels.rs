//! Hand-written WGSL kernels launched through Burn's template-kernel path (features
//! `extension`, `template`, `cubecl`; see docs/research/burn-custom-kernels.md), for inference
//! on wgpu (WebGPU in the browser, Vulkan/Metal/DX12 natively).
//!
//! One kernel so far: `shaders/causal_dot_product.wgsl`, causal linear attention fused into one
//! dispatch. [`causal_linear_fused`] returns `None` whenever it cannot run (the CPU backend,
//! autodiff tensors, non-f32 data, more than [`MAX_FEATURES`] features, limits the device does
//! not meet), and [`causal_linear_fast`] then falls back to
//! [`causal_linear`](super::attention::causal_linear), which stays the reference.

use std::sync::atomic::{AtomicBool, Ordering};

use burn::backend::Cube;
use burn::backend::fusion::stream::StreamId;
use burn::backend::fusion::{NoOp, get_client};
use burn::backend::ir::{BackendIr, InitOperationIr, OperationIr, OperationOutput};
use burn::backend::wgpu::{
    CubeBackend, CubeTensor, KernelSource, SourceKernel, SourceTemplate, into_contiguous,
};
use burn::cubecl::ir::attributes::BufferIOAttr;
use burn::cubecl::prelude::KernelId;
use burn::cubecl::server::{KernelArguments, MetadataBindingInfo};
use burn::cubecl::{CubeCount, CubeDim, MemoryScope, RuntimeId};
use burn::tensor::{DType, Device, Shape, Tensor, TensorData};

use super::attention::{EPS, LinearState, causal_linear};
use super::read;

const CAUSAL_DOT_PRODUCT_WGSL: &str = include_str!("../../shaders/causal_dot_product.wgsl");

/// Largest feature count the kernel takes: each invocation keeps `m` floats in a private array.
pub const MAX_FEATURES: usize = 256;

/// Invocations per workgroup. Small on purpose: there is one invocation per (batch·head, value
/// column), often only a few hundred in all, and small groups spread them over more compute
/// units. Within WebGPU's default limits (256 per workgroup, 256 in x).
const WG: u32 = 64;

/// Storage buffers the kernel binds: six tensors and the info buffer.
const STORAGE_BINDINGS: u32 = 7;

/// Largest element count of any one buffer: indices are u32 in the shader, and the products
/// it checks (`n_bh * len * m`, …) must not wrap.
const MAX_ELEMENTS: u64 = i32::MAX as u64;

static FUSED: AtomicBool = AtomicBool::new(true);

/// Turns the fused kernel on or off for [`causal_linear_fast`] (on by default). For
/// benchmarks, and a way out if a browser's WebGPU mis-compiles it.
pub fn set_fused(enabled: bool) {
    FUSED.store(enabled, Ordering::Relaxed);
}

pub fn fused_enabled() -> bool {
    FUSED.load(Ordering::Relaxed)
}

/// `shaders/causal_dot_product.wgsl` with its template values. Everything that changes the
/// text is in [`KernelSource::id`]: the id is the pipeline-cache key and never sees the text.
#[derive(Clone, Copy, Debug)]
struct CausalDotProduct {
    /// Features `m`, the size of the private state column.
    m: u32,
    /// Workgroup size.
    wg: u32,
}

impl KernelSource for CausalDotProduct {
    fn source(&self) -> SourceTemplate {
        // An unregistered placeholder silently becomes "": all three are registered.
        SourceTemplate::new(CAUSAL_DOT_PRODUCT_WGSL)
            .register("m", self.m.to_string())
            .register("m4", (self.m - self.m % 4).to_string())
            .register("wg", self.wg.to_string())
    }

    fn id(&self) -> KernelId {
        // `m4` follows from `m`.
        KernelId::new::<Self>().info((self.m, self.wg))
    }

    fn lang(&self) -> &'static str {
        "wgsl"
    }
}

/// Two u32 per u64 word, little-endian: the shader reads the info as a plain `array<u32>`.
pub(crate) fn pack_u32(words: &[u32]) -> Vec<u64> {
    words
        .chunks(2)
        .map(|c| c[0] as u64 | ((*c.get(1).unwrap_or(&0) as u64) << 32))
        .collect()
}

/// Workgroups for `n` invocations of `wg` each, at most 65 535 per dimension (a 2-D grid past
/// that; the shader linearises `(y, x)`).
fn grid(n: usize, wg: u32) -> CubeCount {
    let groups = (n as u32).div_ceil(wg).max(1);
    let x = groups.min(65_535);
    CubeCount::Static(x, groups.div_ceil(x), 1)
}

/// The cubecl primitive of a plain (non-autodiff) f32 tensor on a wgpu device; `None` for
/// anything else (Flex, autodiff, other cubecl runtimes, f16, quantized).
///
/// Burn's `fusion` is on for wgpu (it fuses chains of element-wise ops into one kernel): the
/// tensor is then a lazy fusion tensor, and resolving it runs what its stream has queued and
/// hands over the buffer. [`from_cube`] registers a kernel's output back with fusion.
pub(crate) fn wgpu_primitive<const D: usize>(t: &Tensor<D>) -> Option<CubeTensor> {
    // `try_into_primitive` consumes its tensor even when it fails: hand it a clone (a refcount).
    // It fails for Flex tensors and for any tensor with autodiff enabled.
    let p = t.clone().try_into_primitive::<Cube>().ok()?;
    if p.dtype != DType::F32 || p.client.device().runtime() != RuntimeId::Wgpu {
        return None;
    }
    let p = p.client.clone().resolve_tensor_float::<CubeBackend>(p);
    p.qparams.is_none().then_some(p)
}

/// A tensor over a kernel's output buffer, registered with fusion as an initialised tensor
/// (the inverse of [`wgpu_primitive`]).
pub(crate) fn from_cube<const D: usize>(t: CubeTensor) -> Tensor<D> {
    let client = get_client::<CubeBackend>(&t.device);
    let shape = t.meta.shape.clone();
    let dtype = t.dtype;
    let handle = CubeBackend::float_tensor_handle(t);
    let init = InitOperationIr::create(shape, dtype, || client.register_tensor_handle(handle));
    let out = client
        .register(
            StreamId::current(),
            OperationIr::Init(init),
            NoOp::<CubeBackend>::new(),
        )
        .output();
    Tensor::from_primitive::<Cube>(out)
}

/// Causal linear attention in one WGSL dispatch, for inference: the same result as
/// [`causal_linear`] (any chunk) up to float rounding. Shapes: `phi_q`, `phi_k` [b, h, L, m],
/// `v` [b, h, L, d_v], `state.s` [b, h, m, d_v], `state.z` [b, h, m, 1]; returns the output
/// [b, h, L, d_v] and the state after the last position.
///
/// `None`, having launched nothing, when the kernel cannot run here: not every tensor is a
/// plain f32 wgpu tensor on one device (the CPU backend, or autodiff: training keeps the
/// differentiable reference), `m` is 0 or above [`MAX_FEATURES`], a size is 0, or a buffer
/// would exceed the device's limits.
pub fn causal_linear_fused(
    phi_q: &Tensor<4>,
    phi_k: &Tensor<4>,
    v: &Tensor<4>,
    state: &LinearState,
) -> Option<(Tensor<4>, LinearState)> {
    let len = phi_q.dims()[2];
    if len <= FUSED_SPAN {
        return fused_once(phi_q, phi_k, v, state);
    }
    // Longer sequences go [`FUSED_SPAN`] positions a dispatch, each from the state the last
    // one left: the same result, and no dispatch longer than those checked to agree.
    let narrow = |t: &Tensor<4>, at: usize, n: usize| t.clone().narrow(2, at, n);
    let mut outs = Vec::with_capacity(len.div_ceil(FUSED_SPAN));
    let mut state = state.clone();
    let mut at = 0;
    while at < len {
        let n = FUSED_SPAN.min(len - at);
        let (out, next) = fused_once(
            &narrow(phi_q, at, n),
            &narrow(phi_k, at, n),
            &narrow(v, at, n),
            &state,
        )?;
        outs.push(out);
        state = next;
        at += n;
    }
    Some((Tensor::cat(outs, 2), state))
}

/// The most positions one dispatch walks. On Mesa's llvmpipe (native GL) a single dispatch over
/// 2 048 positions or more returned wrong numbers (`pianoformer bench attention` checks the
/// kernel against the reference at every length it times); 1 024 agreed.
pub const FUSED_SPAN: usize = 1024;

fn fused_once(
    phi_q: &Tensor<4>,
    phi_k: &Tensor<4>,
    v: &Tensor<4>,
    state: &LinearState,
) -> Option<(Tensor<4>, LinearState)> {
    let [b, h, len, m] = phi_q.dims();
    let dv = v.dims()[3];
    let shapes_fit = phi_k.dims() == [b, h, len, m]
        && v.dims() == [b, h, len, dv]
        && state.s.dims() == [b, h, m, dv]
        && state.z.dims() == [b, h, m, 1];
    if !shapes_fit || b * h == 0 || len == 0 || dv == 0 || !(1..=MAX_FEATURES).contains(&m) {
        return None;
    }
    let (bh, cols) = (b * h, dv + 1);
    // In u64: on wasm32 a usize product could wrap before the check.
    fn count(dims: &[usize]) -> u64 {
        dims.iter().map(|&d| d as u64).product()
    }
    let largest = count(&[bh, len, m])
        .max(count(&[bh, len, cols]))
        .max(count(&[bh, m, cols]));
    if largest > MAX_ELEMENTS {
        return None;
    }

    // Every input a plain f32 wgpu tensor, all on one device. The state is checked before the
    // concatenation below so that nothing is computed for a fallback.
    let q = wgpu_primitive(phi_q)?;
    let k = wgpu_primitive(phi_k)?;
    let vv = wgpu_primitive(v)?;
    let same_device = |t: &Tensor<4>| wgpu_primitive(t).is_some_and(|p| p.device == q.device);
    if k.device != q.device
        || vv.device != q.device
        || !same_device(&state.s)
        || !same_device(&state.z)
    {
        return None;
    }
    let client = q.client.clone();
    let properties = client.properties();
    // Largest binding (WebGPU's default is 128 MiB) and storage buffers per shader stage
    // (cubecl reports one fewer than the device's limit: `max_bindings`).
    if largest * 4 > properties.memory.max_page_size
        || properties.hardware.max_bindings + 1 < STORAGE_BINDINGS
    {
        return None;
    }

    // The state as one [b, h, m, d_v + 1] tensor, S0 then z0: the kernel treats z as the
    // state of a value column that is always 1.
    let state_in = Tensor::cat(vec![state.s.clone(), state.z.clone()], 3);
    let state_in = wgpu_primitive(&state_in)?;

    // The kernel reads row-major data and gets no strides.
    let (q, k, vv, state_in) = (
        into_contiguous(q),
        into_contiguous(k),
        into_contiguous(vv),
        into_contiguous(state_in),
    );
    let inputs = [
        q.handle.clone().binding(),
        k.handle.clone().binding(),
        vv.handle.clone().binding(),
        state_in.handle.clone().binding(),
    ];
    // Every buffer is declared read_write, and WebGPU refuses two writable views of one
    // buffer in a dispatch: never bind one allocation twice (say `phi_k` passed as `phi_q`).
    for (i, a) in inputs.iter().enumerate() {
        if inputs[i + 1..]
            .iter()
            .any(|other| other.memory.id() == a.memory.id())
        {
            return None;
        }
    }

    let device = q.device.clone();
    let output = |shape: [usize; 4]| {
        let elements = shape.iter().product::<usize>();
        CubeTensor::new_contiguous(
            client.clone(),
            device.clone(),
            Shape::new(shape),
            client.empty(elements * core::mem::size_of::<f32>()),
            DType::F32,
        )
    };
    // Numerators in columns 0..d_v, the denominator in column d_v.
    let num_den = output([b, h, len, cols]);
    // The final state, S then z, like `state_in`.
    let state_out = output([b, h, m, cols]);

    // Bindings in the shader's order; the info buffer is appended as binding 6. The declared
    // IO only matters if the launch fails: then the outputs carry the error and the inputs
    // stay readable.
    let [bq, bk, bv, bs] = inputs;
    let args = KernelArguments::new()
        .with_buffer_io(bq, BufferIOAttr::ReadOnly) // 0: phi_q [bh, L, m]
        .with_buffer_io(bk, BufferIOAttr::ReadOnly) // 1: phi_k [bh, L, m]
        .with_buffer_io(bv, BufferIOAttr::ReadOnly) // 2: v [bh, L, d_v]
        .with_buffer_io(bs, BufferIOAttr::ReadOnly) // 3: state_in [bh, m, d_v + 1]
        .with_buffer_io(num_den.handle.clone().binding(), BufferIOAttr::WriteOnly) // 4
        .with_buffer_io(state_out.handle.clone().binding(), BufferIOAttr::WriteOnly) // 5
        .with_info(MetadataBindingInfo::custom(pack_u32(&[
            bh as u32, len as u32, m as u32, dv as u32,
        ])));
    let kernel = CausalDotProduct {
        m: m as u32,
        wg: WG,
    };
    client.launch(
        Box::new(SourceKernel::new(kernel, CubeDim::new_1d(WG))),
        grid(bh * cols, WG),
        args,
    );

    let num_den = from_cube::<4>(num_den);
    let state_out = from_cube::<4>(state_out);
    // The reference's normalisation, to the letter: num / (den + EPS).
    let num = num_den.clone().narrow(3, 0, dv);
    let den = num_den.narrow(3, dv, 1);
    let out = num / den.add_scalar(EPS);
    let next = LinearState {
        s: state_out.clone().narrow(3, 0, dv),
        z: state_out.narrow(3, dv, 1),
    };
    Some((out, next))
}

/// [`causal_linear_fused`] when it is enabled and can run, [`causal_linear`] otherwise: the
/// model's parallel (prefill) path.
pub fn causal_linear_fast(
    phi_q: Tensor<4>,
    phi_k: Tensor<4>,
    v: Tensor<4>,
    chunk: usize,
    state: LinearState,
) -> (Tensor<4>, LinearState) {
    if fused_enabled()
        && let Some(done) = causal_linear_fused(&phi_q, &phi_k, &v, &state)
    {
        return done;
    }
    causal_linear(phi_q, phi_k, v, chunk, state)
}

/// Bytes in use and bytes reserved by the memory pools of the wgpu device `t` lives on (every
/// stream), or `None` off wgpu. For benchmarks.
pub fn gpu_memory<const D: usize>(t: &Tensor<D>) -> Option<(u64, u64)> {
    let p = wgpu_primitive(t)?;
    let usage = p.client.memory_report(MemoryScope::Device).usage();
    Some((usage.bytes_in_use, usage.bytes_reserved))
}

/// Asks the memory pools of the wgpu device `t` lives on to release what they can. For
/// benchmarks.
pub fn gpu_memory_cleanup<const D: usize>(t: &Tensor<D>) {
    if let Some(p) = wgpu_primitive(t) {
        let _ = p.client.memory_cleanup();
    }
}

/// How far the fused kernel is from the reference on one random problem: the largest
/// absolute difference over the largest absolute reference value, for the outputs and both
/// parts of the final state.
#[derive(Clone, Copy, Debug)]
pub struct FusedParity {
    pub out: f32,
    pub s: f32,
    pub z: f32,
}

impl FusedParity {
    pub fn worst(&self) -> f32 {
        self.out.max(self.s).max(self.z)
    }
}

fn relative(got: &[f32], want: &[f32]) -> Result<f32, String> {
    if got.len() != want.len() {
        return Err(format!("{} values, expected {}", got.len(), want.len()));
    }
    let scale = want
        .iter()
        .fold(0f32, |a, x| a.max(x.abs()))
        .max(f32::MIN_POSITIVE);
    let diff = got
        .iter()
        .zip(want)
        .fold(0f32, |a, (x, y)| a.max((x - y).abs()));
    // NaN (an unwritten output, say) must fail the comparison, not pass it.
    Ok(if diff.is_nan() || got.iter().any(|x| !x.is_finite()) {
        f32::INFINITY
    } else {
        diff / scale
    })
}

/// Fused kernel against [`causal_linear`] (chunks of 64) on `device`, for random non-negative
/// features, random values and a random non-zero initial state of sizes `(b, h, len, m, d_v)`.
/// Errs if the kernel does not run there (so on the CPU backend). Reads asynchronously: runs in
/// the browser too.
pub async fn fused_parity(
    device: &Device,
    (b, h, len, m, dv): (usize, usize, usize, usize, usize),
    seed: u64,
) -> Result<FusedParity, String> {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    let mut rng = StdRng::seed_from_u64(seed);
    let mut tensor = |shape: [usize; 4], positive: bool| -> Tensor<4> {
        let n = shape.iter().product::<usize>();
        let values: Vec<f32> = (0..n)
            .map(|_| super::features::normal(&mut rng) as f32)
            .map(|x| if positive { x.abs() } else { x })
            .collect();
        Tensor::from_data(TensorData::new(values, shape.to_vec()), device)
    };
    let phi_q = tensor([b, h, len, m], true);
    let phi_k = tensor([b, h, len, m], true);
    let v = tensor([b, h, len, dv], false);
    let state = LinearState {
        s: tensor([b, h, m, dv], false),
        z: tensor([b, h, m, 1], true),
    };
    let (out, next) = causal_linear_fused(&phi_q, &phi_k, &v, &state)
        .ok_or("the fused kernel does not run on this device")?;
    let (want, want_next) = causal_linear(phi_q, phi_k, v, 64, state);
    Ok(FusedParity {
        out: relative(&read(out).await?, &read(want).await?)?,
        s: relative(&read(next.s).await?, &read(want_next.s).await?)?,
        z: relative(&read(next.z).await?, &read(want_next.z).await?)?,
    })
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::device::{self, Preference};

    /// The template, filled for odd and even sizes, is valid WGSL for naga (the compiler wgpu
    /// uses natively): catches a broken shader without a GPU.
    #[test]
    fn the_template_is_valid_wgsl() {
        use burn::backend::wgpu::wgpu::naga;
        for m in [1, 3, 4, 32, 126, 128, MAX_FEATURES as u32] {
            let source = CausalDotProduct { m, wg: WG }.source().complete();
            assert!(!source.contains("{{"), "unfilled placeholder for m = {m}");
            assert!(source.contains(&format!("array<f32, {m}>")));
            let module = naga::front::wgsl::parse_str(&source)
                .unwrap_or_else(|e| panic!("m = {m}: {}", e.emit_to_string(&source)));
            naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                naga::valid::Capabilities::empty(),
            )
            .validate(&module)
            .unwrap_or_else(|e| panic!("m = {m}: {e:?}"));
        }
    }

    #[test]
    fn info_words_are_little_endian_pairs() {
        assert_eq!(pack_u32(&[1, 2, 3]), vec![1 | (2 << 32), 3]);
    }

    #[test]
    fn big_launches_use_a_second_grid_dimension() {
        match grid(70_000 * 64, 64) {
            CubeCount::Static(x, y, 1) => {
                assert!(x <= 65_535 && x as u64 * y as u64 * 64 >= 70_000 * 64)
            }
            _ => panic!("static count expected"),
        }
    }

    /// On the CPU backend, and under autodiff, the kernel declines and the fast path is the
    /// reference.
    #[test]
    fn the_kernel_declines_off_wgpu() {
        for device in [Device::flex(), Device::flex().autodiff()] {
            let x = |shape: [usize; 4]| Tensor::<4>::ones(shape, &device);
            let state = LinearState::zeros(1, 2, 4, 3, &device);
            let (q, k, v) = (x([1, 2, 5, 4]), x([1, 2, 5, 4]), x([1, 2, 5, 3]));
            assert!(causal_linear_fused(&q, &k, &v, &state).is_none());
            let (fast, _) = causal_linear_fast(q.clone(), k.clone(), v.clone(), 2, state.clone());
            let (reference, _) = causal_linear(q, k, v, 2, state);
            let read = |t: Tensor<4>| t.into_data().try_to_vec::<f32>().unwrap();
            assert_eq!(read(fast), read(reference));
        }
    }

    /// On a native GPU when there is one (skipped otherwise): the browser test's sizes.
    #[test]
    fn fused_matches_the_reference_on_a_native_gpu() {
        let Ok(gpu) = pollster::block_on(device::init(Preference::Gpu)) else {
            crate::note_skipped_test("no native GPU adapter");
            return;
        };
        let parity = pollster::block_on(fused_parity(&gpu.device, (2, 3, 300, 32, 16), 7)).unwrap();
        assert!(parity.worst() <= 1e-4, "{parity:?}");
        // Longer than one dispatch walks: spans of FUSED_SPAN, each from the last one's state.
        let long = FUSED_SPAN * 2 + 37;
        let parity = pollster::block_on(fused_parity(&gpu.device, (1, 2, long, 16, 8), 3)).unwrap();
        assert!(parity.worst() <= 1e-4, "{long} positions: {parity:?}");
        // Too many features for the kernel: it declines.
        let state = LinearState::zeros(1, 1, 257, 2, &gpu.device);
        let q = Tensor::<4>::ones([1, 1, 3, 257], &gpu.device);
        let v = Tensor::<4>::ones([1, 1, 3, 2], &gpu.device);
        assert!(causal_linear_fused(&q, &q.clone().mul_scalar(2.0), &v, &state).is_none());
    }
}
