// The instruction set of the FP16-accumulation tile (gemm.h): AVX-512 on Intel CPUs that have it,
// AVX2 otherwise, or what set_gemm_isa() chose.
#include <atomic>

#include "numerics/gemm.h"

namespace probelab::num {
namespace {

bool cpu_has_avx512() noexcept {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
}

std::atomic<GemmIsa>& current() {
  static std::atomic<GemmIsa> isa{cpu_has_avx512() && __builtin_cpu_is("intel") ? GemmIsa::Avx512 : GemmIsa::Avx2};
  return isa;
}

}  // namespace

GemmIsa gemm_isa() noexcept { return current().load(std::memory_order_relaxed); }

bool set_gemm_isa(GemmIsa isa) noexcept {
  if (isa != GemmIsa::Avx2 && isa != GemmIsa::Avx512) return false;
  if (isa == GemmIsa::Avx512 && !cpu_has_avx512()) return false;
  current().store(isa, std::memory_order_relaxed);
  return true;
}

}  // namespace probelab::num
