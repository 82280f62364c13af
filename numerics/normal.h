// Standard normal samples by the Box-Muller transform, computed with this library's own logarithm
// and sine/cosine (fdlibm's reductions and polynomials, four lanes of AVX2 or, where the CPU has
// it, eight of AVX-512 at a time) instead of the C library's: the values depend only on IEEE
// double arithmetic (+, *, /, sqrt, FMA), so the same uniforms give the same bits on every
// machine and C library, and a tensor of samples costs about as much as drawing its uniforms.
//
// Accuracy: log, sin and cos are within 1 ulp of the exact values (fdlibm's bounds; the tests
// compare with the C library over millions of arguments), so a sample rounded to FP32 equals the
// one the C library's functions give except when the double lands within a few ulps of an FP32
// rounding boundary (about one sample in 10^8).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "numerics/mt19937.h"

namespace probelab::num {

/// For each pair i: r = sqrt(-2 ln u1[i]), t = RN(2 pi * u2[i]) (pi as a double, as 2 * M_PI * u2
/// rounds it); c[i] = mean + (stddev * r) * cos t, s[i] = mean + (stddev * r) * sin t, each operation
/// rounded in that order. Preconditions: u1[i] in (0, 1], u2[i] in [0, 1), all four spans of one
/// length.
void box_muller(std::span<const double> u1, std::span<const double> u2, double mean, double stddev,
                std::span<double> c, std::span<double> s);

/// The uniforms of Box-Muller pairs from consecutive draws of a 64-bit generator, four pairs at a
/// time: u2[i] = unit_interval(draws[2i + 1]) and u1[i] = 1 - unit_interval(draws[2i]) when
/// `complement` (in (0, 1]), else unit_interval(draws[2i]) (num/mt19937.h: (draw >> 11) * 2^-53;
/// every value exact, so the same bits as the one-draw-at-a-time loop). Precondition:
/// draws.size() == 2 * u1.size() == 2 * u2.size().
void uniform_pairs(std::span<const std::uint64_t> draws, bool complement, std::span<double> u1, std::span<double> u2);

/// out.size() samples of N(mean, stddev^2) rounded to FP32, drawn from `rng` in Box-Muller pairs:
/// pair i takes draws 2i and 2i + 1 (u1 = 1 - unit_interval, in (0, 1]; u2 = unit_interval) and
/// gives out[2i] (the cosine side) and out[2i + 1] (the sine side; dropped after the last element
/// of an odd count).
void normal_samples(Mt19937_64& rng, double mean, double stddev, std::span<float> out);

/// The natural logarithm of x in (0, 1] with the method of box_muller (for tests).
double det_log(double x);
/// sin and cos of t in [0, 2 pi) with the method of box_muller (for tests).
void det_sincos(double t, double& s, double& c);

}  // namespace probelab::num
