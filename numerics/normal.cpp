#include "numerics/normal.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "numerics/detail/avx512.h"
#include "numerics/detail/box_muller_steps.h"

namespace probelab::num {
namespace {

// Four lanes of AVX2 (detail/box_muller_steps.h).
struct Avx2 {
  using V = __m256d;
  using I = __m256i;
  static V set(double x) { return _mm256_set1_pd(x); }
  static V add(V a, V b) { return _mm256_add_pd(a, b); }
  static V sub(V a, V b) { return _mm256_sub_pd(a, b); }
  static V mul(V a, V b) { return _mm256_mul_pd(a, b); }
  static V div(V a, V b) { return _mm256_div_pd(a, b); }
  static V sqrt(V a) { return _mm256_sqrt_pd(a); }
  static V fnmadd(V a, V b, V c) { return _mm256_fnmadd_pd(a, b, c); }
  static V round(V a) { return _mm256_round_pd(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static I iset(std::int64_t x) { return _mm256_set1_epi64x(x); }
  static I iadd(I a, I b) { return _mm256_add_epi64(a, b); }
  static I iand(I a, I b) { return _mm256_and_si256(a, b); }
  static I ior(I a, I b) { return _mm256_or_si256(a, b); }
  static I ixor(I a, I b) { return _mm256_xor_si256(a, b); }
  static I srli(I a, int k) { return _mm256_srli_epi64(a, k); }
  static I slli(I a, int k) { return _mm256_slli_epi64(a, k); }
  static V as_d(I a) { return _mm256_castsi256_pd(a); }
  static I as_i(V a) { return _mm256_castpd_si256(a); }
  static I quadrant(V q) { return iand(_mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(q)), iset(3)); }
  static V odd_select(I n, V a, V b) { return _mm256_blendv_pd(a, b, as_d(slli(n, 63))); }
};
using Steps = detail::BoxMullerSteps<Avx2>;

inline __m256d set(double x) { return Avx2::set(x); }
inline __m256d add(__m256d a, __m256d b) { return Avx2::add(a, b); }
inline __m256d sub(__m256d a, __m256d b) { return Avx2::sub(a, b); }
inline __m256d mul(__m256d a, __m256d b) { return Avx2::mul(a, b); }

// unit_interval of four draws: (d >> 11) * 2^-53, the 53-bit integer converted exactly as twice
// its upper 52 bits plus its lowest bit, each through the 2^52 exponent trick.
[[gnu::always_inline]] inline __m256d units4(__m256i d) {
  const __m256i v = _mm256_srli_epi64(d, 11);
  const __m256i magic = _mm256_set1_epi64x(0x4330000000000000);
  const __m256d hi = sub(_mm256_castsi256_pd(_mm256_or_si256(_mm256_srli_epi64(v, 1), magic)), set(0x1p52));
  const __m256d lo = sub(_mm256_castsi256_pd(_mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi64x(1)), magic)),
                         set(0x1p52));
  return mul(add(add(hi, hi), lo), set(0x1p-53));
}

// The uniforms of the four pairs in draws d[0..7] (uniform_pairs).
[[gnu::always_inline]] inline void pairs4(const std::uint64_t* d, bool complement, __m256d& u1, __m256d& u2) {
  // Draws 0 .. 7: the first of each pair in the even lanes.
  const __m256d a = units4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(d)));
  const __m256d b = units4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(d + 4)));
  // unpacklo: (a0, b0, a2, b2), unpackhi: (a1, b1, a3, b3); lanes 0 2 1 3 restore the pair order.
  u1 = _mm256_permute4x64_pd(_mm256_unpacklo_pd(a, b), 0xD8);
  u2 = _mm256_permute4x64_pd(_mm256_unpackhi_pd(a, b), 0xD8);
  if (complement) u1 = sub(set(1.0), u1);
}

// normal_samples of the four pairs in draws d[0..7]: o[0..7] = c0 s0 c1 s1 c2 s2 c3 s3 in FP32.
[[gnu::always_inline]] inline void normals8(const std::uint64_t* d, __m256d mean, __m256d stddev, float* o) {
  __m256d u1, u2, c, s;
  pairs4(d, true, u1, u2);
  Steps::pairs(u1, u2, mean, stddev, c, s);
  // Rounded to FP32 to nearest (as static_cast), cosine and sine sides interleaved.
  const __m128 cf = _mm256_cvtpd_ps(c), sf = _mm256_cvtpd_ps(s);
  _mm_storeu_ps(o, _mm_unpacklo_ps(cf, sf));
  _mm_storeu_ps(o + 4, _mm_unpackhi_ps(cf, sf));
}

}  // namespace

void uniform_pairs(std::span<const std::uint64_t> draws, bool complement, std::span<double> u1, std::span<double> u2) {
  const std::size_t n = u1.size();
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m256d a, b;
    pairs4(draws.data() + 2 * i, complement, a, b);
    _mm256_storeu_pd(u1.data() + i, a);
    _mm256_storeu_pd(u2.data() + i, b);
  }
  for (; i < n; ++i) {
    const double x = static_cast<double>(draws[2 * i] >> 11) * 0x1.0p-53;
    u1[i] = complement ? 1.0 - x : x;
    u2[i] = static_cast<double>(draws[2 * i + 1] >> 11) * 0x1.0p-53;
  }
}

void normal_samples(Mt19937_64& rng, double mean, double stddev, std::span<float> out) {
  if (detail::avx512_kernels()) return detail::normal_samples_avx512(rng, mean, stddev, out);
  const __m256d m = set(mean), sd = set(stddev);
  detail::normal_chunks<8>(rng, out, [&](const std::uint64_t* d, float* o) { normals8(d, m, sd, o); });
}

void box_muller(std::span<const double> u1, std::span<const double> u2, double mean, double stddev,
                std::span<double> c, std::span<double> s) {
  if (detail::avx512_kernels()) return detail::box_muller_avx512(u1, u2, mean, stddev, c, s);
  const std::size_t n = u1.size();
  const __m256d m = set(mean), sd = set(stddev);
  std::size_t i = 0;
  __m256d x, y;
  for (; i + 4 <= n; i += 4) {
    Steps::pairs(_mm256_loadu_pd(u1.data() + i), _mm256_loadu_pd(u2.data() + i), m, sd, x, y);
    _mm256_storeu_pd(c.data() + i, x);
    _mm256_storeu_pd(s.data() + i, y);
  }
  if (i == n) return;
  alignas(32) double a[4] = {1, 1, 1, 1}, b[4] = {}, xs[4], ys[4];  // the tail, padded with harmless arguments
  std::copy(u1.begin() + static_cast<std::ptrdiff_t>(i), u1.end(), a);
  std::copy(u2.begin() + static_cast<std::ptrdiff_t>(i), u2.end(), b);
  Steps::pairs(_mm256_load_pd(a), _mm256_load_pd(b), m, sd, x, y);
  _mm256_store_pd(xs, x);
  _mm256_store_pd(ys, y);
  std::copy(xs, xs + (n - i), c.begin() + static_cast<std::ptrdiff_t>(i));
  std::copy(ys, ys + (n - i), s.begin() + static_cast<std::ptrdiff_t>(i));
}

double det_log(double x) {
  double out[4];
  _mm256_storeu_pd(out, Steps::log(set(x)));
  return out[0];
}

void det_sincos(double t, double& s, double& c) {
  __m256d sv, cv;
  Steps::sincos(set(t), sv, cv);
  s = _mm256_cvtsd_f64(sv);
  c = _mm256_cvtsd_f64(cv);
}

}  // namespace probelab::num
