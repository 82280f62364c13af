#include "numerics/normal.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

namespace probelab::num {
namespace {

// fdlibm e_log.c: ln 2 in two parts and the minimax polynomial of (ln((1+s)/(1-s)) - 2s) / s.
constexpr double kLn2Hi = 6.93147180369123816490e-01, kLn2Lo = 1.90821492927058770002e-10;
constexpr double kLg1 = 6.666666666666735130e-01, kLg2 = 3.999999999940941908e-01, kLg3 = 2.857142874366239149e-01,
                 kLg4 = 2.222219843214978396e-01, kLg5 = 1.818357216161805012e-01, kLg6 = 1.531383769920937332e-01,
                 kLg7 = 1.479819860511658591e-01;
// fdlibm k_sin.c and k_cos.c: sin and cos on [-pi/4, pi/4].
constexpr double kS1 = -1.66666666666666324348e-01, kS2 = 8.33333333332248946124e-03,
                 kS3 = -1.98412698298579493134e-04, kS4 = 2.75573137070700676789e-06,
                 kS5 = -2.50507602534068634195e-08, kS6 = 1.58969099521155010221e-10;
constexpr double kC1 = 4.16666666666666019037e-02, kC2 = -1.38888888888741095749e-03,
                 kC3 = 2.48015872894767294178e-05, kC4 = -2.75573143513906633035e-07,
                 kC5 = 2.08757232129817482790e-09, kC6 = -1.13596475577881948265e-11;
// pi/2 as a double and the double nearest the rest; 2/pi.
constexpr double kPio2Hi = 1.5707963267948966, kPio2Lo = 6.123233995736766e-17, kTwoOverPi = 0.6366197723675814;

inline __m256d set(double x) { return _mm256_set1_pd(x); }
inline __m256d add(__m256d a, __m256d b) { return _mm256_add_pd(a, b); }
inline __m256d sub(__m256d a, __m256d b) { return _mm256_sub_pd(a, b); }
inline __m256d mul(__m256d a, __m256d b) { return _mm256_mul_pd(a, b); }

// ln x for positive normal x: x = 2^k m with m in [sqrt(2)/2, sqrt(2)), f = m - 1, s = f / (2 + f).
__m256d log4(__m256d x) {
  __m256i ix = _mm256_add_epi64(_mm256_castpd_si256(x), _mm256_set1_epi64x(0x3ff0000000000000 - 0x3fe6a09e00000000));
  // k + 1023 is the exponent field of ix; as a double by the 2^52 trick.
  const __m256i e = _mm256_srli_epi64(ix, 52);
  const __m256d k = sub(_mm256_castsi256_pd(_mm256_or_si256(e, _mm256_set1_epi64x(0x4330000000000000))),
                        set(0x1p52 + 1023.0));
  ix = _mm256_add_epi64(_mm256_and_si256(ix, _mm256_set1_epi64x(0x000fffffffffffff)),
                        _mm256_set1_epi64x(0x3fe6a09e00000000));
  const __m256d f = sub(_mm256_castsi256_pd(ix), set(1.0));
  const __m256d hfsq = mul(mul(set(0.5), f), f);
  const __m256d s = _mm256_div_pd(f, add(set(2.0), f));
  const __m256d z = mul(s, s), w = mul(z, z);
  const __m256d t1 = mul(w, add(set(kLg2), mul(w, add(set(kLg4), mul(w, set(kLg6))))));
  const __m256d t2 = mul(z, add(set(kLg1), mul(w, add(set(kLg3), mul(w, add(set(kLg5), mul(w, set(kLg7))))))));
  const __m256d r = add(t2, t1);
  return add(add(sub(add(mul(s, add(hfsq, r)), mul(k, set(kLn2Lo))), hfsq), f), mul(k, set(kLn2Hi)));
}

__m256d kernel_sin(__m256d x, __m256d z) {
  const __m256d w = mul(z, z);
  const __m256d r = add(add(set(kS2), mul(z, add(set(kS3), mul(z, set(kS4))))),
                        mul(mul(z, w), add(set(kS5), mul(z, set(kS6)))));
  return add(x, mul(mul(z, x), add(set(kS1), mul(z, r))));
}

__m256d kernel_cos(__m256d z) {
  const __m256d w = mul(z, z);
  const __m256d r = add(mul(z, add(set(kC1), mul(z, add(set(kC2), mul(z, set(kC3)))))),
                        mul(mul(w, w), add(set(kC4), mul(z, add(set(kC5), mul(z, set(kC6)))))));
  const __m256d hz = mul(set(0.5), z);
  const __m256d one_minus = sub(set(1.0), hz);
  return add(one_minus, add(sub(sub(set(1.0), one_minus), hz), mul(z, r)));
}

// sin and cos of t in [0, 2 pi]: t = q pi/2 + r with q = round(2t/pi) in 0..4 and |r| <= pi/4 (plus
// rounding), r from two FMAs against pi/2 in two parts (error far below an ulp of r).
void sincos4(__m256d t, __m256d& sin_t, __m256d& cos_t) {
  const __m256d q = _mm256_round_pd(mul(t, set(kTwoOverPi)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256d r = _mm256_fnmadd_pd(q, set(kPio2Lo), _mm256_fnmadd_pd(q, set(kPio2Hi), t));
  const __m256d z = mul(r, r);
  const __m256d sr = kernel_sin(r, z), cr = kernel_cos(z);
  // Quadrant n = q mod 4: sin = (S, C, -S, -C)[n], cos = (C, -S, -C, S)[n].
  const __m256i n = _mm256_and_si256(_mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(q)), _mm256_set1_epi64x(3));
  const __m256d swap = _mm256_castsi256_pd(_mm256_slli_epi64(n, 63));
  const __m256i sign = _mm256_set1_epi64x(static_cast<std::int64_t>(0x8000000000000000ull));
  const __m256d sin_neg = _mm256_castsi256_pd(_mm256_and_si256(_mm256_slli_epi64(n, 62), sign));
  const __m256d cos_neg = _mm256_castsi256_pd(
      _mm256_and_si256(_mm256_slli_epi64(_mm256_add_epi64(n, _mm256_set1_epi64x(1)), 62), sign));
  sin_t = _mm256_xor_pd(_mm256_blendv_pd(sr, cr, swap), sin_neg);
  cos_t = _mm256_xor_pd(_mm256_blendv_pd(cr, sr, swap), cos_neg);
}

void box_muller4(const double* u1, const double* u2, __m256d mean, __m256d stddev, double* c, double* s) {
  const __m256d r = mul(stddev, _mm256_sqrt_pd(mul(set(-2.0), log4(_mm256_loadu_pd(u1)))));
  __m256d sin_t, cos_t;
  sincos4(mul(set(2 * M_PI), _mm256_loadu_pd(u2)), sin_t, cos_t);
  _mm256_storeu_pd(c, add(mean, mul(r, cos_t)));
  _mm256_storeu_pd(s, add(mean, mul(r, sin_t)));
}

// unit_interval of four draws: (d >> 11) * 2^-53, the 53-bit integer converted exactly as twice
// its upper 52 bits plus its lowest bit, each through the 2^52 exponent trick.
inline __m256d units4(__m256i d) {
  const __m256i v = _mm256_srli_epi64(d, 11);
  const __m256i magic = _mm256_set1_epi64x(0x4330000000000000);
  const __m256d hi = sub(_mm256_castsi256_pd(_mm256_or_si256(_mm256_srli_epi64(v, 1), magic)), set(0x1p52));
  const __m256d lo = sub(_mm256_castsi256_pd(_mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi64x(1)), magic)),
                         set(0x1p52));
  return mul(add(add(hi, hi), lo), set(0x1p-53));
}

}  // namespace

void uniform_pairs(std::span<const std::uint64_t> draws, bool complement, std::span<double> u1, std::span<double> u2) {
  const std::size_t n = u1.size();
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    // Draws 2i .. 2i+7: the first of each pair in the even lanes.
    const __m256d a = units4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(draws.data() + 2 * i)));
    const __m256d b = units4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(draws.data() + 2 * i + 4)));
    // unpacklo: (a0, b0, a2, b2), unpackhi: (a1, b1, a3, b3); lanes 0 2 1 3 restore the pair order.
    __m256d first = _mm256_permute4x64_pd(_mm256_unpacklo_pd(a, b), 0xD8);
    const __m256d second = _mm256_permute4x64_pd(_mm256_unpackhi_pd(a, b), 0xD8);
    if (complement) first = sub(set(1.0), first);
    _mm256_storeu_pd(u1.data() + i, first);
    _mm256_storeu_pd(u2.data() + i, second);
  }
  for (; i < n; ++i) {
    const double x = static_cast<double>(draws[2 * i] >> 11) * 0x1.0p-53;
    u1[i] = complement ? 1.0 - x : x;
    u2[i] = static_cast<double>(draws[2 * i + 1] >> 11) * 0x1.0p-53;
  }
}

void normal_samples(Mt19937_64& rng, double mean, double stddev, std::span<float> out) {
  // In chunks of pairs, so that the temporaries stay in a few cache-resident kilobytes whatever
  // the tensor's size.
  constexpr std::size_t kChunk = 256;
  alignas(32) std::array<double, kChunk> u1, u2, c, s;
  alignas(32) std::array<std::uint64_t, 2 * kChunk> draws;
  const std::size_t n = out.size(), pairs = (n + 1) / 2;
  for (std::size_t p0 = 0; p0 < pairs; p0 += kChunk) {
    const std::size_t m = std::min(kChunk, pairs - p0);
    rng.generate(std::span(draws).first(2 * m));
    uniform_pairs(std::span(draws).first(2 * m), true, std::span(u1).first(m), std::span(u2).first(m));
    box_muller(std::span(u1).first(m), std::span(u2).first(m), mean, stddev, std::span(c).first(m),
               std::span(s).first(m));
    // Cosine and sine sides interleaved, rounded to FP32 to nearest (as static_cast).
    float* o = out.data() + 2 * p0;
    const std::size_t len = std::min(2 * m, n - 2 * p0);
    std::size_t i = 0;
    for (; 2 * i + 8 <= len; i += 4) {
      const __m128 cf = _mm256_cvtpd_ps(_mm256_load_pd(c.data() + i));
      const __m128 sf = _mm256_cvtpd_ps(_mm256_load_pd(s.data() + i));
      _mm_storeu_ps(o + 2 * i, _mm_unpacklo_ps(cf, sf));
      _mm_storeu_ps(o + 2 * i + 4, _mm_unpackhi_ps(cf, sf));
    }
    for (; 2 * i < len; ++i) {
      o[2 * i] = static_cast<float>(c[i]);
      if (2 * i + 1 < len) o[2 * i + 1] = static_cast<float>(s[i]);
    }
  }
}

void box_muller(std::span<const double> u1, std::span<const double> u2, double mean, double stddev,
                std::span<double> c, std::span<double> s) {
  const std::size_t n = u1.size();
  const __m256d m = set(mean), sd = set(stddev);
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) box_muller4(u1.data() + i, u2.data() + i, m, sd, c.data() + i, s.data() + i);
  if (i == n) return;
  double a[4] = {1, 1, 1, 1}, b[4] = {}, x[4], y[4];  // the tail, padded with harmless arguments
  std::copy(u1.begin() + static_cast<std::ptrdiff_t>(i), u1.end(), a);
  std::copy(u2.begin() + static_cast<std::ptrdiff_t>(i), u2.end(), b);
  box_muller4(a, b, m, sd, x, y);
  std::copy(x, x + (n - i), c.begin() + static_cast<std::ptrdiff_t>(i));
  std::copy(y, y + (n - i), s.begin() + static_cast<std::ptrdiff_t>(i));
}

double det_log(double x) {
  double out[4];
  _mm256_storeu_pd(out, log4(set(x)));
  return out[0];
}

void det_sincos(double t, double& s, double& c) {
  __m256d sv, cv;
  sincos4(set(t), sv, cv);
  s = _mm256_cvtsd_f64(sv);
  c = _mm256_cvtsd_f64(cv);
}

}  // namespace probelab::num
