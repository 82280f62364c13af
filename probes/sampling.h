// Deterministic sampling: the decision to capture a probe at (op, step, rank) is a pure function
// of the seed, so runs replay exactly and every host agrees without communication.
#pragma once

#include <cstdint>
#include <string_view>

namespace probelab::probes {

/// SplitMix64 finaliser (Steele, Lea, Flood 2014): a bijective 64-bit mix.
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// FNV-1a 64 of a string (stable op-name key).
std::uint64_t fnv1a64(std::string_view s);

/// Counter-based: h = splitmix64(splitmix64(splitmix64(seed ^ fnv1a64(op)) ^ step) ^ rank);
/// sampled iff (h >> 11) * 2^-53 < rate. rate <= 0 never, rate >= 1 always. For a fixed seed and
/// op, the share of sampled steps converges to `rate`. Sync probes pass rank 0 so that every rank
/// samples the same steps.
bool sampled(std::uint64_t seed, std::string_view op, std::uint64_t step, std::uint32_t rank, double rate);

}  // namespace probelab::probes
