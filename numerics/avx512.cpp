// The switch of numerics' AVX-512 kernels (detail/avx512.h).
#include "numerics/detail/avx512.h"

#include <atomic>

namespace probelab::num::detail {
namespace {

std::atomic<bool>& on() {
  static std::atomic<bool> flag{avx512_available()};
  return flag;
}

}  // namespace

bool avx512_available() noexcept {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
}

bool avx512_kernels() noexcept { return on().load(std::memory_order_relaxed); }

void set_avx512_kernels(bool enable) noexcept { on().store(enable && avx512_available(), std::memory_order_relaxed); }

}  // namespace probelab::num::detail
