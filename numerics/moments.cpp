// Finite-element magnitudes in one pass (moments.h), eight elements per step: NaN/Inf lanes are
// masked out of max and min, and each element's square is added to the running sum of its lane
// (index mod 8: the block's lanes rotated by where the call starts), a masked-out lane adding +0,
// which leaves a sum of squares unchanged. The tail is a block padded with copies of its first
// element that count for nothing.
#include "numerics/moments.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>

namespace probelab::num {
namespace {

// Eight elements widened to FP32 (exact for FP16 and BF16), and one.
struct F32Lanes {
  static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
  static float one(const float* p) { return *p; }
};
struct F16Lanes {
  static __m256 load8(const f16* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static float one(const f16* p) { return _cvtsh_ss(p->bits); }
};
struct BF16Lanes {
  static __m256 load8(const bf16* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static float one(const bf16* p) { return std::bit_cast<float>(static_cast<std::uint32_t>(p->bits) << 16); }
};

// sum_sq of the lanes (moments.h): pairwise, in a fixed order.
double lane_sum(const std::array<double, 8>& l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

// Lists the non-finite lanes `bad` of the block at `index`.
[[gnu::noinline]] void note_nonfinite(FiniteMoments& m, unsigned bad, std::uint64_t index, std::size_t listed) {
  for (; bad != 0; bad &= bad - 1) {
    if (m.nonfinite.size() < listed) m.nonfinite.push_back(index + static_cast<unsigned>(std::countr_zero(bad)));
    ++m.nonfinite_count;
  }
}

template <class Lanes, class T>
void accumulate_as(FiniteMoments& m, std::span<const T> x, std::size_t listed) {
  const std::size_t n = x.size();
  const std::uint64_t base = m.elements;
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF), max_finite = _mm256_set1_epi32(0x7F7FFFFF);
  __m256 vmax = _mm256_setzero_ps(), vmin = inf;
  // Lane k of a block is element index base + i + k: sum lane (base + k) mod 8.
  const std::size_t rot = base % 8;
  alignas(32) std::array<double, 8> lanes;
  for (std::size_t k = 0; k < 8; ++k) lanes[k] = m.sq_lanes[(rot + k) % 8];
  __m256d sq_lo = _mm256_load_pd(lanes.data()), sq_hi = _mm256_load_pd(lanes.data() + 4);
  const __m256i lane_bit_lo = _mm256_setr_epi64x(1, 2, 4, 8), lane_bit_hi = _mm256_setr_epi64x(16, 32, 64, 128);
  std::uint64_t count = 0;
  // Lanes `valid` of the eight at i (the rest: copies of valid ones, not counted).
  const auto block = [&](__m256 v, std::size_t i, unsigned valid) {
    __m256 a = _mm256_and_ps(v, _mm256_castsi256_ps(abs_mask));
    const __m256i nonfinite = _mm256_cmpgt_epi32(_mm256_castps_si256(a), max_finite);
    const auto bad_lanes = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(nonfinite)));
    const unsigned bad = bad_lanes & valid, good = valid & ~bad;
    if (bad != 0) note_nonfinite(m, bad, base + i, listed);
    if (bad_lanes != 0) {  // NaN/Inf lanes leave max and min alone
      v = _mm256_blendv_ps(v, inf, _mm256_castsi256_ps(nonfinite));
      a = _mm256_andnot_ps(_mm256_castsi256_ps(nonfinite), a);
    }
    vmax = _mm256_max_ps(vmax, a);
    vmin = _mm256_min_ps(vmin, v);
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    __m256d q_lo = _mm256_mul_pd(lo, lo), q_hi = _mm256_mul_pd(hi, hi);  // exact: 24-bit significands
    if (good != 0xFF) {  // the lanes that do not count add +0
      const __m256i g = _mm256_set1_epi64x(good);
      q_lo = _mm256_and_pd(q_lo, _mm256_castsi256_pd(_mm256_cmpeq_epi64(_mm256_and_si256(g, lane_bit_lo), lane_bit_lo)));
      q_hi = _mm256_and_pd(q_hi, _mm256_castsi256_pd(_mm256_cmpeq_epi64(_mm256_and_si256(g, lane_bit_hi), lane_bit_hi)));
    }
    sq_lo = _mm256_add_pd(sq_lo, q_lo);
    sq_hi = _mm256_add_pd(sq_hi, q_hi);
    count += static_cast<unsigned>(std::popcount(good));
  };
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) block(Lanes::load8(x.data() + i), i, 0xFF);
  if (i < n) {
    std::array<T, 8> tail;
    tail.fill(x[i]);
    std::copy(x.begin() + static_cast<std::ptrdiff_t>(i), x.end(), tail.begin());
    block(Lanes::load8(tail.data()), i, (1u << (n - i)) - 1);
  }

  alignas(32) std::array<float, 8> mx, mn;
  _mm256_store_ps(mx.data(), vmax);
  _mm256_store_ps(mn.data(), vmin);
  float max_abs = 0, min = std::numeric_limits<float>::infinity();
  for (std::size_t k = 0; k < 8; ++k) {
    max_abs = std::max(max_abs, mx[k]);
    min = std::min(min, mn[k]);
  }
  if (count > 0) {
    if (min == 0) {  // the first zero element is the minimum the scalar loop keeps
      std::size_t z = 0;
      while (Lanes::one(x.data() + z) != 0) ++z;
      min = Lanes::one(x.data() + z);
    }
    m.max_abs = std::max(m.max_abs, static_cast<double>(max_abs));
    if (m.count == 0 || min < m.min) m.min = min;
    m.count += count;
  }
  _mm256_store_pd(lanes.data(), sq_lo);
  _mm256_store_pd(lanes.data() + 4, sq_hi);
  for (std::size_t k = 0; k < 8; ++k) m.sq_lanes[(rot + k) % 8] = lanes[k];
  m.sum_sq = lane_sum(m.sq_lanes);
  m.elements += n;
}

}  // namespace

void accumulate(FiniteMoments& m, std::span<const float> x, std::size_t listed) {
  accumulate_as<F32Lanes>(m, x, listed);
}
void accumulate(FiniteMoments& m, std::span<const f16> x, std::size_t listed) {
  accumulate_as<F16Lanes>(m, x, listed);
}
void accumulate(FiniteMoments& m, std::span<const bf16> x, std::size_t listed) {
  accumulate_as<BF16Lanes>(m, x, listed);
}

void accumulate(FiniteMoments& m, std::span<const double> x, std::size_t listed) {
  for (double v : x) {
    if (!std::isfinite(v)) {
      if (m.nonfinite.size() < listed) m.nonfinite.push_back(m.elements);
      ++m.nonfinite_count;
    } else {
      m.max_abs = std::max(m.max_abs, std::fabs(v));
      m.min = m.count == 0 ? v : std::min(m.min, v);
      m.sq_lanes[m.elements % 8] += v * v;
      ++m.count;
    }
    ++m.elements;
  }
  m.sum_sq = lane_sum(m.sq_lanes);
}

}  // namespace probelab::num
