#!/usr/bin/env bash
# The whole test suite: install what is missing, build (tests and benchmarks), run every test.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/deps.sh"
probelab_install_deps
probelab_build "$root"
probelab_install_trace_engine "$root/build/trace_engine"
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
cd "$root/build"
ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "$@"
