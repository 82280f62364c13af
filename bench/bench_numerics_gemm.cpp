// Bit-exact FP16 GEMM (numerics) vs Eigen FP32 GEMM, single thread, same sizes, same
// binary. The *_vs_EigenF32 benchmarks interleave both kernels in every iteration and report the
// ratio of their best thread-CPU times (robust to load from other processes) as counters and on
// stderr: ratio_vs_eigen = Eigen time / our time (>= 1: as fast as Eigen FP32 GEMM).
#include <benchmark/benchmark.h>
#include <fmt/core.h>

#include <Eigen/Core>
#include <algorithm>
#include <ctime>
#include <cstdint>
#include <random>
#include <vector>

#include "numerics/fp16.h"
#include "numerics/gemm.h"

namespace {

using probelab::num::Accum;
using probelab::num::f16;
using probelab::num::GemmOptions;

struct Problem {
  std::int64_t n;
  std::vector<f16> a, b;
  std::vector<float> c;
  Eigen::MatrixXf ea, eb, ec;

  explicit Problem(std::int64_t size) : n(size) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(size));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const auto nn = static_cast<std::size_t>(n * n);
    a.resize(nn);
    b.resize(nn);
    c.resize(nn);
    ea.resize(n, n);
    eb.resize(n, n);
    ec.resize(n, n);
    for (std::size_t i = 0; i < nn; ++i) {
      a[i] = probelab::num::to_f16(nd(rng)).value;
      b[i] = probelab::num::to_f16(nd(rng)).value;
      ea.data()[i] = probelab::num::to_float(a[i]);
      eb.data()[i] = probelab::num::to_float(b[i]);
    }
  }
  void ours(Accum accum) {
    GemmOptions o;
    o.accum = accum;
    benchmark::DoNotOptimize(probelab::num::gemm(n, n, n, a.data(), b.data(), c.data(), o));
    benchmark::ClobberMemory();
  }
  void eigen() {
    ec.noalias() = ea * eb;
    benchmark::DoNotOptimize(ec.data());
    benchmark::ClobberMemory();
  }
};

double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double flops(std::int64_t n) { return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n); }

void BM_EigenF32Gemm(benchmark::State& state) {
  Eigen::setNbThreads(1);
  Problem p(state.range(0));
  for (auto _ : state) p.eigen();
  state.counters["GFLOP/s"] = benchmark::Counter(flops(p.n) * static_cast<double>(state.iterations()) * 1e-9,
                                                 benchmark::Counter::kIsRate);
}

void BM_NumericsF16Gemm(benchmark::State& state) {
  Problem p(state.range(0));
  const auto accum = static_cast<Accum>(state.range(1));
  for (auto _ : state) p.ours(accum);
  state.counters["GFLOP/s"] = benchmark::Counter(flops(p.n) * static_cast<double>(state.iterations()) * 1e-9,
                                                 benchmark::Counter::kIsRate);
}

const char* accum_name(Accum a) {
  switch (a) {
    case Accum::Fp32: return "fp32-acc";
    case Accum::Fp16Rn: return "fp16-rn-acc";
    default: return "fp16-via-fp32-acc";
  }
}

void BM_NumericsF16Gemm_vs_EigenF32(benchmark::State& state) {
  Eigen::setNbThreads(1);
  const auto isa = static_cast<probelab::num::GemmIsa>(state.range(2));
  const probelab::num::GemmIsa saved = probelab::num::gemm_isa();
  if (!probelab::num::set_gemm_isa(isa)) {
    state.SkipWithError("this CPU has no AVX-512");
    return;
  }
  Problem p(state.range(0));
  const auto accum = static_cast<Accum>(state.range(1));
  double best_ours = 1e30, best_eigen = 1e30;
  for (auto _ : state) {
    const double t0 = thread_seconds();
    p.ours(accum);
    const double t1 = thread_seconds();
    p.eigen();
    const double t2 = thread_seconds();
    best_ours = std::min(best_ours, t1 - t0);
    best_eigen = std::min(best_eigen, t2 - t1);
  }
  probelab::num::set_gemm_isa(saved);
  const double ratio = best_eigen / best_ours;
  state.counters["ours_GFLOP/s"] = flops(p.n) / best_ours * 1e-9;
  state.counters["eigen_GFLOP/s"] = flops(p.n) / best_eigen * 1e-9;
  state.counters["ratio_vs_eigen"] = ratio;
  fmt::print(stderr, "[numerics gemm] n={} {} ({}): {:.1f} GFLOP/s, Eigen FP32 {:.1f} GFLOP/s, ratio {:.3f}\n", p.n,
             accum_name(accum), isa == probelab::num::GemmIsa::Avx2 ? "AVX2" : "AVX-512", flops(p.n) / best_ours * 1e-9, flops(p.n) / best_eigen * 1e-9, ratio);
}

constexpr auto kFp32 = static_cast<std::int64_t>(Accum::Fp32);
constexpr auto kFp16Rn = static_cast<std::int64_t>(Accum::Fp16Rn);
constexpr auto kFp16Via = static_cast<std::int64_t>(Accum::Fp16ViaFp32);

BENCHMARK(BM_EigenF32Gemm)->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_NumericsF16Gemm)
    ->Args({256, kFp32})->Args({1024, kFp32})->Args({256, kFp16Rn})->Args({256, kFp16Via})
    ->Unit(benchmark::kMillisecond);
// range: n, accumulation, instruction set of the FP16-accumulation tile (0 AVX2, 1 AVX-512)
BENCHMARK(BM_NumericsF16Gemm_vs_EigenF32)
    ->ArgsProduct({{256, 1024}, {kFp32, kFp16Rn, kFp16Via}, {0, 1}})
    ->Unit(benchmark::kMillisecond)->MinTime(1.0);

}  // namespace
