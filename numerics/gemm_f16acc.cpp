// FP16-accumulation GEMM kernel (gemm.h, Accum::Fp16Rn and Accum::Fp16ViaFp32) for FP16 operands,
// vectorised across output columns: each lane carries one FP16 accumulator as an exact FP32 value.
//
// Every step computes s = RN32(acc + a*b) with one FMA (a*b is exact in FP32) and rounds it to
// FP16 precision (RN16, by integer adds on the FP32 pattern in the FP16 normal range). For Fp16ViaFp32 that is the definition. For Fp16Rn it is the correctly
// rounded RN16(acc + a*b) except when s is exactly an FP16 midpoint: rounding twice to nearest
// goes wrong only when the first rounding lands on a midpoint of the second format (it cannot jump
// over one, as midpoints of FP16 are FP32 numbers). So a step whose s has the midpoint bit pattern
// (its 13 bits below the FP16 unit in the last place are 1000000000000, in the FP16 normal range)
// is redone exactly: TwoSum gives the rounding error of s, s moves one FP32 ulp towards the exact
// sum (round to odd), and RN16 of that is RN16(acc + a*b) (24 >= 11 + 2). Midpoints are rare
// (about one step in 4096 per lane), so the fast path costs an AND and a compare per vector.
//
// While an accumulator stays in the plain range [2^-14, 65520) or at an exact zero, no Mode effect
// and no flag can occur. A row of the tile (3 rows x 16 columns, 6 accumulator vectors) whose
// accumulators ever left it is redone by the exact kernel below, which tracks the range per lane
// and rounds with F16C; lanes that left the plain range are marked for the caller's scalar
// recomputation (values and flags).
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "numerics/detail/gemm_internal.h"
#include "numerics/detail/simd.h"

namespace probelab::num::detail {
namespace {

constexpr std::int64_t kCols = kPanelB;

inline __m256 round16(__m256 s) noexcept {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// RN32(acc + p) moved one ulp towards the exact sum when it is inexact (round to odd).
inline __m256 round_to_odd_sum(__m256 a, __m256 b, __m256 acc) noexcept {
  const __m256 p = _mm256_mul_ps(a, b);
  const __m256 s = _mm256_add_ps(acc, p);
  const __m256 bv = _mm256_sub_ps(s, acc);
  const __m256 err = _mm256_add_ps(_mm256_sub_ps(acc, _mm256_sub_ps(s, bv)), _mm256_sub_ps(p, bv));
  // Truncate toward zero (one ulp down in magnitude when |exact| < |s|), set the last bit; only
  // where the sum was inexact.
  const __m256i bits = _mm256_castps_si256(s);
  const __m256i toward = _mm256_srai_epi32(_mm256_xor_si256(_mm256_castps_si256(err), bits), 31);
  const __m256i odd = _mm256_or_si256(_mm256_add_epi32(bits, toward), _mm256_set1_epi32(1));
  const __m256 inexact = _mm256_cmp_ps(err, _mm256_setzero_ps(), _CMP_NEQ_OQ);
  return _mm256_blendv_ps(s, _mm256_castsi256_ps(odd), inexact);
}

// --- the exact kernel: per-lane range tracking ----------------------------------------------------

// Per lane: lo = min over steps of (|bits| - 1) as unsigned (zero wraps to the maximum, so exact
// zeros never count as tiny), hi = max over steps of |bits|. A lane needs the scalar path iff some
// step had 0 < |x| < 2^-14 (lo < bits(2^-14) - 1) or |x| >= 65520 (hi >= bits(65520)).
struct Range {
  __m256i lo, hi;
};

inline void track(__m256 pre, Range& range) noexcept {
  const __m256i mag = _mm256_and_si256(_mm256_castps_si256(pre), _mm256_set1_epi32(0x7FFFFFFF));
  range.lo = _mm256_min_epu32(range.lo, _mm256_sub_epi32(mag, _mm256_set1_epi32(1)));
  range.hi = _mm256_max_epi32(range.hi, mag);
}

inline __m256i tiny_lanes(__m256i lo) noexcept {
  return _mm256_cmpeq_epi32(_mm256_min_epu32(lo, _mm256_set1_epi32(0x387FFFFE)), lo);  // lo <= bits(2^-14) - 2
}

// Lanes whose range left the plain interval.
inline int bad_lanes(const Range& r) noexcept {
  const __m256i huge = _mm256_cmpgt_epi32(r.hi, _mm256_set1_epi32(0x477FEFFF));  // hi >= bits(65520)
  return _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_or_si256(tiny_lanes(r.lo), huge)));
}

void mark(int mask, std::int64_t ncols, std::uint8_t* attention) {
  for (int j = 0; j < 8; ++j) {
    if (!((mask >> j) & 1)) continue;
    if (j < ncols) attention[j] = 1;
  }
}

void store_row(const __m256 acc[2], std::uint16_t* out, std::int64_t ncols) {
  alignas(32) std::uint16_t h[kCols];
  _mm_store_si128(reinterpret_cast<__m128i*>(h), _mm256_cvtps_ph(acc[0], _MM_FROUND_TO_NEAREST_INT));
  _mm_store_si128(reinterpret_cast<__m128i*>(h + 8), _mm256_cvtps_ph(acc[1], _MM_FROUND_TO_NEAREST_INT));
  std::copy(h, h + ncols, out);
}

// One row x 16 columns, every step exact, range tracked per lane.
template <bool kRn>
void row_exact(std::int64_t K, const float* a, const float* bp, std::uint16_t* out, std::int64_t ncols,
               std::uint8_t* attention) {
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  Range range[2] = {{_mm256_set1_epi32(-1), _mm256_setzero_si256()}, {_mm256_set1_epi32(-1), _mm256_setzero_si256()}};
  for (std::int64_t k = 0; k < K; ++k) {
    const __m256 av = _mm256_broadcast_ss(a + k * kPanelA);
    for (int j = 0; j < 2; ++j) {
      const __m256 b = _mm256_load_ps(bp + k * kCols + 8 * j);
      const __m256 pre = kRn ? round_to_odd_sum(av, b, acc[j]) : _mm256_fmadd_ps(av, b, acc[j]);
      track(pre, range[j]);
      acc[j] = round16(pre);
    }
  }
  store_row(acc, out, ncols);
  mark(bad_lanes(range[0]), ncols, attention);
  mark(bad_lanes(range[1]), ncols - 8, attention + 8);
}

// --- the fast kernel --------------------------------------------------------------------------------

// RN16 of an FP32 value in the FP16 normal range, as an FP32 value: round to nearest even at
// bit 13 of the pattern with integer adds (shorter latency than the F16C round trip). Outside
// that range the result is meaningless; the range tracking sends such lanes elsewhere.
inline __m256 round16_normal(__m256i bits) noexcept {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 13), _mm256_set1_epi32(1));
  const __m256i up = _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0xFFF)));
  return _mm256_castsi256_ps(_mm256_and_si256(up, _mm256_set1_epi32(~0x1FFF)));
}

// R rows x 16 columns. a: rows of an A panel (kPanelA floats per k); bp: a B panel (16 per k).
// Per row, the minimum of |bits| - 1 (tiny values) and the maximum of |bits| (values >= 65520)
// over its lanes and steps live in memory (L1), so that all 2R accumulators stay in registers.
// A row that left the plain range anywhere is redone by row_exact.
template <int R, bool kRn>
void tile(std::int64_t K, const float* a, const float* bp, std::uint16_t* out, std::int64_t N, std::int64_t ncols,
          std::uint8_t* attention) {
  __m256 acc[R][2];
  alignas(32) std::uint32_t lo_mem[R][8], hi_mem[R][8];
  for (int i = 0; i < R; ++i) {
    acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    _mm256_store_si256(reinterpret_cast<__m256i*>(lo_mem[i]), _mm256_set1_epi32(-1));
    _mm256_store_si256(reinterpret_cast<__m256i*>(hi_mem[i]), _mm256_setzero_si256());
  }
  for (std::int64_t k = 0; k < K; ++k) {
    const float* bk = bp + k * kCols;
    const __m256 b0 = _mm256_load_ps(bk), b1 = _mm256_load_ps(bk + 8);
#pragma GCC unroll 3
    for (int i = 0; i < R; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + k * kPanelA + i);
      __m256 s0 = _mm256_fmadd_ps(av, b0, acc[i][0]);
      __m256 s1 = _mm256_fmadd_ps(av, b1, acc[i][1]);
      __m256i x0 = _mm256_castps_si256(s0), x1 = _mm256_castps_si256(s1);
      if constexpr (kRn) {
        const __m256i low13 = _mm256_set1_epi32(0x1FFF), half = _mm256_set1_epi32(0x1000);
        const __m256i mid = _mm256_or_si256(_mm256_cmpeq_epi32(_mm256_and_si256(x0, low13), half),
                                            _mm256_cmpeq_epi32(_mm256_and_si256(x1, low13), half));
        if (!_mm256_testz_si256(mid, mid)) [[unlikely]] {
          // One FP32 ulp towards the exact sum (same exponent: the range tests see the same).
          x0 = _mm256_castps_si256(round_to_odd_sum(av, b0, acc[i][0]));
          x1 = _mm256_castps_si256(round_to_odd_sum(av, b1, acc[i][1]));
        }
      }
      const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF), one = _mm256_set1_epi32(1);
      const __m256i m0 = _mm256_and_si256(x0, abs_mask), m1 = _mm256_and_si256(x1, abs_mask);
      const __m256i lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo_mem[i]));
      const __m256i hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi_mem[i]));
      _mm256_store_si256(reinterpret_cast<__m256i*>(lo_mem[i]),
                         _mm256_min_epu32(lo, _mm256_min_epu32(_mm256_sub_epi32(m0, one), _mm256_sub_epi32(m1, one))));
      _mm256_store_si256(reinterpret_cast<__m256i*>(hi_mem[i]), _mm256_max_epi32(hi, _mm256_max_epi32(m0, m1)));
      acc[i][0] = round16_normal(x0);
      acc[i][1] = round16_normal(x1);
    }
  }
  for (int i = 0; i < R; ++i) {
    std::uint8_t* att = attention + i * N;
    const Range r{_mm256_load_si256(reinterpret_cast<const __m256i*>(lo_mem[i])),
                  _mm256_load_si256(reinterpret_cast<const __m256i*>(hi_mem[i]))};
    if (bad_lanes(r) != 0) {
      row_exact<kRn>(K, a + i, bp, out + i * N, ncols, att);
      continue;
    }
    store_row(acc[i], out + i * N, ncols);
  }
}

template <bool kRn>
void run(std::int64_t M, std::int64_t N, const Packed& A, const Packed& B, std::uint16_t* R,
         std::uint8_t* attention) {
  const std::int64_t K = A.K;
  for (std::int64_t n0 = 0; n0 < N; n0 += kCols) {
    const std::int64_t nc = std::min(kCols, N - n0);
    const float* bp = B.panel(n0 / kCols);
    for (std::int64_t m = 0; m < M; m += 3) {  // two 3-row halves per 6-row A panel
      const float* a = A.panel(m / kPanelA) + m % kPanelA;
      std::uint16_t* out = R + m * N + n0;
      std::uint8_t* att = attention + m * N + n0;
      switch (std::min<std::int64_t>(3, M - m)) {
        case 3: tile<3, kRn>(K, a, bp, out, N, nc, att); break;
        case 2: tile<2, kRn>(K, a, bp, out, N, nc, att); break;
        default: tile<1, kRn>(K, a, bp, out, N, nc, att); break;
      }
    }
  }
}

}  // namespace

void gemm_f16acc_kernel(std::int64_t M, std::int64_t N, const Packed& A, const Packed& B, Accum accum,
                        std::uint16_t* R, std::vector<std::uint8_t>& attention) {
  attention.assign(static_cast<std::size_t>(M * N), 0);
  if (accum == Accum::Fp16Rn) run<true>(M, N, A, B, R, attention.data());
  else run<false>(M, N, A, B, R, attention.data());
}

}  // namespace probelab::num::detail
