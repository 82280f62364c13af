#!/usr/bin/env bash
# The whole test suite: install what is missing, build (tests and benchmarks), run every test.
#
#   scripts/test.sh [CTEST ARGS...]          Release build in build/, every test
#   scripts/test.sh --sanitize [CTEST ARGS]  ASan + UBSan build in build-sanitize/, every test and
#                                            the bundled suite (about 40 min of CPU on 2 cores cold)
#   scripts/test.sh --sanitize=parsers       ASan + UBSan at -O0 in build-sanitize-parsers/, the
#                                            input readers and the probe runtime only (graph,
#                                            probes, sim_scenario tests)
#
# Sanitizer findings fail the run (halt_on_error); suppressions cover third-party code only and
# are explained in scripts/sanitizers/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/deps.sh"
probelab_install_deps

sanitize=""
case "${1:-}" in
  --sanitize) sanitize=all; shift ;;
  --sanitize=parsers) sanitize=parsers; shift ;;
  --sanitize=*) echo "scripts/test.sh: unknown ${1} (expected --sanitize or --sanitize=parsers)" >&2; exit 2 ;;
esac

export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1
if [[ -z "$sanitize" ]]; then
  probelab_build "$root"
  probelab_install_trace_engine "$root/build/trace_engine"
  cd "$root/build"
  exec ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "$@"
fi

jobs=$(nproc 2>/dev/null || echo 2)
options=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DPROBELAB_SANITIZE=ON)
command -v ccache >/dev/null && options+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [[ "$sanitize" == parsers ]]; then
  # Compile time dominates this check, so it builds at -O0 (README, "Bad input, kills, fuzzing
  # and sanitizers").
  build="$root/build-sanitize-parsers"
  options+=(-DPROBELAB_SANITIZE_OPT=-O0)
else
  build="$root/build-sanitize"
fi
cmake -S "$root" -B "$build" "${options[@]}" >/dev/null
source "$root/scripts/sanitizers/env.sh"
if [[ "$sanitize" == parsers ]]; then
  # The test binaries of the input readers and of the probe runtime, nothing that elaborates SystemC.
  targets=$(cmake --build "$build" --target help | sed -n 's/^\.\.\. \(\(graph\|probes\|sim_scenario\)_test_[a-z0-9_]*\)$/\1/p')
  # shellcheck disable=SC2086
  cmake --build "$build" -j "$jobs" --target $targets
  cd "$build"
  exec ctest --output-on-failure -j "$jobs" -R '^(graph|probes|sim_scenario)_' "$@"
fi
cmake --build "$build" -j "$jobs"
probelab_install_trace_engine "$build/trace_engine"
cd "$build"
ctest --output-on-failure -j "$jobs" "$@"
"$build/probelab" run --out "$build/suite-out"
