// Internal: the steps of num::box_muller (normal.h) on a vector of lanes, written once for the
// AVX2 (normal.cpp) and the AVX-512 (normal512.cpp) kernels, which therefore do the same IEEE
// operations in the same order per lane and give the same bits. `T` supplies the lane types and
// operations, each one instruction's exact meaning:
//   V, I: lanes of doubles and of 64-bit integers;
//   set(x), add, sub, mul, div, sqrt: IEEE double operations, rounded to nearest;
//   fnmadd(a, b, c) = c - a * b rounded once; round(x): to the nearest integer, ties to even;
//   iset(x), iadd, iand, ior, ixor, srli(a, k), slli(a, k): 64-bit integer operations;
//   as_d / as_i: the same bits reinterpreted; quadrant(q) = (int64) q & 3 for integral q in
//   [0, 4]; odd_select(n, a, b): b in the lanes where n is odd, a elsewhere.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>

#include "numerics/mt19937.h"

namespace probelab::num::detail {

// fdlibm e_log.c: ln 2 in two parts and the minimax polynomial of (ln((1+s)/(1-s)) - 2s) / s.
inline constexpr double kLn2Hi = 6.93147180369123816490e-01, kLn2Lo = 1.90821492927058770002e-10;
inline constexpr double kLg1 = 6.666666666666735130e-01, kLg2 = 3.999999999940941908e-01,
                        kLg3 = 2.857142874366239149e-01, kLg4 = 2.222219843214978396e-01,
                        kLg5 = 1.818357216161805012e-01, kLg6 = 1.531383769920937332e-01,
                        kLg7 = 1.479819860511658591e-01;
// fdlibm k_sin.c and k_cos.c: sin and cos on [-pi/4, pi/4].
inline constexpr double kS1 = -1.66666666666666324348e-01, kS2 = 8.33333333332248946124e-03,
                        kS3 = -1.98412698298579493134e-04, kS4 = 2.75573137070700676789e-06,
                        kS5 = -2.50507602534068634195e-08, kS6 = 1.58969099521155010221e-10;
inline constexpr double kC1 = 4.16666666666666019037e-02, kC2 = -1.38888888888741095749e-03,
                        kC3 = 2.48015872894767294178e-05, kC4 = -2.75573143513906633035e-07,
                        kC5 = 2.08757232129817482790e-09, kC6 = -1.13596475577881948265e-11;
// pi/2 as a double and the double nearest the rest; 2/pi.
inline constexpr double kPio2Hi = 1.5707963267948966, kPio2Lo = 6.123233995736766e-17,
                        kTwoOverPi = 0.6366197723675814;

template <class T>
struct BoxMullerSteps {
  using V = typename T::V;
  using I = typename T::I;

  // ln x for positive normal x: x = 2^k m with m in [sqrt(2)/2, sqrt(2)), f = m - 1, s = f / (2 + f).
  [[gnu::always_inline]] static V log(V x) {
    I ix = T::iadd(T::as_i(x), T::iset(0x3ff0000000000000 - 0x3fe6a09e00000000));
    // k + 1023 is the exponent field of ix; as a double by the 2^52 trick.
    const I e = T::srli(ix, 52);
    const V k = T::sub(T::as_d(T::ior(e, T::iset(0x4330000000000000))), T::set(0x1p52 + 1023.0));
    ix = T::iadd(T::iand(ix, T::iset(0x000fffffffffffff)), T::iset(0x3fe6a09e00000000));
    const V f = T::sub(T::as_d(ix), T::set(1.0));
    const V hfsq = T::mul(T::mul(T::set(0.5), f), f);
    const V s = T::div(f, T::add(T::set(2.0), f));
    const V z = T::mul(s, s), w = T::mul(z, z);
    const V t1 = T::mul(w, T::add(T::set(kLg2), T::mul(w, T::add(T::set(kLg4), T::mul(w, T::set(kLg6))))));
    const V t2 = T::mul(
        z, T::add(T::set(kLg1), T::mul(w, T::add(T::set(kLg3), T::mul(w, T::add(T::set(kLg5), T::mul(w, T::set(kLg7))))))));
    const V r = T::add(t2, t1);
    return T::add(T::add(T::sub(T::add(T::mul(s, T::add(hfsq, r)), T::mul(k, T::set(kLn2Lo))), hfsq), f),
                  T::mul(k, T::set(kLn2Hi)));
  }

  [[gnu::always_inline]] static V kernel_sin(V x, V z) {
    const V w = T::mul(z, z);
    const V r = T::add(T::add(T::set(kS2), T::mul(z, T::add(T::set(kS3), T::mul(z, T::set(kS4))))),
                       T::mul(T::mul(z, w), T::add(T::set(kS5), T::mul(z, T::set(kS6)))));
    return T::add(x, T::mul(T::mul(z, x), T::add(T::set(kS1), T::mul(z, r))));
  }

  [[gnu::always_inline]] static V kernel_cos(V z) {
    const V w = T::mul(z, z);
    const V r = T::add(T::mul(z, T::add(T::set(kC1), T::mul(z, T::add(T::set(kC2), T::mul(z, T::set(kC3)))))),
                       T::mul(T::mul(w, w), T::add(T::set(kC4), T::mul(z, T::add(T::set(kC5), T::mul(z, T::set(kC6)))))));
    const V hz = T::mul(T::set(0.5), z);
    const V one_minus = T::sub(T::set(1.0), hz);
    return T::add(one_minus, T::add(T::sub(T::sub(T::set(1.0), one_minus), hz), T::mul(z, r)));
  }

  // sin and cos of t in [0, 2 pi]: t = q pi/2 + r with q = round(2t/pi) in 0..4 and |r| <= pi/4
  // (plus rounding), r from two FMAs against pi/2 in two parts (error far below an ulp of r).
  [[gnu::always_inline]] static void sincos(V t, V& sin_t, V& cos_t) {
    const V q = T::round(T::mul(t, T::set(kTwoOverPi)));
    const V r = T::fnmadd(q, T::set(kPio2Lo), T::fnmadd(q, T::set(kPio2Hi), t));
    const V z = T::mul(r, r);
    const V sr = kernel_sin(r, z), cr = kernel_cos(z);
    // Quadrant n = q mod 4: sin = (S, C, -S, -C)[n], cos = (C, -S, -C, S)[n].
    const I n = T::quadrant(q);
    const I sign = T::iset(static_cast<std::int64_t>(0x8000000000000000ull));
    const I sin_neg = T::iand(T::slli(n, 62), sign);
    const I cos_neg = T::iand(T::slli(T::iadd(n, T::iset(1)), 62), sign);
    sin_t = T::as_d(T::ixor(T::as_i(T::odd_select(n, sr, cr)), sin_neg));
    cos_t = T::as_d(T::ixor(T::as_i(T::odd_select(n, cr, sr)), cos_neg));
  }

  // r = stddev * sqrt(-2 ln u1) and the angle 2 pi u2: c = mean + r cos, s = mean + r sin.
  [[gnu::always_inline]] static void pairs(V u1, V u2, V mean, V stddev, V& c, V& s) {
    const V r = T::mul(stddev, T::sqrt(T::mul(T::set(-2.0), log(u1))));
    V sin_t, cos_t;
    sincos(T::mul(T::set(2 * M_PI), u2), sin_t, cos_t);
    c = T::add(mean, T::mul(r, cos_t));
    s = T::add(mean, T::mul(r, sin_t));
  }
};

/// normal_samples (normal.h) from `group`, which turns kGroup consecutive draws (kGroup / 2
/// pairs) into kGroup FP32 values: draws in chunks of 256 pairs, so that they stay in a few
/// cache-resident kilobytes, and the last pairs padded with zero draws (u1 = 1, u2 = 0: harmless).
template <std::size_t kGroup, class Group>
[[gnu::always_inline]] inline void normal_chunks(Mt19937_64& rng, std::span<float> out, Group group) {
  constexpr std::size_t kChunk = 256;
  alignas(64) std::array<std::uint64_t, 2 * kChunk> draws;
  const std::size_t n = out.size(), pairs = (n + 1) / 2;
  for (std::size_t p0 = 0; p0 < pairs; p0 += kChunk) {
    const std::size_t k = std::min(kChunk, pairs - p0);
    rng.generate(std::span(draws).first(2 * k));
    float* o = out.data() + 2 * p0;
    const std::size_t len = std::min(2 * k, n - 2 * p0);  // values of this chunk
    std::size_t i = 0;                                    // its first value not yet written (= draw index)
    for (; i + kGroup <= len; i += kGroup) group(draws.data() + i, o + i);
    if (i == len) continue;
    alignas(64) std::array<std::uint64_t, kGroup> d{};
    std::copy(draws.begin() + static_cast<std::ptrdiff_t>(i), draws.begin() + static_cast<std::ptrdiff_t>(2 * k),
              d.begin());
    std::array<float, kGroup> v;
    group(d.data(), v.data());
    std::copy_n(v.begin(), len - i, o + i);
  }
}

}  // namespace probelab::num::detail
