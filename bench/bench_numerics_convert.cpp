// Bulk FP16/BF16 <-> FP32 conversion, elementwise and scan throughput (elements/s), with flags.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "numerics/bf16.h"
#include "numerics/bulk.h"
#include "numerics/fp16.h"

namespace {

namespace num = probelab::num;

std::vector<float> data(std::size_t n, std::uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 10.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

template <class T>
std::vector<T> narrow(const std::vector<float>& x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    std::vector<T> out(x.size());
    (void)num::convert(std::span<const float>(x), std::span<T>(out));
    return out;
  }
}

template <class T>
void BM_F32To16(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<float> x = data(n);
  std::vector<T> out(n);
  for (auto _ : state) {
    benchmark::DoNotOptimize(num::convert(std::span<const float>(x), std::span<T>(out)));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

template <class T>
void BM_16ToF32(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<T> x = narrow<T>(data(n));
  std::vector<float> out(n);
  for (auto _ : state) {
    benchmark::DoNotOptimize(num::convert(std::span<const T>(x), std::span<float>(out)));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

template <class T>
void BM_Add(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<T> a = narrow<T>(data(n)), b = narrow<T>(data(n, 2));
  std::vector<T> out(n);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        num::elementwise(num::BinaryOp::Add, std::span<const T>(a), std::span<const T>(b), std::span<T>(out)));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

void BM_ScanF16(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<num::f16> x = narrow<num::f16>(data(n));
  for (auto _ : state) benchmark::DoNotOptimize(num::scan(std::span<const num::f16>(x)));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

BENCHMARK(BM_F32To16<num::f16>)->Arg(1 << 16)->Arg(1 << 22);
BENCHMARK(BM_16ToF32<num::f16>)->Arg(1 << 16)->Arg(1 << 22);
BENCHMARK(BM_F32To16<num::bf16>)->Arg(1 << 16)->Arg(1 << 22);
BENCHMARK(BM_16ToF32<num::bf16>)->Arg(1 << 16)->Arg(1 << 22);
BENCHMARK(BM_Add<num::f16>)->Arg(1 << 16);
BENCHMARK(BM_Add<num::bf16>)->Arg(1 << 16);
BENCHMARK(BM_Add<float>)->Arg(1 << 16);
BENCHMARK(BM_ScanF16)->Arg(1 << 16)->Arg(1 << 22);

}  // namespace
