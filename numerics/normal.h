// Standard normal samples by the Box-Muller transform, computed with this library's own logarithm
// and sine/cosine (fdlibm's reductions and polynomials, four lanes of AVX2 at a time) instead of the
// C library's: the values depend only on IEEE double arithmetic (+, *, /, sqrt, FMA), so the same
// uniforms give the same bits on every machine and C library, and a tensor of samples costs about
// as much as drawing its uniforms.
//
// Accuracy: log, sin and cos are within 1 ulp of the exact values (fdlibm's bounds; the tests
// compare with the C library over millions of arguments), so a sample rounded to FP32 equals the
// one the C library's functions give except when the double lands within a few ulps of an FP32
// rounding boundary (about one sample in 10^8).
#pragma once

#include <cstddef>
#include <span>

namespace probelab::num {

/// For each pair i: r = sqrt(-2 ln u1[i]), t = RN(2 pi * u2[i]) (pi as a double, as 2 * M_PI * u2
/// rounds it); c[i] = mean + (stddev * r) * cos t, s[i] = mean + (stddev * r) * sin t, each operation
/// rounded in that order. Preconditions: u1[i] in (0, 1], u2[i] in [0, 1), all four spans of one
/// length.
void box_muller(std::span<const double> u1, std::span<const double> u2, double mean, double stddev,
                std::span<double> c, std::span<double> s);

/// The natural logarithm of x in (0, 1] with the method of box_muller (for tests).
double det_log(double x);
/// sin and cos of t in [0, 2 pi) with the method of box_muller (for tests).
void det_sincos(double t, double& s, double& c);

}  // namespace probelab::num
