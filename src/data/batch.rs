//! Examples (or token windows) of one length stacked into the tensors a batch is made of.

use burn::tensor::{Device, Int, Tensor, TensorData};

use super::example::Example;

/// Stacks examples (all of one length) into inputs [batch, len, 512], targets
/// [batch, len, 256] and coordinates [batch, len, c] (`None` when there are none).
pub fn stack(examples: &[Example], device: &Device) -> (Tensor<3>, Tensor<3>, Option<Tensor<3>>) {
    let b = examples.len();
    let len = examples.first().map_or(0, |e| e.len);
    let cat = |f: fn(&Example) -> &Vec<f32>| -> Vec<f32> {
        examples.iter().flat_map(|e| f(e).iter().copied()).collect()
    };
    let inputs = cat(|e| &e.inputs);
    let targets = cat(|e| &e.targets);
    let coords = cat(|e| &e.coordinates);
    let width = |v: &Vec<f32>| v.len() / (b * len).max(1);
    let tensor = |v: Vec<f32>| {
        let w = width(&v);
        Tensor::<3>::from_data(TensorData::new(v, vec![b, len, w]), device)
    };
    let coords = (!coords.is_empty()).then(|| tensor(coords));
    (tensor(inputs), tensor(targets), coords)
}

/// Token windows of `len + 1` ids as inputs [batch, len] and targets [batch, len, 1].
pub fn stack_tokens(windows: &[Vec<u32>], device: &Device) -> (Tensor<2, Int>, Tensor<3, Int>) {
    let b = windows.len();
    let len = windows.first().map_or(1, |w| w.len()) - 1;
    let ids = |range: fn(&Vec<u32>) -> &[u32]| -> Vec<i64> {
        windows
            .iter()
            .flat_map(|w| range(w).iter().map(|&t| t as i64))
            .collect()
    };
    let inputs = ids(|w| &w[..w.len() - 1]);
    let targets = ids(|w| &w[1..]);
    (
        Tensor::from_data(TensorData::new(inputs, vec![b, len]), device),
        Tensor::from_data(TensorData::new(targets, vec![b, len, 1]), device),
    )
}

/// Token windows' structure coordinates (one flat `[len, c]` per window) as [batch, len, c],
/// for inputs shaped `[batch, len]`; `None` when there are none.
pub fn stack_coordinates(
    coordinates: &[Vec<f32>],
    [batch, len]: [usize; 2],
    device: &Device,
) -> Option<Tensor<3>> {
    if coordinates.len() != batch || batch == 0 || len == 0 {
        return None;
    }
    let flat: Vec<f32> = coordinates.concat();
    let width = flat.len() / (batch * len);
    Some(Tensor::from_data(
        TensorData::new(flat, vec![batch, len, width]),
        device,
    ))
}
