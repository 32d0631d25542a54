//! The properties the papers rely on, checked numerically.

use burn::tensor::{Device, Tensor, TensorData};
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::*;
use crate::model::testing::{close, to_vec};

fn rng() -> StdRng {
    StdRng::seed_from_u64(42)
}

/// Per (head, dim): `A B^T` for A [H, L, D, J], B [H, L', D, J] -> [H, D, L, L'].
fn gram(a: Tensor<4>, b: Tensor<4>) -> Tensor<4> {
    a.permute([0, 2, 1, 3]).matmul(b.permute([0, 2, 3, 1]))
}

/// Sine and SFF codes from Ω and the mix Z: [H, L, D, R].
fn factored_codes(omega: Tensor<5>, mix: Tensor<3>) -> Tensor<4> {
    let [_, h, l, d, j] = omega.dims();
    let r = mix.dims()[2];
    let omega = omega.reshape([h, l, d, j]).permute([0, 2, 1, 3]); // [H, D, L, J]
    let mix = mix.reshape([h, d, j, r]);
    omega.matmul(mix).permute([0, 2, 1, 3])
}

fn rms(a: &[f32], b: &[f32]) -> f64 {
    (a.iter()
        .zip(b)
        .map(|(x, y)| ((x - y) as f64).powi(2))
        .sum::<f64>()
        / a.len() as f64)
        .sqrt()
}

/// The analytic kernel laid out as [H, D, L, L] at lags m − n.
fn toeplitz(kernel: &[f32], heads: usize, dim: usize, len: usize, lags: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(heads * dim * len * len);
    for hd in 0..heads * dim {
        for m in 0..len {
            for n in 0..len {
                let lag = m as i64 - n as i64 + (len as i64 - 1);
                out.push(kernel[hd * lags + lag as usize]);
            }
        }
    }
    out
}

#[test]
fn sine_spe_expectation_is_the_analytic_kernel_and_codes_converge_like_one_over_sqrt_r() {
    let device = Device::flex();
    let (h, d, len) = (2, 3, 12);
    let spe = sine_spe::SineSpe::new(h, d, 5, &mut rng(), &device);
    let (oq, ok) = spe.omegas(0, len, &device);
    // All lags −(len−1)..len−1.
    let lags: Vec<f32> = (-(len as i32 - 1)..len as i32).map(|t| t as f32).collect();
    let analytic = toeplitz(&to_vec(spe.kernel(&lags)), h, d, len, lags.len());
    // E[Qbar Kbar^T] / R = Ω_q Ω_k^T exactly: a function of m − n only.
    let expectation = gram(
        oq.clone().reshape([h, len, d, 10]),
        ok.clone().reshape([h, len, d, 10]),
    );
    assert!(close(&to_vec(expectation), &analytic, 1e-5));
    // Codes: the error shrinks roughly like 1/sqrt(R).
    let err = |r: usize| {
        let mut total = 0.0;
        for seed in 0..4 {
            let mix = spe.draw_mix(r, seed, &device);
            let qbar = factored_codes(oq.clone(), mix.clone());
            let kbar = factored_codes(ok.clone(), mix);
            let emp = gram(qbar, kbar).mul_scalar(1.0 / r as f64);
            total += rms(&to_vec(emp), &analytic);
        }
        total / 4.0
    };
    let (e16, e256, e4096) = (err(16), err(256), err(4096));
    assert!(
        e256 < e16 / 2.5 && e4096 < e256 / 2.5,
        "{e16} {e256} {e4096}"
    );
    assert!(
        e16 / e4096 > 8.0 && e16 / e4096 < 32.0,
        "ratio {} (16 ideally)",
        e16 / e4096
    );
}

#[test]
fn conv_spe_kernel_is_the_filters_cross_correlation_and_vanishes_beyond_them() {
    let device = Device::flex();
    let (h, d, taps, len) = (2, 2, 4, 10);
    let spe = conv_spe::ConvSpe::new(h, d, taps, &mut rng(), &device);
    let kernel = to_vec(spe.kernel(&(0..len).collect::<Vec<_>>()));
    // By hand for head 0, dim 0: Σ_p A[p] B[p + τ].
    let a = to_vec(spe.filter_q.val());
    let b = to_vec(spe.filter_k.val());
    for tau in 0..len {
        let expected: f32 = (0..taps)
            .filter(|p| p + tau < taps)
            .map(|p| a[p] * b[p + tau])
            .sum();
        assert!((kernel[tau] - expected).abs() < 1e-6, "lag {tau}");
        if tau >= taps {
            assert_eq!(kernel[tau], 0.0);
        }
    }
    // Codes converge to it, causal lags only (m ≥ n).
    let err = |r: usize, beyond: bool| {
        let noise = spe.seeded_noise(r, 7, 0, len, &device);
        let (qbar, kbar) = spe.codes(noise);
        let emp = to_vec(gram(qbar, kbar).mul_scalar(1.0 / r as f64));
        let (mut se, mut n) = (0.0, 0);
        for hd in 0..h * d {
            for m in 0..len {
                for k in 0..=m {
                    let tau = m - k;
                    if (tau >= taps) != beyond {
                        continue;
                    }
                    let target = kernel[hd * len + tau];
                    se += ((emp[(hd * len + m) * len + k] - target) as f64).powi(2);
                    n += 1;
                }
            }
        }
        (se / n as f64).sqrt()
    };
    assert!(err(4096, false) < err(64, false) / 4.0);
    assert!(
        err(4096, true) < 0.05,
        "beyond the filters: {}",
        err(4096, true)
    );
}

#[test]
fn conv_codes_of_any_window_match_the_whole_sequence() {
    let device = Device::flex();
    let spe = conv_spe::ConvSpe::new(1, 2, 3, &mut rng(), &device);
    let whole = spe.codes(spe.seeded_noise(4, 9, 0, 8, &device)).0;
    let window = spe.codes(spe.seeded_noise(4, 9, 5, 2, &device)).0;
    assert!(close(
        &to_vec(whole.clone().narrow(1, 5, 2)),
        &to_vec(window),
        1e-6
    ));
    // Through a cache moving one position at a time, as a decoder does.
    let mut cache = conv_spe::NoiseColumns::default();
    for m in 0..8 {
        let one = spe.codes(spe.noise(4, 9, m, 1, &mut cache, &device)).0;
        assert!(
            close(&to_vec(whole.clone().narrow(1, m, 1)), &to_vec(one), 1e-6),
            "{m}"
        );
    }
}

/// A decoder's codes on the CPU, from the filters read once, are the convolution's, position
/// by position, after a jump back (a restart) and with another seed.
#[test]
fn conv_step_codes_on_the_cpu_match_the_convolution() {
    let device = Device::flex();
    let (h, d, taps, r) = (2, 3, 7, 5);
    let spe = conv_spe::ConvSpe::new(h, d, taps, &mut rng(), &device);
    let filters = conv_spe::StepFilters::new(
        &to_vec(spe.filter_q.val()),
        &to_vec(spe.filter_k.val()),
        h * d,
        taps,
    );
    let mut cache = conv_spe::NoiseColumns::default();
    for (seed, m) in [(9, 0), (9, 1), (9, 2), (9, 9), (9, 3), (4, 3), (4, 4)] {
        let (q, k) = spe.codes(spe.seeded_noise(r, seed, m, 1, &device));
        let (sq, sk) = spe.step_codes(&filters, r, seed, m, &mut cache, &device);
        assert_eq!(sq.dims(), q.dims());
        assert!(
            close(&to_vec(q), &to_vec(sq), 1e-5),
            "query, seed {seed}, {m}"
        );
        assert!(
            close(&to_vec(k), &to_vec(sk), 1e-5),
            "key, seed {seed}, {m}"
        );
    }
}

/// Natively, long windows are filtered through FFTs: the same codes and the same filter
/// gradients as the direct convolution, and the same codes as decoding one position at a time.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn conv_codes_through_ffts_match_the_direct_convolution_and_its_gradients() {
    let device = Device::flex().autodiff();
    let (h, d, taps, len, r) = (2, 3, 24, 41, 5); // len + taps − 1 = 64: the FFT has no slack
    assert!(len >= conv_spe::FFT_FROM_LEN);
    let spe = conv_spe::ConvSpe::new(h, d, taps, &mut rng(), &device);
    let noise = spe.seeded_noise(r, 3, 0, len, &device);
    let weights = |seed: u64| {
        let mut rng = StdRng::seed_from_u64(seed);
        let v: Vec<f32> = (0..r * h * d * len)
            .map(|_| crate::model::features::normal(&mut rng) as f32)
            .collect();
        Tensor::<3>::from_data(TensorData::new(v, vec![r, h * d, len]), &device)
    };
    let (wq, wk) = (weights(1), weights(2));
    let run = |(q, k): (Tensor<3>, Tensor<3>)| {
        let values = (to_vec(q.clone()), to_vec(k.clone()));
        let loss = (q * wq.clone()).sum() + (k * wk.clone()).sum();
        let grads = loss.backward();
        let grad = |f: &burn::module::Param<Tensor<3>>| to_vec(f.val().grad(&grads).unwrap());
        (values, grad(&spe.filter_q), grad(&spe.filter_k))
    };
    let (direct, dq, dk) = run(spe.correlate_direct(noise.clone()));
    let (fft, fq, fk) = run(spe.correlate_fft(noise, len));
    assert!(close(&direct.0, &fft.0, 1e-4), "query codes");
    assert!(close(&direct.1, &fft.1, 1e-4), "key codes");
    assert!(close(&dq, &fq, 1e-3), "query filter gradient");
    assert!(close(&dk, &fk, 1e-3), "key filter gradient");
    // The whole window (FFTs) against a decoder's one position at a time (direct).
    let whole = spe.codes(spe.seeded_noise(r, 3, 0, len, &device)).0;
    let mut cache = conv_spe::NoiseColumns::default();
    for m in [0, 17, len - 1] {
        let one = spe.codes(spe.noise(r, 3, m, 1, &mut cache, &device)).0;
        assert!(
            close(&to_vec(whole.clone().narrow(1, m, 1)), &to_vec(one), 1e-4),
            "position {m}"
        );
    }
}

fn coordinates(rows: &[[f32; 2]], device: &Device) -> Tensor<3> {
    let values: Vec<f32> = rows.iter().flatten().copied().collect();
    Tensor::from_data(TensorData::new(values, vec![1, rows.len(), 2]), device)
}

#[test]
fn fstripe_depends_on_labels_not_on_time_and_rff_equals_its_cosine_sum() {
    let device = Device::flex();
    let (h, d, k) = (2, 3, 4);
    let f = fstripe::Fstripe::new(h, d, k, 2, None, &mut rng(), &device);
    // Steps 0 and 3 have equal labels, as have steps 1 and 4.
    let labels = [
        [60.0, 1.0],
        [64.0, 1.0],
        [67.0, 2.0],
        [60.0, 1.0],
        [64.0, 1.0],
    ];
    let (oq, ok) = f.omegas(coordinates(&labels, &device));
    let len = labels.len();
    let p = to_vec(gram(
        oq.clone().reshape([h, len, d, 2 * k]),
        ok.clone().reshape([h, len, d, 2 * k]),
    ));
    let at = |hd: usize, m: usize, n: usize| p[(hd * len + m) * len + n];
    for hd in 0..h * d {
        assert!(
            (at(hd, 1, 0) - at(hd, 4, 3)).abs() < 1e-5,
            "equal labels, equal kernel"
        );
        assert!((at(hd, 3, 0) - at(hd, 0, 0)).abs() < 1e-5);
    }
    // Noise-free: exactly the analytic cosine sum at the label differences.
    let deltas: Vec<[f32; 2]> = (0..len)
        .flat_map(|m| (0..len).map(move |n| (m, n)))
        .map(|(m, n)| [labels[m][0] - labels[n][0], labels[m][1] - labels[n][1]])
        .collect();
    let flat: Vec<f32> = deltas.iter().flatten().copied().collect();
    let analytic = f.kernel(Tensor::from_data(
        TensorData::new(flat, vec![len * len, 2]),
        &device,
    ));
    assert!(close(&p, &to_vec(analytic), 1e-5));
    // SFF's codes converge to it.
    let err = |r: usize| {
        let mix = f.draw_mix(r, 3, &device);
        let qbar = factored_codes(oq.clone(), mix.clone());
        let kbar = factored_codes(ok.clone(), mix);
        rms(&to_vec(gram(qbar, kbar).mul_scalar(1.0 / r as f64)), &p)
    };
    assert!(err(4096) < err(16) / 6.0, "{} {}", err(16), err(4096));
}

/// `qhat·khat` summed the way attention uses it equals `Σ_d q_d k_d P_d(m, n) / sqrt(D)` — in
/// expectation for sine codes (checked with many realizations), exactly for F-StrIPE.
#[test]
fn qk_gives_the_positional_logit() {
    let device = Device::flex();
    let (h, d, len) = (1, 4, 6);
    let q = crate::model::testing::random::<4>(&[1, h, len, d], 1, &device);
    let k = crate::model::testing::random::<4>(&[1, h, len, d], 2, &device);
    let (qv, kv) = (to_vec(q.clone()), to_vec(k.clone()));
    let logit = |p: &dyn Fn(usize, usize, usize) -> f32, m: usize, n: usize| -> f32 {
        (0..d)
            .map(|dd| qv[m * d + dd] * kv[n * d + dd] * p(dd, m, n))
            .sum::<f32>()
            / (d as f32).sqrt()
    };
    // F-StrIPE (RFF), exact.
    let mut config = PeConfig::new(PeKind::Fstripe).with_levels(&[StructureLevel::Melody]);
    config.sines = 3;
    let pe = PositionalEncoding::new(&config, 1, h, d, &mut rng(), &device);
    let labels: Vec<f32> = vec![60.0, 62.0, 64.0, 60.0, 62.0, 67.0];
    let span = Span {
        start: 0,
        len,
        labels: Some(Tensor::from_data(
            TensorData::new(labels.clone(), vec![1, len, 1]),
            &device,
        )),
    };
    let draw = pe.draw(0, &device);
    let codes = pe.codes(&span, &mut draw.clone(), &device).unwrap();
    let (qh, kh) = pe.qk(0, q.clone(), k.clone(), &codes, &draw);
    let dots = to_vec(qh.matmul(kh.swap_dims(2, 3)));
    let Some(Kernel::Fstripe(f)) = &pe.kernel else {
        panic!("an F-StrIPE kernel")
    };
    let deltas: Vec<f32> = (0..len)
        .flat_map(|m| (0..len).map(|n| labels[m] - labels[n]).collect::<Vec<_>>())
        .collect();
    let kern = to_vec(f.kernel(Tensor::from_data(
        TensorData::new(deltas, vec![len * len, 1]),
        &device,
    )));
    let p = |dd: usize, m: usize, n: usize| kern[dd * len * len + m * len + n];
    for m in 0..len {
        for n in 0..len {
            assert!(
                (dots[m * len + n] - logit(&p, m, n)).abs() < 1e-4,
                "{m} {n}"
            );
        }
    }
    // sineSPE with many realizations: close to the expectation.
    let mut config = PeConfig::new(PeKind::SineSpe);
    config.realizations = 16384;
    let pe = PositionalEncoding::new(&config, 1, h, d, &mut rng(), &device);
    let draw = pe.draw(5, &device);
    let codes = pe
        .codes(&Span::positions(0, len), &mut draw.clone(), &device)
        .unwrap();
    let (qh, kh) = pe.qk(0, q, k, &codes, &draw);
    // Undo the feature map temperature R^{-1/4} on each side: the logit is qhat·khat·sqrt(R)/sqrt(R).
    let dots = to_vec(qh.matmul(kh.swap_dims(2, 3)));
    let lags: Vec<f32> = (-(len as i32 - 1)..len as i32).map(|t| t as f32).collect();
    let Some(Kernel::SineSpe(sine)) = &pe.kernel else {
        panic!("a sineSPE kernel")
    };
    let kern = to_vec(sine.kernel(&lags));
    let p = |dd: usize, m: usize, n: usize| kern[dd * lags.len() + (m + len - 1 - n)];
    let mut worst = 0f32;
    for m in 0..len {
        for n in 0..len {
            worst = worst.max((dots[m * len + n] - logit(&p, m, n)).abs());
        }
    }
    assert!(worst < 0.05, "{worst}");
}

#[test]
fn an_open_gate_removes_the_positional_dependence() {
    let device = Device::flex();
    let (h, d, len) = (1, 3, 5);
    for kind in [PeKind::SineSpe, PeKind::ConvSpe] {
        let mut config = PeConfig::new(kind).with_gate(true);
        config.taps = 3;
        config.realizations = 8;
        let mut pe = PositionalEncoding::new(&config, 2, h, d, &mut rng(), &device);
        pe.gates[1] = Param::from_data(TensorData::new(vec![40f32; h * d], vec![h, d]), &device);
        let draw = pe.draw(1, &device);
        let codes = pe
            .codes(&Span::positions(3, len), &mut draw.clone(), &device)
            .unwrap();
        // The same query at every position.
        let q = crate::model::testing::random::<4>(&[1, h, 1, d], 4, &device).repeat_dim(2, len);
        let (open, _) = pe.qk(1, q.clone(), q.clone(), &codes, &draw);
        let rows = to_vec(open);
        let r = rows.len() / len;
        for m in 1..len {
            assert!(
                close(&rows[m * r..(m + 1) * r], &rows[..r], 1e-5),
                "{kind:?} position {m}"
            );
        }
        // Layer 0's gate is not open: positions differ.
        let (closed, _) = pe.qk(0, q.clone(), q, &codes, &draw);
        let rows = to_vec(closed);
        assert!(!close(&rows[r..2 * r], &rows[..r], 1e-3), "{kind:?}");
        // The template with an open gate is the constant 1.
        let t = to_vec(pe.templates(1, &[0, 1, 7]).unwrap());
        assert!(t.iter().all(|v| (v - 1.0).abs() < 1e-5), "{t:?}");
    }
}
