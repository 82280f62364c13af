// The elementary functions of the FP32 reference kernels (which the Vector unit computes with),
// evaluated so that their bits do not depend on the C library's single-precision code.
//
// The float functions of C libraries differ between releases and vendors: glibc 2.41 replaced
// erff, tanhf, log1pf, expm1f, sinhf, coshf, atanf, asinf, acosf, tanf and the inverse hyperbolic
// functions by correctly rounded ones, so the same scenario gave other bits on Debian 13 than on
// Debian 12, in every model with a Gelu. Here a float argument is evaluated by the double
// function (an error below one double ulp on every maintained C library) and rounded once to
// float: that is the correctly rounded result unless the exact value lies within about one double
// ulp of a float rounding boundary (a few arguments of the 2^32), so the results agree with any
// correctly rounded float library and with each other across C libraries; the tests compare with
// an evaluation in extended precision. Double arguments go to the double function unchanged.
#pragma once

#include <cmath>

namespace probelab::num {

#define PROBELAB_ELEMENTARY_1(NAME)                                                                   \
  inline float NAME(float x) { return static_cast<float>(std::NAME(static_cast<double>(x))); }      \
  inline double NAME(double x) { return std::NAME(x); }

PROBELAB_ELEMENTARY_1(exp)
PROBELAB_ELEMENTARY_1(expm1)
PROBELAB_ELEMENTARY_1(log)
PROBELAB_ELEMENTARY_1(log1p)
PROBELAB_ELEMENTARY_1(erf)
PROBELAB_ELEMENTARY_1(tanh)
PROBELAB_ELEMENTARY_1(sin)
PROBELAB_ELEMENTARY_1(cos)
PROBELAB_ELEMENTARY_1(tan)
PROBELAB_ELEMENTARY_1(asin)
PROBELAB_ELEMENTARY_1(acos)
PROBELAB_ELEMENTARY_1(atan)
PROBELAB_ELEMENTARY_1(sinh)
PROBELAB_ELEMENTARY_1(cosh)
PROBELAB_ELEMENTARY_1(asinh)
PROBELAB_ELEMENTARY_1(acosh)
PROBELAB_ELEMENTARY_1(atanh)

#undef PROBELAB_ELEMENTARY_1

// x^2 (decomposed LayerNorm and RMSNorm square every activation) is d * d in double, exact for
// every float, which is what the double pow returns too (its error is below one ulp of an exact
// result); NaN arguments still go through pow.
inline float pow(float x, float y) {
  const double d = x;
  if (y == 2.0f && !std::isnan(x)) return static_cast<float>(d * d);
  return static_cast<float>(std::pow(d, static_cast<double>(y)));
}
inline double pow(double x, double y) { return std::pow(x, y); }

}  // namespace probelab::num
