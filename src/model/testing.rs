//! Helpers for the model's native unit tests: seeded inputs and synchronous reads (fine on the
//! CPU backend; browser tests read asynchronously).

use burn::tensor::{Device, Tensor, TensorData};
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::features::normal;

/// Standard normal values of `shape` from `seed`.
pub fn random<const D: usize>(shape: &[usize], seed: u64, device: &Device) -> Tensor<D> {
    let mut rng = StdRng::seed_from_u64(seed);
    let n = shape.iter().product();
    let values: Vec<f32> = (0..n).map(|_| normal(&mut rng) as f32).collect();
    Tensor::from_data(TensorData::new(values, shape.to_vec()), device)
}

pub fn to_vec<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().expect("f32 tensor")
}

/// Same length and every element within `tol` (absolute, or relative for large values).
pub fn close(a: &[f32], b: &[f32], tol: f32) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= tol * (1.0 + y.abs()))
}
