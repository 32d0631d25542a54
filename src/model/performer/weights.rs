//! A Performer's weights as bytes and back: Burn's burnpack record, written synchronously
//! (native) or reading every parameter asynchronously (WebGPU in the browser).

use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::store::ModuleRecord;
use burn::tensor::{Bytes, Device, Tensor};

use super::{ModelError, Performer};
use crate::model::config::PerformerConfig;
use crate::model::pe::Kernel;

impl Performer {
    /// This trained model reading `config`'s inputs: the same architecture, with more inputs
    /// per step appended after the ones it was trained on (an accompaniment given the
    /// reference lane). The new inputs' weights start at zero, so until training moves them
    /// it plays as before.
    pub fn with_more_inputs(self, config: &PerformerConfig) -> Result<Self, ModelError> {
        let old = &self.config;
        let same = PerformerConfig {
            input_dim: old.input_dim,
            conditioning: old.conditioning,
            ..config.clone()
        };
        if same != *old || config.input_dim < old.input_dim {
            return Err(ModelError::Config(format!(
                "only inputs can be added to a trained model: it reads {} values a step and \
                 would read {}, and nothing else may change",
                old.input_dim, config.input_dim
            )));
        }
        let Some(mut input) = self.input else {
            return Err(ModelError::Config(
                "this model reads tokens, not rows of inputs: none can be added".into(),
            ));
        };
        let extra = config.input_dim - old.input_dim;
        input.weight = input.weight.map(|w| {
            let [_, d_model] = w.dims();
            let zeros = Tensor::<2>::zeros([extra, d_model], &w.device());
            // A leaf of its own (the old weight's graph is not the new one's), trainable.
            let trains = w.is_autodiff();
            let wide = Tensor::cat(vec![w, zeros], 0).detach();
            if trains { wide.require_grad() } else { wide }
        });
        Ok(Self {
            input: Some(input),
            config: config.clone(),
            ..self
        })
    }

    /// The weights as bytes (Burn's burnpack record). Reads every parameter synchronously:
    /// on WebGPU in the browser, move the model to the CPU first.
    pub fn to_bytes(self) -> Result<Vec<u8>, ModelError> {
        let bytes = self
            .into_record()
            .into_bytes()
            .map_err(|e| ModelError::Weights(e.to_string()))?;
        Ok(bytes.to_vec())
    }

    /// The same bytes as [`Self::to_bytes`], every parameter read asynchronously: what the
    /// browser needs on WebGPU, where Burn's record reads synchronously and panics.
    pub async fn to_bytes_async(&self) -> Result<Vec<u8>, ModelError> {
        let mut params = ParamCollector::default();
        self.visit(&mut params);
        let mut tensors = Vec::with_capacity(params.found.len());
        for (path, id, shape, tensor) in params.found {
            let data = tensor
                .into_data_async()
                .await
                .map_err(|e| ModelError::Weights(format!("{path} could not be read: {e:?}")))?;
            let (bytes, _, dtype) = data.into_parts();
            tensors.push(burn_pack::Tensor::new(
                path,
                dtype,
                shape,
                Some(id.val()),
                bytes,
            ));
        }
        let bytes = burn_pack::Writer::new(tensors)
            .into_bytes()
            .map_err(|e| ModelError::Weights(e.to_string()))?;
        Ok(bytes.to_vec())
    }

    /// A model of `config` with the weights in `bytes` (from [`Self::to_bytes`]).
    pub fn from_bytes(
        config: &PerformerConfig,
        bytes: &[u8],
        device: &Device,
    ) -> Result<Self, ModelError> {
        let failed = |e: String| ModelError::Weights(e);
        let bytes = match renamed(config, bytes).map_err(|e| failed(e.to_string()))? {
            Some(renamed) => renamed,
            None => bytes.to_vec(),
        };
        let record = ModuleRecord::from_bytes(Bytes::from_bytes_vec(bytes))
            .map_err(|e| failed(e.to_string()))?;
        Self::build(config, 0, false, device)?
            .try_load_record(record)
            .map_err(|e| ModelError::Weights(e.to_string()))
    }
}

/// Where weights saved before the encodings became one family (every model shipped before
/// December 2026, and fine-tuned copies of them) kept the encoding's parameters: `pe.sine.*`,
/// `pe.conv.*` and `pe.fstripe.*`, now `pe.kernel.<Kind>.*` ([`crate::model::pe::Kernel`]).
const LEGACY: [&str; 3] = ["pe.sine.", "pe.conv.", "pe.fstripe."];

/// `bytes` with the legacy paths of the encoding's parameters renamed, or `None` when
/// there are none to rename.
fn renamed(config: &PerformerConfig, bytes: &[u8]) -> Result<Option<Vec<u8>>, burn_pack::Error> {
    let Some(variant) = Kernel::variant(config.pe.kind) else {
        return Ok(None);
    };
    let reader = burn_pack::Reader::from_bytes(Bytes::from_bytes_vec(bytes.to_vec()))?;
    let legacy = |name: &str| LEGACY.iter().find(|l| name.starts_with(**l)).copied();
    if !reader.tensor_names().iter().any(|n| legacy(n).is_some()) {
        return Ok(None);
    }
    let mut tensors = Vec::new();
    for t in reader.into_tensors()? {
        let (path, dtype, shape, id, data) = t.into_parts()?;
        let path = match legacy(&path) {
            Some(old) => format!("pe.kernel.{variant}.{}", &path[old.len()..]),
            None => path,
        };
        tensors.push(burn_pack::Tensor::new(path, dtype, shape, id, data));
    }
    Ok(Some(burn_pack::Writer::new(tensors).into_bytes()?.to_vec()))
}

/// Every parameter of a module as (path, id, tensor), in visiting order and named as Burn's
/// record names them (the `on_save` form), without reading any.
#[derive(Default)]
struct ParamCollector {
    path: Vec<String>,
    found: Vec<(String, ParamId, Vec<usize>, Tensor<1>)>,
}

impl ModuleVisitor for ParamCollector {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let tensor = param.transform_for_save().val();
        let shape = tensor.dims().to_vec();
        // Flattened to keep tensors of every rank in one list; the shape goes beside it.
        self.found.push((
            self.path.join("."),
            param.id,
            shape,
            tensor.flatten::<1>(0, D - 1),
        ));
    }
}
