// Entry point of every benchmark binary (see tests/support/test_main.cpp for why it is ours).
#include <benchmark/benchmark.h>

#include "sim/run/heap_policy.h"

int main(int argc, char** argv) {
  // The simulated step and its CPU reference run under the heap settings of the probelab CLI.
  probelab::sim::keep_freed_memory();
  ::benchmark::Initialize(&argc, argv);
  if (::benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  ::benchmark::RunSpecifiedBenchmarks();
  ::benchmark::Shutdown();
  return 0;
}
