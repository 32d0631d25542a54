# pianoformer — the two commands that matter:
#   make serve   build the app (release wasm + default models) and serve it on http://127.0.0.1:8000
#   make test    run every test: lint (fmt, clippy), native (cargo test), browser (the library's
#                wasm tests in Chromium), JS, end-to-end page; a table of stage times at the end
# Both install whatever is missing first (tools/setup.sh).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
export PATH := $(HOME)/.cargo/bin:$(CURDIR)/node_modules/.bin:$(PATH)

# One target dir outside the clone, shared by every build and by CI runs on the same machine.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/pianoformer/target
# SwiftShader WebGPU compiles kernels per shape: browser tests need a generous timeout.
export WASM_BINDGEN_TEST_TIMEOUT ?= 900
PORT ?= 8000
# wasm-opt (binaryen from npm; Debian's binaryen breaks this wasm). 0 skips it.
WASM_OPT ?= 1

.PHONY: serve test setup lint wasm test-bundles samples test-native test-js test-browser test-e2e check clean help

help:
	@sed -n '2,5p' Makefile

serve: wasm
	node tools/serve.mjs --port $(PORT)

# Every stage in turn, with a table of their times at the end (printed when one fails too).
TEST_STAGES := setup samples lint test-native test-js test-browser test-e2e
test:
	@bash tools/stages.sh "$(MAKE)" $(TEST_STAGES)

setup:
	bash tools/setup.sh

# The piano samples the page plays (from the npm package, into www/samples/).
samples: setup
	node tools/samples.mjs

# Release wasm for the page (cargo, then wasm-bindgen --target web: tools/wasm-bundle.sh) in two bundles: pkg/cpu/ without WebGPU
# (the page starts on it; profile release and wasm-opt -O3, for speed) and pkg/ with it
# (fetched when WebGPU may be used; profile page — opt-level z, fat LTO, one codegen unit, for
# size — and wasm-opt -O1: its output gzips smaller than -Oz's, 2.60 against 2.80 MB, and takes
# 40 s instead of 170); and the samples.
wasm: setup samples
	@start=$$(date +%s); \
	tools/wasm-bundle.sh page pkg; \
	tools/wasm-bundle.sh release pkg/cpu --no-default-features --features ml; \
	for dir in pkg pkg/cpu; do \
	  raw=$$(stat -c %s $$dir/pianoformer_bg.wasm); \
	  if [ "$(WASM_OPT)" = 1 ]; then \
	    level=$$([ $$dir = pkg ] && echo -O1 || echo -O3); \
	    wasm-opt $$level --enable-simd --strip-debug --strip-producers $$dir/pianoformer_bg.wasm -o $$dir/pianoformer_bg.wasm.opt; \
	    mv $$dir/pianoformer_bg.wasm.opt $$dir/pianoformer_bg.wasm; \
	  fi; \
	  size=$$(stat -c %s $$dir/pianoformer_bg.wasm); gz=$$(gzip -9c $$dir/pianoformer_bg.wasm | wc -c); \
	  echo "wasm $$dir/: $$((raw / 1024)) KiB built, $$((size / 1024)) KiB shipped ($$((gz / 1024)) KiB gzipped)"; \
	done; \
	echo "wasm: both bundles in $$(( $$(date +%s) - start )) s"

POP909_DIR ?= $(CURDIR)/../shared/data/pop909

# Tests that cannot run here (no POP909, no GPU) append a line to this file; the stage lists them.
SKIP_LOG := $(CURDIR)/target/skipped-tests.txt

test-native:
	@[ -d "$(POP909_DIR)/songs" ] || echo "note: POP909 not found at $(POP909_DIR): the real-data tests will skip (set POP909_DIR)"
	@mkdir -p target && rm -f "$(SKIP_LOG)"
	POP909_DIR="$(POP909_DIR)" PIANOFORMER_SKIP_LOG="$(SKIP_LOG)" $(CLIPPY_BUILD) cargo test
	@if [ -s "$(SKIP_LOG)" ]; then \
	  echo "skipped, having checked nothing: $$(wc -l < "$(SKIP_LOG)") tests"; sort "$(SKIP_LOG)" | sed 's/^/  /'; \
	else echo "no test skipped"; fi

# Clippy compiles the crate's own targets as their compiler (RUSTC_WORKSPACE_WRAPPER, as `cargo
# clippy` does for a check), so one build of the dependencies serves the lints and the native
# tests: `cargo clippy` checked every dependency a second time (6 minutes on a new machine).
# Warnings are errors. The same variables on both commands, so the test build is reused.
CLIPPY_BUILD := RUSTC_WORKSPACE_WRAPPER="$$(command -v clippy-driver)" CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__

# Formatting, clippy with warnings as errors on every native target (the lib, the CLI, the
# tests: the test build itself, see CLIPPY_BUILD), and no dependency cycle between the library's
# modules, the CLI's or the page's (tools/deps.py: music → model → data → train / generate → eval → ...).
lint:
	cargo fmt --check
	python3 tools/deps.py
	@# Every page module parses as a module (a duplicate import fails here, not in the browser).
	for f in www/*.js sw.js; do node --check --input-type=module < "$$f" || { echo "$$f does not parse"; exit 1; }; done
	$(CLIPPY_BUILD) cargo test --no-run

# The page's JavaScript modules (share links, storage, audio, roll maths) under Node.
test-js:
	node --test tests/js/

# What the tests serve: both bundles, like `make wasm`'s, but built with the `wasm-test` profile
# (Cargo.toml: no LTO, opt-level 2) and without wasm-opt, so that the browser tests and both
# bundles share one compilation of the wasm dependencies. `make serve` builds the shipping ones.
test-bundles: setup samples
	@start=$$(date +%s); \
	tools/wasm-bundle.sh wasm-test pkg; \
	tools/wasm-bundle.sh wasm-test pkg/cpu --no-default-features --features ml; \
	echo "test bundles: both in $$(( $$(date +%s) - start )) s"

# The library compiled to wasm with the test bundles' profile and features (`wasm-test`), so the
# wasm dependencies are compiled once for the browser tests and the end-to-end bundles; run by
# wasm-bindgen's test runner in headless Chromium through chromedriver (flags: webdriver.json).
test-browser: setup
	CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner CHROMEDRIVER=$$(command -v chromedriver) \
	  cargo test --target wasm32-unknown-unknown --profile wasm-test --test web

# parity.test.mjs runs the CLI beside the page: the debug binary the native tests built (the same
# variables as their build, so nothing is compiled again when they ran first).
test-e2e: test-bundles
	$(CLIPPY_BUILD) cargo build --bin pianoformer
	POP909_DIR="$(POP909_DIR)" node --test tests/e2e/*.test.mjs
	@# The page benchmark once at toy size on the test bundles and the debug CLI (no time is
	@# judged): a change that breaks one of its measurements fails here.
	PIANOFORMER_BIN="$(CARGO_TARGET_DIR)/debug/pianoformer" node tools/bench-page.mjs --skip-gpu \
	  --bars 2 --long-bars 0 --new-bars 1 --tune-steps 1 --repeats 1

# The backend self-check from the command line (GPU when wgpu finds one, else CPU).
check:
	cargo run --release -- check

clean:
	rm -rf pkg target/e2e www/samples
