//! Which compute backend runs the models: a GPU through wgpu (WebGPU in the browser, Vulkan or
//! Metal natively) or Burn's pure-Rust CPU backend (`flex`), and what the page and the CLI say
//! about it.
//!
//! Burn 0.22 picks the backend through the [`Device`] at run time, so the rest of the crate
//! never names one: it receives a `Device` from [`init`] and, for training, calls
//! `device.autodiff()`.

pub mod check;

use burn::tensor::Device;
use serde::Serialize;

/// What the caller asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preference {
    /// The GPU when one can be had, else the CPU (the page's default).
    Auto,
    /// The GPU or an error: used by tests that must prove the GPU path ran.
    Gpu,
    /// The CPU backend, always available.
    Cpu,
}

impl std::str::FromStr for Preference {
    type Err = DeviceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(Self::Auto),
            "gpu" | "webgpu" | "wgpu" => Ok(Self::Gpu),
            "cpu" | "flex" => Ok(Self::Cpu),
            other => Err(DeviceError::UnknownPreference(other.to_string())),
        }
    }
}

/// The kind of backend a [`Backend`] runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// wgpu: WebGPU in a browser, Vulkan/Metal/DX12 natively.
    Gpu,
    /// Burn's pure-Rust CPU backend.
    Cpu,
}

/// What was obtained, in the words the page and the CLI show.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BackendInfo {
    pub kind: BackendKind,
    /// Graphics API as wgpu names it (`BrowserWebGpu`, `Vulkan`, …), or `cpu`.
    pub api: String,
    /// Adapter description; browsers often leave it empty for privacy.
    pub adapter: String,
    /// wgpu's device type (`Cpu` for software adapters such as SwiftShader or lavapipe).
    pub device_type: String,
    /// Why the GPU was not used, in plain words, when [`Preference::Auto`] fell back to the CPU.
    pub fallback_reason: Option<String>,
    /// The GPU runtime's own message behind `fallback_reason`, for bug reports.
    pub fallback_detail: Option<String>,
}

impl BackendInfo {
    fn cpu(fallback: Option<&GpuUnavailable>) -> Self {
        Self {
            kind: BackendKind::Cpu,
            api: "cpu".into(),
            adapter: "Burn flex (pure-Rust CPU backend)".into(),
            device_type: "Cpu".into(),
            fallback_reason: fallback.map(|f| f.reason.clone()),
            fallback_detail: fallback.map(|f| f.detail.clone()),
        }
    }

    /// True when this is the browser's WebGPU implementation.
    pub fn is_browser_webgpu(&self) -> bool {
        self.kind == BackendKind::Gpu && self.api == "BrowserWebGpu"
    }

    /// Whether the adapter is a software renderer (SwiftShader, lavapipe, llvmpipe).
    pub fn is_software(&self) -> bool {
        self.kind == BackendKind::Gpu && self.device_type == "Cpu"
    }

    /// One line for a badge or a log.
    pub fn label(&self) -> String {
        match self.kind {
            BackendKind::Cpu => "CPU".to_string(),
            BackendKind::Gpu => {
                let api = if self.is_browser_webgpu() {
                    "WebGPU"
                } else {
                    &self.api
                };
                let mut s = api.to_string();
                if !self.adapter.is_empty() {
                    s.push_str(&format!(" · {}", self.adapter));
                }
                if self.is_software() {
                    s.push_str(" (software adapter)");
                }
                s
            }
        }
    }
}

/// A device ready for tensors, with a description of it.
#[derive(Clone, Debug)]
pub struct Backend {
    pub device: Device,
    pub info: BackendInfo,
}

/// Why no GPU could be used: a sentence for people and the runtime's message for bug reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuUnavailable {
    pub reason: String,
    pub detail: String,
}

impl GpuUnavailable {
    #[cfg(any(feature = "gpu", test))]
    fn from_runtime(detail: String) -> Self {
        let lower = detail.to_ascii_lowercase();
        let reason = if lower.contains("no suitable graphics adapter")
            || lower.contains("found no adapters")
            || lower.contains("no adapter available")
        {
            if cfg!(target_arch = "wasm32") {
                "this browser offers no WebGPU adapter (WebGPU is off, blocked or unsupported here)"
            } else {
                "no GPU adapter was found (no Vulkan, Metal or DX12 driver; OpenGL is tried \
                 only with PIANOFORMER_WGPU_API=gl)"
            }
        } else {
            "the GPU was found but could not be started"
        };
        Self {
            reason: reason.to_string(),
            detail,
        }
    }
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum DeviceError {
    #[error("no usable GPU: {}", .0.reason)]
    NoGpu(GpuUnavailable),
    #[error("unknown backend '{0}': use auto, gpu or cpu")]
    UnknownPreference(String),
}

/// Obtains a backend. The wgpu runtime can be initialised only once per process (per page), so
/// the first GPU initialisation (success or failure) is remembered and reused.
pub async fn init(preference: Preference) -> Result<Backend, DeviceError> {
    run_constructors();
    match preference {
        Preference::Cpu => Ok(cpu()),
        Preference::Gpu => gpu().await,
        Preference::Auto => match gpu().await {
            // Natively a software adapter (Mesa's lavapipe, installed so the GPU tests run on
            // machines without a GPU) runs these models far slower than the CPU backend: auto
            // keeps to the CPU there and says why. In the page the Worker makes this choice.
            Ok(backend) if cfg!(not(target_arch = "wasm32")) && backend.info.is_software() => {
                let why = GpuUnavailable {
                    reason: format!(
                        "the only GPU adapter is a software renderer ({})",
                        backend.info.adapter
                    ),
                    detail: "It runs these models far slower than the CPU backend; --backend gpu \
                             uses it anyway."
                        .into(),
                };
                Ok(Backend {
                    device: Device::flex(),
                    info: BackendInfo::cpu(Some(&why)),
                })
            }
            Ok(backend) => Ok(backend),
            Err(DeviceError::NoGpu(why)) => Ok(Backend {
                device: Device::flex(),
                info: BackendInfo::cpu(Some(&why)),
            }),
            Err(other) => Err(other),
        },
    }
}

#[cfg(target_arch = "wasm32")]
unsafe extern "C" {
    /// The constructors wasm-ld gathers (the `inventory` registrations of Burn's and CubeCL's
    /// crates, which CubeCL's IR needs).
    fn __wasm_call_ctors();
}

/// Runs the wasm module's constructors, once; natively the loader already did. The page's
/// start function and [`init`] call it (the browser tests reach the backends through `init`
/// alone). With a call of its own in the module, wasm-ld no longer links it "command-style",
/// which ran every constructor again at the start of every export — every call into the wasm,
/// every resolved promise: half of the page's time per continuation token.
pub fn run_constructors() {
    #[cfg(target_arch = "wasm32")]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        // SAFETY: the linker's constructor list, run once, before any backend is made.
        ONCE.call_once(|| unsafe { __wasm_call_ctors() });
    }
}

/// The CPU backend (never fails).
pub fn cpu() -> Backend {
    Backend {
        device: Device::flex(),
        info: BackendInfo::cpu(None),
    }
}

#[cfg(feature = "gpu")]
type GpuSlot = Option<Result<Backend, DeviceError>>;

/// A build without the `gpu` feature (the page's CPU bundle) has no GPU backend.
#[cfg(not(feature = "gpu"))]
async fn gpu() -> Result<Backend, DeviceError> {
    Err(DeviceError::NoGpu(GpuUnavailable {
        reason: "this build has no GPU backend (the page's CPU bundle)".into(),
        detail: "built without the `gpu` feature".into(),
    }))
}

#[cfg(all(feature = "gpu", target_arch = "wasm32"))]
async fn gpu() -> Result<Backend, DeviceError> {
    use std::cell::RefCell;
    thread_local! {
        static GPU: RefCell<GpuSlot> = const { RefCell::new(None) };
    }
    if let Some(done) = GPU.with(|slot| slot.borrow().clone()) {
        return done;
    }
    let result = Device::wgpu_options()
        .init_with_setup_async()
        .await
        .map(|(device, setup)| backend_from_setup(device, &setup))
        .map_err(|e| DeviceError::NoGpu(GpuUnavailable::from_runtime(e.to_string())));
    GPU.with(|slot| *slot.borrow_mut() = Some(result.clone()));
    result
}

#[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
async fn gpu() -> Result<Backend, DeviceError> {
    use std::sync::Mutex;
    static GPU: Mutex<GpuSlot> = Mutex::new(None);
    // Natively the initialisation is synchronous, so holding the lock across it is fine and
    // keeps concurrent tests from racing to initialise the runtime twice.
    let mut slot = GPU.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(done) = slot.as_ref() {
        return done.clone();
    }
    let api = native_graphics_api()?;
    // wgpu may panic instead of erroring on some broken driver stacks; keep that a clean error.
    let attempt =
        std::panic::catch_unwind(|| Device::wgpu_options().graphics_api(api).init_with_setup());
    let result = match attempt {
        Ok(Ok((device, setup))) => Ok(backend_from_setup(device, &setup)),
        Ok(Err(e)) => Err(DeviceError::NoGpu(GpuUnavailable::from_runtime(
            e.to_string(),
        ))),
        Err(_) => Err(DeviceError::NoGpu(GpuUnavailable {
            reason: "the GPU driver crashed while starting".into(),
            detail: "wgpu panicked during initialisation".into(),
        })),
    };
    *slot = Some(result.clone());
    result
}

/// The graphics API native GPU work asks for: the platform's own compute API (Vulkan; Metal on
/// macOS, DX12 on Windows), or the one `PIANOFORMER_WGPU_API` names (`vulkan`, `metal`, `dx12`,
/// `gl`). OpenGL is only taken when asked for: on a machine without a GPU, Mesa's EGL offers a
/// software OpenGL adapter (llvmpipe), and creating a device on it now and then aborts the
/// process (wgpu panics inside its EGL context lock while unwinding, which no `catch_unwind`
/// stops) instead of failing.
#[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
fn native_graphics_api() -> Result<burn::tensor::wgpu::WgpuBackend, DeviceError> {
    use burn::tensor::wgpu::WgpuBackend;
    let asked = std::env::var("PIANOFORMER_WGPU_API").unwrap_or_default();
    Ok(match asked.to_lowercase().as_str() {
        "" if cfg!(target_os = "macos") => WgpuBackend::Metal,
        "" if cfg!(windows) => WgpuBackend::Dx12,
        "" | "vulkan" => WgpuBackend::Vulkan,
        "metal" => WgpuBackend::Metal,
        "dx12" => WgpuBackend::Dx12,
        "gl" => WgpuBackend::Gl,
        other => {
            return Err(DeviceError::NoGpu(GpuUnavailable {
                reason: format!(
                    "PIANOFORMER_WGPU_API={other} is not a graphics API: use vulkan, metal, dx12 \
                     or gl"
                ),
                detail: String::new(),
            }));
        }
    })
}

#[cfg(feature = "gpu")]
fn backend_from_setup(device: Device, setup: &burn::tensor::wgpu::WgpuSetup) -> Backend {
    let info = setup.adapter.get_info();
    Backend {
        device,
        info: BackendInfo {
            kind: BackendKind::Gpu,
            api: format!("{:?}", info.backend),
            adapter: info.name.trim().to_string(),
            device_type: format!("{:?}", info.device_type),
            fallback_reason: None,
            fallback_detail: None,
        },
    }
}

/// A tensor's values as f32, read asynchronously: the one reader of the crate (synchronous
/// reads panic on WebGPU in wasm). The error is the backend's, in its words.
pub async fn read<const D: usize>(t: burn::tensor::Tensor<D>) -> Result<Vec<f32>, String> {
    t.into_data_async()
        .await
        .map_err(|e| format!("{e:?}"))?
        .convert::<f32>()
        .try_into_vec::<f32>()
        .map_err(|e| format!("{e:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preferences_parse_and_reject_nonsense() {
        assert_eq!("Auto".parse::<Preference>(), Ok(Preference::Auto));
        assert_eq!("webgpu".parse::<Preference>(), Ok(Preference::Gpu));
        assert_eq!(" cpu ".parse::<Preference>(), Ok(Preference::Cpu));
        let err = "tpu".parse::<Preference>().unwrap_err();
        assert!(err.to_string().contains("auto, gpu or cpu"), "{err}");
    }

    #[test]
    fn labels_say_what_runs() {
        assert_eq!(cpu().info.label(), "CPU");
        let info = BackendInfo {
            kind: BackendKind::Gpu,
            api: "BrowserWebGpu".into(),
            adapter: String::new(),
            device_type: "Cpu".into(),
            fallback_reason: None,
            fallback_detail: None,
        };
        assert!(info.is_browser_webgpu());
        assert_eq!(info.label(), "WebGPU (software adapter)");
    }
}

/// Natively, on a machine whose only adapter is a software renderer (lavapipe, which the setup
/// installs where there is no GPU): `gpu` opens it, `auto` keeps to the CPU and says why.
#[cfg(all(test, feature = "gpu", not(target_arch = "wasm32")))]
mod software_adapter {
    use super::*;

    #[test]
    fn auto_keeps_to_the_cpu_on_a_software_adapter() {
        let Ok(gpu) = pollster::block_on(init(Preference::Gpu)) else {
            crate::note_skipped_test("no native GPU adapter");
            return;
        };
        let auto = pollster::block_on(init(Preference::Auto)).expect("auto never fails");
        if gpu.info.is_software() {
            assert_eq!(auto.info.kind, BackendKind::Cpu, "{:?}", auto.info);
            let reason = auto.info.fallback_reason.unwrap_or_default();
            assert!(reason.contains("software renderer"), "{reason}");
            assert!(reason.contains(&gpu.info.adapter), "{reason}");
        } else {
            assert_eq!(auto.info.kind, BackendKind::Gpu, "{:?}", auto.info);
        }
    }
}

#[cfg(test)]
mod plain_words {
    use super::*;

    #[test]
    fn a_missing_adapter_is_explained_without_jargon() {
        let why = GpuUnavailable::from_runtime(
            "No adapter available for WgpuDevice { kind: DefaultDevice }: No suitable graphics \
             adapter found; webgpu found no adapters"
                .into(),
        );
        assert!(why.reason.starts_with("no GPU adapter"), "{}", why.reason);
        assert!(why.detail.contains("WgpuDevice"));
        let info = BackendInfo::cpu(Some(&why));
        assert_eq!(info.fallback_reason.as_deref(), Some(why.reason.as_str()));
    }
}
