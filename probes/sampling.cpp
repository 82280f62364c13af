#include "probes/sampling.h"

namespace probelab::probes {

std::uint64_t fnv1a64(std::string_view s) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

bool sampled(std::uint64_t seed, std::string_view op, std::uint64_t step, std::uint32_t rank, double rate) {
  if (!(rate > 0.0)) return false;
  if (rate >= 1.0) return true;
  std::uint64_t h = splitmix64(splitmix64(splitmix64(seed ^ fnv1a64(op)) ^ step) ^ rank);
  double u = static_cast<double>(h >> 11) * 0x1p-53;
  return u < rate;
}

}  // namespace probelab::probes
