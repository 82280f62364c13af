// Entry point of every benchmark binary (see tests/support/test_main.cpp for why it is ours).
#include <benchmark/benchmark.h>

int main(int argc, char** argv) {
  ::benchmark::Initialize(&argc, argv);
  if (::benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  ::benchmark::RunSpecifiedBenchmarks();
  ::benchmark::Shutdown();
  return 0;
}
