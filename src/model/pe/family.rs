//! The family of relative encodings (the SPE family): what each one provides ([`Relative`],
//! and [`PlainKernel`] for decoding on plain numbers), and the one table that lists every
//! encoding a config can name (`family!`, invoked in `pe/mod.rs`).
//!
//! Adding an encoding is one file that implements [`Relative`] (its parameters as a Burn
//! module, its draw, its codes, its templates and its plain form) and one row of the table:
//!
//! ```text
//! family! {
//!     ...
//!     MySpe = "my_spe" => my_spe::MySpe;
//! }
//! ```
//!
//! The row names the config's kind (`"pe": {"kind": "my_spe"}`), and the table derives
//! [`super::PeKind`] and [`super::Kernel`] (a Burn module enum, one variant per encoding that
//! has parameters) from it; everything else (the Performer, the plain-slice decoders, the
//! checks, the page's attention panel) reaches the encoding through these two traits.

use std::sync::Arc;

use burn::tensor::{Device, Tensor};
use rand::rngs::StdRng;

use super::{Codes, Draw, PeConfig, Span};
use crate::model::ModelError;

/// One relative encoding: its learnt parameters (a Burn module) and what it makes of them.
pub trait Relative {
    /// Fresh parameters for `heads` heads of `dim` query/key dimensions.
    fn new(config: &PeConfig, heads: usize, dim: usize, rng: &mut StdRng, device: &Device) -> Self
    where
        Self: Sized;

    /// Whether `config` can build this encoding, in words if not (checked with the rest of
    /// a model's config).
    fn check(_config: &PeConfig) -> Result<(), String>
    where
        Self: Sized,
    {
        Ok(())
    }

    /// Whether it reads structure labels for every position (F-StrIPE).
    fn reads_labels() -> bool
    where
        Self: Sized,
    {
        false
    }

    /// The sequence's shared mixing draw `Z` [heads, dim · J, R], for encodings whose codes
    /// are `Ω Z` (drawn once per sequence, like the gates' noise).
    fn mix(&self, _config: &PeConfig, _seed: u64, _device: &Device) -> Option<Tensor<3>> {
        None
    }

    /// The codes of `span`, shared by every layer.
    fn codes(
        &self,
        config: &PeConfig,
        span: &Span,
        draw: &mut Draw,
        device: &Device,
    ) -> Result<Codes, ModelError>;

    /// The dimension per head of what the feature map reads (queries and keys through the
    /// codes): R for noisy codes.
    fn qk_dim(&self, config: &PeConfig, _dim: usize) -> usize {
        config.realizations
    }

    /// The positional templates `P_d(τ)` at lags `τ ≥ 0` [heads, dim, lags], for encodings
    /// whose kernel is a function of the lag; `None` for the others.
    fn templates(&self, _lags: &[usize]) -> Option<Tensor<3>> {
        None
    }

    /// The tensors its plain form reads, flattened (read once per generation, on any device).
    fn plain_tensors(&self) -> Vec<Tensor<1>>;

    /// The plain form, from the values of [`Self::plain_tensors`] in the same order.
    fn plain(
        &self,
        config: &PeConfig,
        values: Vec<Vec<f32>>,
    ) -> Result<Arc<dyn PlainKernel>, String>;

    /// Whether decoding one position a step through tensors should take its codes from the
    /// plain form (convSPE: a window of noise filtered per step costs far more than the CPU's
    /// few multiply-adds).
    fn plain_steps(&self) -> bool {
        false
    }
}

/// An encoding's codes as plain numbers, for the decoders that run on `Vec<f32>`.
pub trait PlainKernel: Send + Sync + std::fmt::Debug {
    /// The codes of one position (`labels`: its structure coordinates, for F-StrIPE).
    fn step(&self, position: usize, labels: Option<&[f32]>, draw: &mut Draw) -> PlainCodes;

    /// The codes of positions `start..start + len` (`labels` [len · coordinates]),
    /// position-major; `None` where a call of many positions takes the tensor form.
    fn call(&self, _start: usize, _len: usize, _labels: Option<&[f32]>) -> Option<PlainCodes> {
        None
    }
}

/// Plain codes of `len` positions, position-major.
#[derive(Clone, Debug, PartialEq)]
pub enum PlainCodes {
    /// Ω of queries and keys [len, heads · dim, J] of codes `Ω Z` (through the draw's mix),
    /// and J.
    Factored(Vec<f32>, Vec<f32>, usize),
    /// Explicit codes `Qbar`, `Kbar` [len, heads · dim, R].
    Bars(Vec<f32>, Vec<f32>),
    /// Noise-free features Ω [len, heads · dim, J], concatenated over dimensions, and J.
    Exact(Vec<f32>, Vec<f32>, usize),
}

/// The table of encodings: `Kind = "config name" [=> file::Module];` per row. Derives
/// [`super::PeKind`] (every kind, in the reports' order) and [`super::Kernel`] (the learnt
/// part of those that have one, one variant each, named as the kind).
macro_rules! family {
    ($( $(#[$doc:meta])* $kind:ident = $name:literal $(=> $ty:ty)? ;)*) => {
        /// Every positional encoding a model config can name.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
        pub enum PeKind {
            $( $(#[$doc])* #[serde(rename = $name)] $kind, )*
        }

        impl PeKind {
            /// Every encoding, in the order the reports list them.
            pub const ALL: &'static [PeKind] = &[$(PeKind::$kind),*];

            /// The name a config and the CLI use.
            pub fn name(self) -> &'static str {
                match self {
                    $( PeKind::$kind => $name, )*
                }
            }
        }

        /// The learnt part of a relative encoding: one variant per encoding of the table that
        /// has one, holding its file's module.
        #[derive(Module, Debug)]
        pub enum Kernel {
            $( $( $kind($ty), )? )*
        }

        impl Kernel {
            /// Fresh parameters for `config`'s kind, `None` for kinds without a kernel.
            fn new(
                config: &PeConfig,
                heads: usize,
                dim: usize,
                rng: &mut StdRng,
                device: &Device,
            ) -> Option<Self> {
                match config.kind {
                    $( $( PeKind::$kind => Some(Kernel::$kind(
                        <$ty as Relative>::new(config, heads, dim, rng, device),
                    )), )? )*
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }

            /// Whether `config` can build its kind's kernel, in words if not.
            pub fn check(config: &PeConfig) -> Result<(), String> {
                match config.kind {
                    $( $( PeKind::$kind => <$ty as Relative>::check(config), )? )*
                    #[allow(unreachable_patterns)]
                    _ => Ok(()),
                }
            }

            /// Whether `kind` reads structure labels for every position.
            pub fn reads_labels(kind: PeKind) -> bool {
                match kind {
                    $( $( PeKind::$kind => <$ty as Relative>::reads_labels(), )? )*
                    #[allow(unreachable_patterns)]
                    _ => false,
                }
            }

            /// The encoding behind the variant.
            pub fn relative(&self) -> &dyn Relative {
                match self {
                    $( $( Kernel::$kind(k) => { let k: &$ty = k; k } )? )*
                }
            }

            /// The variant's name, as its parameters' record paths hold it.
            pub fn variant(kind: PeKind) -> Option<&'static str> {
                match kind {
                    $( $( PeKind::$kind => { let _: Option<$ty> = None; Some(stringify!($kind)) } )? )*
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }
        }
    };
}
