#!/usr/bin/env bash
# Installs the Debian packages probelab needs, only those missing (idempotent), then configures
# and builds into build/ (incrementally). Sourced by scripts/suite.sh and scripts/test.sh.
set -euo pipefail

PROBELAB_PACKAGES=(
  cmake g++ make pkg-config
  libsystemc-dev libeigen3-dev libboost-dev libfmt-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libzstd-dev zlib1g-dev libmimalloc-dev
  libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata
  libopenmpi-dev openmpi-bin libboost-mpi-dev
  python3-dev pybind11-dev python3-pybind11 python3-numpy python3-pytest   # the Python API and its tests
  chromium fonts-dejavu-core   # headless rendering test of the HTML reports (about 120 MB, ~50 s to install)
)

probelab_install_deps() {
  local missing=()
  for p in "${PROBELAB_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if ((${#missing[@]})); then
    echo "probelab: installing Debian packages: ${missing[*]}"
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}"
  fi
}

# Chrome DevTools' trace model (npm), for the test that loads every bundled trace in it
# (tests/sim/run/test_bundled_traces.cpp). Installed once into DIR; about 2 s from the registry.
PROBELAB_TRACE_ENGINE="@paulirish/trace_engine@0.0.65"
probelab_install_trace_engine() {
  local dir="$1"
  if [ -f "$dir/node_modules/@paulirish/trace_engine/package.json" ]; then return 0; fi
  if ! command -v npm >/dev/null 2>&1; then
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends nodejs npm
  fi
  mkdir -p "$dir"
  echo "probelab: installing $PROBELAB_TRACE_ENGINE into $dir"
  (cd "$dir" && npm install --no-audit --no-fund --no-save --prefix "$dir" "$PROBELAB_TRACE_ENGINE" >/dev/null)
}

probelab_build() {
  local root="$1"
  local jobs
  jobs=$(nproc 2>/dev/null || echo 2)
  cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$root/build" -j "$jobs"
  # `import probelab` for Debian's python3: one .pth file pointing at build/python (root only;
  # otherwise PYTHONPATH=build/python works).
  if [ "$(id -u)" -eq 0 ]; then
    cmake --install "$root/build" --component python >/dev/null
  fi
}
