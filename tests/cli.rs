//! The native CLI as a user runs it.
#![cfg(not(target_arch = "wasm32"))]

use std::process::Command;

fn pianoformer() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pianoformer"))
}

#[test]
fn check_on_the_cpu_reports_json_with_a_falling_loss() {
    let out = pianoformer()
        .args(["check", "--backend", "cpu", "--json"])
        .output()
        .expect("run pianoformer");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(report["backend"]["kind"], "cpu");
    let losses = report["check"]["fit"]["losses"].as_array().expect("losses");
    let first = losses[0].as_f64().unwrap();
    let last = losses.last().unwrap().as_f64().unwrap();
    assert!(last < 0.3 * first, "{first} -> {last}");
}

#[test]
fn an_unknown_backend_is_a_plain_error() {
    let out = pianoformer()
        .args(["check", "--backend", "tpu"])
        .output()
        .expect("run pianoformer");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown backend 'tpu'"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
