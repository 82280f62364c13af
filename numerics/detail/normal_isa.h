// Internal: the AVX-512 Box-Muller kernels (normal512.cpp) behind num::box_muller and
// num::normal_samples. The same operations per lane as the AVX2 ones in normal.cpp, eight lanes
// at a time: the same bits (the tests compare the two on every tail length and edge uniform).
#pragma once

#include <span>

#include "numerics/mt19937.h"

namespace probelab::num::detail {

/// Whether this CPU runs the AVX-512 kernels (AVX-512 F and DQ).
bool normal_avx512_available() noexcept;
/// Whether box_muller and normal_samples use them: available, unless switched off.
bool normal_avx512() noexcept;
/// Switches the AVX-512 kernels off (false) or back on where available (true), for the tests.
void set_normal_avx512(bool on) noexcept;

/// box_muller and normal_samples (normal.h) with AVX-512; only where normal_avx512_available().
void box_muller_avx512(std::span<const double> u1, std::span<const double> u2, double mean, double stddev,
                       std::span<double> c, std::span<double> s);
void normal_samples_avx512(Mt19937_64& rng, double mean, double stddev, std::span<float> out);

}  // namespace probelab::num::detail
