#!/usr/bin/env bash
# Builds one of the page's wasm bundles: the library for wasm32 with cargo, then wasm-bindgen's
# glue for the browser (`--target web`: pianoformer.js and pianoformer_bg.wasm in OUT_DIR).
#   tools/wasm-bundle.sh PROFILE OUT_DIR [cargo build flags...]
# e.g. tools/wasm-bundle.sh page pkg; tools/wasm-bundle.sh release pkg/cpu --no-default-features --features ml
# (wasm-bindgen-cli must match the wasm-bindgen in Cargo.lock: `make setup` installs it.)
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${1:?usage: tools/wasm-bundle.sh PROFILE OUT_DIR [cargo flags...]}
out=${2:?usage: tools/wasm-bundle.sh PROFILE OUT_DIR [cargo flags...]}
shift 2
cargo build --lib --target wasm32-unknown-unknown --profile "$profile" "$@"
dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
wasm-bindgen --target web --no-typescript --out-dir "$out" \
  "${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/$dir/pianoformer.wasm"
