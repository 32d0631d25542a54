//! The native command line: `check` (the compute backend), `inspect` (a MIDI file), `train`,
//! `eval`, `report`, `generate` (every task of the studio's table), `ship`, `dynamics` (the
//! velocity model), `pedal` (the learnt sustain pedal), `textures` (the gallery) and `bench`. Each command lives in its own file;
//! errors reach the user as one plain sentence.

// Thin: parse, call the library, print (the threshold, 80 lines, is in clippy.toml).
#![warn(clippy::too_many_lines)]

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    cli::main()
}

/// Writes `text` to stdout. A reader that went away (`pianoformer inspect x.mid | head`) is
/// not an error; anything else is, in words.
#[cfg(not(target_arch = "wasm32"))]
fn print_stdout(text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(format!("cannot write the output: {e}"))
        }
        _ => Ok(()),
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod bench;
#[cfg(not(target_arch = "wasm32"))]
mod check;
#[cfg(not(target_arch = "wasm32"))]
mod dynamics;
#[cfg(not(target_arch = "wasm32"))]
mod eval;
#[cfg(not(target_arch = "wasm32"))]
mod generate;
#[cfg(not(target_arch = "wasm32"))]
mod inspect;
#[cfg(not(target_arch = "wasm32"))]
mod models;
#[cfg(not(target_arch = "wasm32"))]
mod pedal;
#[cfg(not(target_arch = "wasm32"))]
mod ship;
#[cfg(not(target_arch = "wasm32"))]
mod textures;
#[cfg(not(target_arch = "wasm32"))]
mod train;

#[cfg(not(target_arch = "wasm32"))]
mod cli {
    use std::path::PathBuf;
    use std::process::ExitCode;

    use clap::{Parser, Subcommand};

    #[derive(Parser)]
    #[command(
        name = "pianoformer",
        version,
        about = "Structure-aware Transformers for music"
    )]
    struct Cli {
        #[command(subcommand)]
        command: Command,
    }

    #[derive(Subcommand)]
    enum Command {
        /// Check a compute backend: ops against the CPU reference and a few Adam steps.
        Check {
            /// auto (GPU if available, else CPU), gpu, or cpu.
            #[arg(long, default_value = "auto")]
            backend: String,
            /// Print the report as JSON instead of text.
            #[arg(long)]
            json: bool,
        },
        /// Measure speed (benchmarks, not tests). `decode`: ms per generated token at several
        /// positions, recurrent Performer against softmax with a KV cache. `train`: ms per
        /// training step of the small accompaniment preset. `tune`: ms per fine-tuning step of
        /// the shipped default model with the page's defaults, and peak memory. `attention`:
        /// causal linear attention alone, the fused WGSL kernel against the generic ops (GPU).
        /// `harmonize`: the shipped harmonizer on a melody, stage by stage (as "Suggest chords").
        /// `accompany`: ms per step of the step-by-step accompaniment, on wgpu through tensor
        /// ops and fused (one dispatch and one read-back per 16 steps). `continue`: ms per
        /// continuation token, on wgpu through tensor ops and fused (a dispatch a token, the
        /// next drawn on the GPU, up to 16 a read-back). `map`: the attention map redrawn by
        /// one teacher-forced pass against the generation that drew it.
        Bench {
            /// What to measure: decode, train, tune, attention, harmonize, accompany, continue or map.
            what: String,
            /// Positions at which to time decoding (default 512,2048,8192), sequence lengths for
            /// `attention` (the same), or lengths in bars for `harmonize` (25,100,400) and
            /// `accompany` (1,4), new tokens for `continue` (32,96), bars for `map` (16,64).
            #[arg(long, value_delimiter = ',')]
            positions: Vec<usize>,
            /// Tokens timed at each position (the median is reported).
            #[arg(long, default_value_t = 32)]
            steps: usize,
            /// cpu, gpu or auto.
            #[arg(long, default_value = "cpu")]
            backend: String,
            #[arg(long)]
            json: bool,
            /// train: steps per window (256 = 16 bars of 4/4 at 4 steps a beat).
            #[arg(long, default_value_t = 256)]
            window: usize,
            /// train: windows per batch; accompany: alternatives written together (1: none).
            #[arg(long, default_value_t = 8)]
            batch: usize,
            /// harmonize: the harmonizer timed (a shipped model's name or a training run's
            /// folder).
            #[arg(long, default_value = "default")]
            model: String,
        },
        /// Train a model on POP909, a folder of MIDI files or one file: progress bar,
        /// checkpoints, --resume, and a JSONL log in the output folder.
        Train(crate::train::Args),
        /// Score a training run on POP909's held-out songs (writes eval.json into the run).
        Eval(crate::eval::Args),
        /// Gather evaluated runs into a Markdown table (and an SVG plot for continuation).
        Report {
            /// Run folders; runs named `NAME-seedK` are averaged as one row.
            runs: Vec<PathBuf>,
            /// Continuation: write the loss-per-position plot here.
            #[arg(long)]
            svg: Option<PathBuf>,
            /// Continuation runs scored by `eval --sample`: write the style-by-quarter plot here.
            #[arg(long)]
            style_svg: Option<PathBuf>,
        },
        /// Make music from a MIDI prompt: a piano accompaniment for its melody, or a
        /// continuation.
        Generate(crate::generate::Args),
        /// Copy a trained, evaluated run into www/models/ and its manifest.
        Ship(crate::ship::Args),
        /// Fit the velocity model on POP909's pianists, choose its spread on validation,
        /// score it on the test songs and ship it (www/models/dynamics.json and the manifest).
        Dynamics(crate::dynamics::Args),
        /// Fit the sustain pedal on POP909's pianists, choose its thresholds on validation,
        /// score it on the test songs against the pianists and the chord-change rule, and ship
        /// it (www/models/pedal.json and the manifest).
        Pedal(crate::pedal::Args),
        /// Find the gallery's named textures (ballad, arpeggio, block, stride, syncopated) in
        /// POP909's training songs by rule and write settings/textures.json.
        Textures(crate::textures::Args),
        /// Show what a MIDI file holds: tracks, tempo map, key, time signature, chords per bar.
        Inspect {
            /// The .mid file.
            file: PathBuf,
            /// Print the summary as JSON instead of text.
            #[arg(long)]
            json: bool,
            /// The harmonizer that fills the chord lane when no part carries the harmony (a
            /// melody-only file): a shipped model's name, a training run's folder, `default`
            /// (the shipped default) or `none` (the rule-based detector always).
            #[arg(long, default_value = "default")]
            harmonizer: String,
            /// Also give K chord alternatives for the whole piece (1–8; the first is the lane
            /// the harmonizer fills), each with its log-probability (JSON: `suggestions`).
            #[arg(long, value_name = "K")]
            suggest: Option<usize>,
        },
    }

    pub fn main() -> ExitCode {
        let cli = Cli::parse();
        let result = match cli.command {
            Command::Check { backend, json } => crate::check::run(&backend, json),
            Command::Inspect {
                file,
                json,
                harmonizer,
                suggest,
            } => crate::inspect::run(&file, json, &harmonizer, suggest),
            Command::Train(args) => crate::train::run(args),
            Command::Dynamics(args) => crate::dynamics::run(args),
            Command::Pedal(args) => crate::pedal::run(args),
            Command::Textures(args) => crate::textures::run(args),
            Command::Eval(args) => crate::eval::run(args),
            Command::Report {
                runs,
                svg,
                style_svg,
            } => crate::eval::report::run(&runs, svg.as_deref(), style_svg.as_deref()),
            Command::Generate(args) => crate::generate::run(args),
            Command::Ship(args) => crate::ship::run(args),
            Command::Bench {
                what,
                positions,
                steps,
                backend,
                json,
                window,
                batch,
                model,
            } => crate::bench::run(
                &what,
                crate::bench::Options {
                    positions,
                    steps,
                    backend,
                    json,
                    window,
                    batch,
                    model,
                },
            ),
        };
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("error: {message}");
                ExitCode::FAILURE
            }
        }
    }
}
