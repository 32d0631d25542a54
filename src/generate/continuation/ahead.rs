//! Continuation tokens run ahead on the GPU (issue 35): [`Ahead`] feeds the music's tokens to
//! the fused steps (`FusedSteps::run_tokens`), which sample the next tokens themselves, so a
//! chunk of up to 16 tokens costs 16 dispatches and one read-back instead of about 350
//! dispatches and two read-backs a token. The host stays the authority: it draws every token
//! as before, from the logits read back, with the same sampler and uniforms; while its tokens
//! are the ones the GPU drew, the chunk's next steps stand, and at the first token it writes
//! otherwise (a planned chord, an echo, a bar the plan bans chords in) the rest are dropped and
//! the next chunk starts from the sums the kept steps left. So the music is the same as
//! without it; only the count of read-backs depends on how often the GPU guessed right.

use std::cell::Cell;
use std::collections::VecDeque;

use burn::tensor::Device;

use crate::generate::fused::{CHUNK, Drawn, FusedSteps, Steps};
use crate::generate::sample::{Sampling, log_softmax_values};
use crate::generate::{GenerateError, Watch, read_f32};
use crate::model::performer::{Performer, State, captured_row};
use crate::music::tokens::Grammar;

/// What the fused continuation steps did on this thread since [`take_stats`] last ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AheadStats {
    /// Chunks run, each one read-back.
    pub chunks: usize,
    /// Steps run on the GPU, kept or not.
    pub steps: usize,
    /// Tokens fed (every step that stood).
    pub fed: usize,
    /// Tokens the host wrote otherwise than the GPU drew.
    pub misses: usize,
}

thread_local! {
    static STATS: Cell<AheadStats> = Cell::new(AheadStats::default());
}

/// The counts since the last call (this thread's), and zero again.
pub fn take_stats() -> AheadStats {
    STATS.with(|s| s.replace(AheadStats::default()))
}

fn count(f: impl FnOnce(&mut AheadStats)) {
    STATS.with(|s| {
        let mut v = s.get();
        f(&mut v);
        s.set(v);
    });
}

/// A step of the last chunk not yet reached: the token it read (the GPU's draw before it), the
/// log-probabilities after it and its watched features.
struct Guess {
    input: u32,
    logits: Vec<f32>,
    features: Vec<f32>,
}

/// Where the music stands when a token is fed.
pub(super) struct Next<'a> {
    /// The grammar after the token.
    pub grammar: &'a Grammar,
    pub may_end: bool,
    /// The index of the draw after the token (the tokens written so far).
    pub index: usize,
    /// Steps that can still be used before the continuation stops or starts again.
    pub most: usize,
}

pub(super) struct Ahead {
    fused: FusedSteps,
    guesses: VecDeque<Guess>,
    /// Steps of the last chunk that stood.
    kept: usize,
    watch: Option<Watch>,
    /// The watched head's keys so far, m floats each.
    keys: Vec<f32>,
    vocab: usize,
}

impl Ahead {
    /// The fused steps for `model` from `state` (a prefill's), or `None` where they do not
    /// apply (another device, F-StrIPE, APE, …: see `FusedSteps::prepare`).
    pub async fn prepare(
        model: &Performer,
        state: &State,
        watch: Option<Watch>,
        device: &Device,
    ) -> Result<Option<Self>, GenerateError> {
        if !crate::generate::fused::enabled() {
            return Ok(None);
        }
        let Some(fused) = FusedSteps::prepare(model, state, Steps::Tokens, device).await? else {
            return Ok(None);
        };
        let mut ahead = Self {
            fused,
            guesses: VecDeque::new(),
            kept: 0,
            watch,
            keys: Vec::new(),
            vocab: model.config.output_dim,
        };
        ahead.read_keys(state, device).await?;
        Ok(Some(ahead))
    }

    async fn read_keys(&mut self, state: &State, device: &Device) -> Result<(), GenerateError> {
        self.keys.clear();
        if let Some(w) = self.watch
            && let Some(k) = state.captured_keys(w.layer, self.fused.features(), device)
        {
            self.keys = read_f32(k.narrow(0, 0, 1).narrow(1, w.head, 1)).await?;
        }
        Ok(())
    }

    /// Starts again from `state` (a continuation that read its view afresh).
    pub async fn reload(&mut self, state: &State, device: &Device) -> Result<(), GenerateError> {
        self.guesses.clear();
        self.kept = 0;
        self.fused.reload(state)?;
        self.read_keys(state, device).await
    }

    /// Feeds `id`, the music's newest token, at `state`'s position (which it advances by one),
    /// and returns the log-probabilities after it, with the watched head's attention row over
    /// every key so far when watching.
    pub async fn feed(
        &mut self,
        id: u32,
        next: Next<'_>,
        sampling: &Sampling,
        state: &mut State,
    ) -> Result<(Vec<f32>, Option<Vec<f32>>), GenerateError> {
        let guess = match self.guesses.pop_front() {
            Some(g) if g.input == id => {
                self.kept += 1;
                state.position += 1;
                g
            }
            missed => {
                if missed.is_some() {
                    count(|s| s.misses += 1);
                }
                self.guesses.clear();
                self.fused.keep(self.kept);
                let n = next.most.clamp(1, CHUNK);
                let position = state.position;
                let watch = self.watch.map(|w| (w.layer, w.head));
                let out = self
                    .fused
                    .run_tokens(
                        n,
                        id,
                        next.grammar.packed(),
                        next.may_end,
                        next.index,
                        sampling,
                        watch,
                        state,
                    )
                    .await?;
                state.position = position + 1;
                count(|s| {
                    s.chunks += 1;
                    s.steps += n;
                });
                let per = self.fused.step_out();
                let (at, m) = (self.fused.features_at(), self.fused.features());
                let mut input = id;
                for step in out.chunks_exact(per) {
                    self.guesses.push_back(Guess {
                        input,
                        logits: log_softmax_values(&step[..self.vocab]),
                        features: step[at..at + 2 * m].to_vec(),
                    });
                    input = Drawn::of(step, self.vocab).token;
                }
                self.kept = 1;
                self.guesses.pop_front().expect("n ≥ 1 steps")
            }
        };
        count(|s| s.fed += 1);
        let row = self.watch.map(|_| {
            let (phi_q, phi_k) = guess.features.split_at(guess.features.len() / 2);
            let mut row = Vec::new();
            captured_row(&mut self.keys, phi_k, phi_q, &mut row);
            row
        });
        Ok((guess.logits, row))
    }
}
