//! The ablations on tiny models: each takes away only what it names.

use burn::tensor::Device;
use pollster::block_on;
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::{Ablations, uniform_attention};
use crate::data::corpus::{Batch, WindowSpec};
use crate::data::example::random_example;
use crate::model::config::{Conditioning, PerformerConfig, Task};
use crate::model::pe::{PeConfig, PeKind, StructureLevel};
use crate::model::performer::Performer;
use crate::train::step::Trainer;
use crate::train::tests::song;

/// Each ablation takes away only what it names: an F-StrIPE model's loss moves when its
/// attention is made uniform, when its labels are held at zero and when they come from another
/// song (even untrained, it reads them); the lanes as inputs count as labels too; a model
/// that reads no labels reports no label ablation, and its loss as trained is the validation
/// loss training reports.
#[test]
fn the_ablations_take_away_only_what_they_name() {
    let device = Device::flex();
    let windows = |config: &PerformerConfig| -> Vec<_> {
        let spec = WindowSpec {
            len: 32,
            max_shift: 0,
            ..WindowSpec::for_model(config, 32)
        };
        [song(0, 4), song(6, 4), song(3, 4)]
            .iter()
            .map(|(_, rolls, labels)| {
                random_example(rolls, labels, &spec, &[0], &mut StdRng::seed_from_u64(0))
            })
            .collect()
    };
    let moved = |a: f64, b: f64| (a - b).abs() > 1e-6 * b;
    let kernel = PeConfig::new(PeKind::Fstripe).with_levels(&[StructureLevel::Chord]);
    let lanes = PerformerConfig::tiny(Task::Accompaniment, 0, PeConfig::new(PeKind::SineSpe))
        .with_inputs(Some(Conditioning::AUTOREGRESSIVE));
    for config in [PerformerConfig::tiny(Task::Accompaniment, 0, kernel), lanes] {
        let examples = windows(&config);
        assert_ne!(examples[0].inputs, examples[1].inputs);
        let model = Performer::new(&config, 3, &device).unwrap();
        let a = block_on(Ablations::measure(&model, &examples, 2, 11)).unwrap();
        let (zero, other) = (a.labels_zero.unwrap(), a.labels_other.unwrap());
        assert!(
            moved(zero, a.loss) && moved(other, a.loss) && moved(other, zero),
            "{a:?}"
        );
        assert!(moved(a.uniform_attention, a.loss), "{a:?}");
    }
    let nope = PerformerConfig::tiny(Task::Accompaniment, 0, PeConfig::new(PeKind::None));
    let model = Performer::new(&nope, 3, &device).unwrap();
    let examples = windows(&nope);
    let a = block_on(Ablations::measure(&model, &examples, 2, 11)).unwrap();
    assert_eq!((a.labels_zero, a.labels_other), (None, None));
    let trainer = Trainer::for_evaluation(model.clone(), 11);
    let whole = block_on(trainer.evaluate(&Batch::Rolls(examples.clone()))).unwrap();
    assert!(
        (a.loss - whole as f64).abs() <= 1e-5 * a.loss,
        "{a:?} {whole}"
    );
    // Uniform attention: every query and key projection is zero, the rest untouched.
    let uniform = uniform_attention(&model);
    for (u, b) in uniform.blocks.iter().zip(&model.blocks) {
        let max = |t: burn::tensor::Tensor<2>| t.abs().max().into_scalar::<f32>();
        assert_eq!(max(u.wq.weight.val()), 0.0);
        assert_eq!(max(u.wk.weight.val()), 0.0);
        assert_eq!(max(u.wv.weight.val() - b.wv.weight.val()), 0.0);
    }
}
