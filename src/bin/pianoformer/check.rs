//! `pianoformer check`: the backend self-check from the command line.

use std::time::Instant;

use pianoformer::device::{self, Preference, check};

pub fn run(backend: &str, json: bool) -> Result<(), String> {
    let preference: Preference = backend.parse().map_err(|e| format!("{e}"))?;
    let started = Instant::now();
    let backend = pollster::block_on(device::init(preference)).map_err(|e| format!("{e}"))?;
    let ready = started.elapsed();
    let report =
        pollster::block_on(check::self_check(&backend.device)).map_err(|e| format!("{e}"))?;
    let fused = pollster::block_on(pianoformer::generate::check::fused_steps(&backend.device))
        .map_err(|e| format!("the fused steps could not be checked: {e}"))?;
    let total = started.elapsed();
    if json {
        let value = serde_json::json!({
            "backend": backend.info,
            "check": report,
            "fused": fused,
            "ready_ms": ready.as_secs_f64() * 1e3,
            "total_ms": total.as_secs_f64() * 1e3,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?
        );
    } else {
        println!("backend   {}", backend.info.label());
        if let Some(reason) = &backend.info.fallback_reason {
            println!("          (GPU unavailable: {reason})");
        }
        let ops = &report.ops;
        println!(
            "ops       max |device - cpu|: matmul {:.2e}, cumsum {:.2e}, softmax {:.2e}",
            ops.matmul, ops.cumsum, ops.softmax
        );
        println!(
            "training  {} Adam steps: loss {:.4} -> {:.4}",
            report.fit.losses.len() - 1,
            report.fit.first(),
            report.fit.last()
        );
        if let Some(f) = &fused {
            let verdict = |agree: bool| if agree { "the same" } else { "OTHER" };
            println!(
                "fused     {} continuation tokens {} ({} read-backs), {} accompaniment steps {} as \
                 tensor ops{}",
                f.tokens,
                verdict(f.tokens_agree),
                f.read_backs,
                f.steps,
                verdict(f.steps_agree),
                if f.on { "" } else { ": turned off" }
            );
        }
        println!(
            "time      ready {:.0} ms, check {:.0} ms",
            ready.as_secs_f64() * 1e3,
            (total - ready).as_secs_f64() * 1e3
        );
    }
    if report.ops.max() > 1e-3 {
        return Err(format!(
            "the backend disagrees with the CPU reference by {:.2e}",
            report.ops.max()
        ));
    }
    Ok(())
}
