// Conversions between SystemC time and device cycles of one chip clock, and bandwidth costs.
// Cycles are counted from time zero: cycle(t) = floor(t_ps * MHz / 1e6). Integer arithmetic only,
// so the same run gives the same cycles on every machine.
#pragma once

#include <cstdint>

#include <systemc>

namespace probelab::chip {

class ChipClock {
 public:
  explicit ChipClock(std::uint32_t mhz = 1000) : mhz_(mhz) {}
  std::uint32_t mhz() const { return mhz_; }

  /// Cycle in progress at absolute time t.
  std::uint64_t cycle_at(const sc_core::sc_time& t) const { return ps_to_cycles(to_ps(t)); }
  std::uint64_t ps_to_cycles(std::uint64_t ps) const {
    // floor(ps * mhz / 1e6) without overflow: ps = q * 1e6 + r.
    return ps / 1'000'000u * mhz_ + ps % 1'000'000u * mhz_ / 1'000'000u;
  }
  /// Duration of n cycles, rounded up to whole picoseconds.
  std::uint64_t cycles_to_ps(std::uint64_t n) const {
    // ceil(n * 1e6 / mhz) without overflow: n = q * mhz + r.
    return n / mhz_ * 1'000'000u + (n % mhz_ * 1'000'000u + mhz_ - 1) / mhz_;
  }
  sc_core::sc_time cycles(std::uint64_t n) const { return from_ps(cycles_to_ps(n)); }
  /// Absolute time at which cycle n starts (>= the exact value, rounded up to ps).
  sc_core::sc_time time_of_cycle(std::uint64_t n) const { return cycles(n); }

  /// The simulation runs at SystemC's default time resolution of 1 ps (checked by Chip), so
  /// an sc_time's value is its length in picoseconds.
  static std::uint64_t to_ps(const sc_core::sc_time& t) { return t.value(); }
  static sc_core::sc_time from_ps(std::uint64_t ps) { return sc_core::sc_time::from_value(ps); }

 private:
  std::uint32_t mhz_;
};

/// Picoseconds to move `bytes` at `gbps` GB/s (1e9 bytes/s), rounded up; 0 bytes -> 0.
inline std::uint64_t transfer_ps(std::uint64_t bytes, double gbps) {
  if (bytes == 0 || gbps <= 0) return 0;
  const double ps = static_cast<double>(bytes) * 1000.0 / gbps;
  const auto whole = static_cast<std::uint64_t>(ps);
  return whole + (static_cast<double>(whole) < ps ? 1 : 0);
}

}  // namespace probelab::chip
