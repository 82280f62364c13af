#!/usr/bin/env bash
# Builds the libFuzzer harnesses of fuzz/ (clang, ASan + UBSan, in build-fuzz/) and runs each for a
# time budget on its seed corpus: fuzz/corpus/<harness>/ plus the bundled files it reads
# (scenarios, models, probe configs, ONNX test models). Stops at the first finding (crash, sanitizer
# report, unclassified exception, timeout, out-of-memory) and prints the input libFuzzer saved.
#
#   scripts/fuzz.sh [SECONDS] [HARNESS...]     default: 60 s each, every harness
#
# Prints one line per harness: executions, executions per second, corpus size, coverage.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/deps.sh"
PROBELAB_PACKAGES+=(clang)
probelab_install_deps

budget="${1:-60}"
shift || true
all=(fuzz_scenario fuzz_model_yaml fuzz_onnx fuzz_npy fuzz_probe_config fuzz_expr fuzz_dump_manifest fuzz_campaign_store)
harnesses=("$@")
((${#harnesses[@]})) || harnesses=("${all[@]}")

build="$root/build-fuzz"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$root" -B "$build" "${launcher[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DPROBELAB_FUZZ=ON >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target "${harnesses[@]}"
source "$root/scripts/sanitizers/env.sh"
export SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1

# Seeds from the repository, by harness (the committed fuzz/corpus/<harness>/ come first).
seed_files() {
  case "$1" in
    fuzz_scenario) ls "$root"/scenarios/*.yaml "$root"/scenarios/campaigns/*.yaml ;;
    fuzz_model_yaml) ls "$root"/scenarios/models/*.yaml ;;
    fuzz_onnx) ls "$root"/tests/graph/data/*.onnx; find /usr/share/libonnx-testdata/data/node -name model.onnx 2>/dev/null | sort | head -200 ;;
    fuzz_probe_config) ls "$root"/tests/probes/data/*.yaml "$root"/tests/probes/data/*.json ;;
  esac
}

work="$build/fuzz-work"
status=0
for h in "${harnesses[@]}"; do
  corpus="$work/corpus/$h"
  rm -rf "$corpus" "$work/artifacts/$h"
  mkdir -p "$corpus" "$work/artifacts/$h"
  [[ -d "$root/fuzz/corpus/$h" ]] && cp "$root/fuzz/corpus/$h"/* "$corpus"/ 2>/dev/null || true
  i=0
  while read -r f; do
    [[ -n "$f" && -f "$f" ]] && cp "$f" "$corpus/seed-$((i++))"
  done < <(seed_files "$h" || true)
  log="$work/$h.log"
  if "$build/fuzz/$h" -max_total_time="$budget" -timeout=10 -rss_limit_mb=1536 -max_len=65536 -print_final_stats=1 \
       -artifact_prefix="$work/artifacts/$h/" "$corpus" >"$log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    printf '%-22s %10s executions  %7s/s  corpus %5s  cov %s  crash-free\n' "$h" "$execs" "$speed" \
      "$(ls "$corpus" | wc -l)" "${cov:-?}"
  else
    status=1
    echo "$h: FINDING (see $log)"
    grep -E 'ERROR|SUMMARY|probelab fuzz|Test unit written' "$log" | head -5
  fi
done
exit $status
