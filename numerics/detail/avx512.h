// Internal: numerics' AVX-512 kernels and the switch that chooses them. Each does, per lane, the
// operations of its AVX2 counterpart, so it gives the same bits and the choice changes speed
// only; the tests switch it to compare the two.
#pragma once

#include <cstdint>
#include <span>

#include "numerics/mt19937.h"

namespace probelab::num::detail {

/// Whether this CPU runs them (AVX-512 F and DQ).
bool avx512_available() noexcept;
/// Whether they are used: available, unless switched off.
bool avx512_kernels() noexcept;
/// Switches them off (false) or back on where available (true).
void set_avx512_kernels(bool on) noexcept;

/// box_muller and normal_samples (normal.h) with the Box-Muller steps on eight lanes (normal512.cpp).
void box_muller_avx512(std::span<const double> u1, std::span<const double> u2, double mean, double stddev,
                       std::span<double> c, std::span<double> s);
void normal_samples_avx512(Mt19937_64& rng, double mean, double stddev, std::span<float> out);

/// Mt19937_64's refill, eight words at a time (mt19937_512.cpp): the next 312 words of `state`
/// (312 plus padding) and their tempered outputs in `out`.
void mt19937_refill_avx512(std::uint64_t* state, std::uint64_t* out);

}  // namespace probelab::num::detail
