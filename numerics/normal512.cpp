// box_muller and normal_samples with AVX-512 (detail/avx512.h): the steps of
// detail/box_muller_steps.h on eight lanes instead of normal.cpp's four, so every value has the
// same bits. Compiled with AVX-512 F and DQ (numerics/CMakeLists.txt); used
// only where the CPU has them.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wuninitialized reports.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "numerics/detail/box_muller_steps.h"
#include "numerics/detail/avx512.h"

namespace probelab::num::detail {
namespace {

// Eight lanes of AVX-512 (detail/box_muller_steps.h).
struct Avx512 {
  using V = __m512d;
  using I = __m512i;
  static V set(double x) { return _mm512_set1_pd(x); }
  static V add(V a, V b) { return _mm512_add_pd(a, b); }
  static V sub(V a, V b) { return _mm512_sub_pd(a, b); }
  static V mul(V a, V b) { return _mm512_mul_pd(a, b); }
  static V div(V a, V b) { return _mm512_div_pd(a, b); }
  static V sqrt(V a) { return _mm512_sqrt_pd(a); }
  static V fnmadd(V a, V b, V c) { return _mm512_fnmadd_pd(a, b, c); }
  static V round(V a) { return _mm512_roundscale_pd(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static I iset(std::int64_t x) { return _mm512_set1_epi64(x); }
  static I iadd(I a, I b) { return _mm512_add_epi64(a, b); }
  static I iand(I a, I b) { return _mm512_and_si512(a, b); }
  static I ior(I a, I b) { return _mm512_or_si512(a, b); }
  static I ixor(I a, I b) { return _mm512_xor_si512(a, b); }
  static I srli(I a, unsigned k) { return _mm512_srli_epi64(a, k); }
  static I slli(I a, unsigned k) { return _mm512_slli_epi64(a, k); }
  static V as_d(I a) { return _mm512_castsi512_pd(a); }
  static I as_i(V a) { return _mm512_castpd_si512(a); }
  static I quadrant(V q) { return iand(_mm512_cvtepi32_epi64(_mm512_cvtpd_epi32(q)), iset(3)); }
  static V odd_select(I n, V a, V b) { return _mm512_mask_blend_pd(_mm512_test_epi64_mask(n, iset(1)), a, b); }
};
using Steps = BoxMullerSteps<Avx512>;
using V = __m512d;
inline V set(double x) { return Avx512::set(x); }

// unit_interval of eight draws: the 53-bit integer converts exactly.
[[gnu::always_inline]] inline V units8(const std::uint64_t* d) {
  return Avx512::mul(_mm512_cvtepu64_pd(_mm512_srli_epi64(_mm512_loadu_si512(d), 11)), set(0x1p-53));
}

// normal_samples of the eight pairs in draws d[0..15]: o[0..15] = c0 s0 c1 s1 ... in FP32.
[[gnu::always_inline]] inline void normals16(const std::uint64_t* d, V mean, V stddev, float* o) {
  const V a = units8(d), b = units8(d + 8);
  const V u1 = Avx512::sub(set(1.0), _mm512_permutex2var_pd(a, _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), b));
  const V u2 = _mm512_permutex2var_pd(a, _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15), b);
  V c, s;
  Steps::pairs(u1, u2, mean, stddev, c, s);
  // Rounded to FP32 to nearest; unpack gives (c0 s0 c1 s1 | c4 s4 c5 s5) and (c2 s2 c3 s3 | c6 ...).
  const __m256 cf = _mm512_cvtpd_ps(c), sf = _mm512_cvtpd_ps(s);
  const __m256 lo = _mm256_unpacklo_ps(cf, sf), hi = _mm256_unpackhi_ps(cf, sf);
  _mm256_storeu_ps(o, _mm256_permute2f128_ps(lo, hi, 0x20));
  _mm256_storeu_ps(o + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
}

}  // namespace

void box_muller_avx512(std::span<const double> u1, std::span<const double> u2, double mean, double stddev,
                       std::span<double> c, std::span<double> s) {
  const std::size_t n = u1.size();
  const V m = set(mean), sd = set(stddev);
  V x, y;
  for (std::size_t i = 0; i < n; i += 8) {
    const auto k = static_cast<unsigned>(std::min<std::size_t>(8, n - i));
    const __mmask8 lanes = static_cast<__mmask8>((1u << k) - 1);
    // A short tail is padded with the harmless arguments u1 = 1, u2 = 0.
    Steps::pairs(_mm512_mask_loadu_pd(set(1.0), lanes, u1.data() + i), _mm512_maskz_loadu_pd(lanes, u2.data() + i), m,
                sd, x, y);
    _mm512_mask_storeu_pd(c.data() + i, lanes, x);
    _mm512_mask_storeu_pd(s.data() + i, lanes, y);
  }
}

void normal_samples_avx512(Mt19937_64& rng, double mean, double stddev, std::span<float> out) {
  const V m = set(mean), sd = set(stddev);
  normal_chunks<16>(rng, out, [&](const std::uint64_t* d, float* o) { normals16(d, m, sd, o); });
}

}  // namespace probelab::num::detail
