// FP16-accumulation GEMM kernel (gemm.h, Accum::Fp16Rn and Accum::Fp16ViaFp32) for FP16 operands,
// vectorised across output columns: each lane carries one FP16 accumulator as an exact FP32 value.
//
// Scaled domain. A is multiplied by 2^-112 (exact), so each lane holds acc * 2^-112: FP16's normal
// range [2^-14, 65504] maps into FP32's normal range from its smallest normal 2^-126 up, and FP16's
// subnormals map onto FP32 subnormals. The kernel runs with MXCSR.FTZ set: an FMA whose result is
// below 2^-126 (an FP16 accumulator that is tiny) delivers zero and raises the sticky underflow
// flag, exact or not (checked on this hardware and by the tests). So tininess, which FP16 rounds to a
// fixed quantum and flags as Underflow/DenormalOut, needs no per-step test: a tile that raised the
// flag is redone by the exact kernel (gemm_f16acc_exact.cpp).
//
// Rounding. Every step computes s = RN32(acc + a*b) with one FMA (a*b is exact in FP32) and rounds
// it to FP16 precision by integer ops on the pattern: u = bits + 0x1000, r = u & ~0x1FFF, i.e. round
// half away from zero at bit 13. That is RN16 of s except when s is exactly an FP16 midpoint (its 13
// bits below the FP16 unit in the last place are 1000000000000), which is precisely when u == r: one
// compare per vector finds them, and the step loop leaves to redo that step (rarely: about one step
// in 8192 per lane):
//   Fp16ViaFp32: s is the defined FP32 sum; it is rounded to nearest even instead.
//   Fp16Rn: rounding twice to nearest goes wrong only when the first rounding lands on a midpoint of
//       the second format, so TwoSum gives the rounding error of s, s moves one FP32 ulp towards the
//       exact sum (round to odd), and RN16 of that (to nearest even: an exact sum may be a
//       midpoint) is RN16(acc + a*b) (24 >= 11 + 2).
//
// Overflow. By Cauchy-Schwarz and one relative rounding error of at most d = 2^-11 + 2^-24 + 2^-35
// per step, every partial sum of element (m, n) is below (1 + d)^K |A(m,:)|_2 |B(:,n)|_2. A tile
// whose bound stays below 65504 cannot overflow and runs with no range test at all (the common
// case: K = 1024 of unit normals gives about 1700). Other tiles keep the signed and the unsigned
// maximum of the rounded patterns (the largest positive and the largest negative value) and are
// redone exactly when either passed 65504.
//
// Blocking: each tile runs over K in blocks of kKc steps (the unit of an exact redo; the state waits
// in L1 between blocks), so the order of operations per element is unchanged (k runs upwards, one
// rounding per step); kRowBlock rows of A stay in L2 while the B panels pass by.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "numerics/detail/gemm_internal.h"
#include "numerics/detail/simd.h"

namespace probelab::num::detail {
namespace {

constexpr std::int64_t kCols = kPanelB;
constexpr std::int64_t kKc = 64;  // short: a K block with a tiny accumulator is redone exactly
constexpr std::int64_t kRowBlock = 96;  // rows of A per pass over the B panels (96 x K floats in L2)
constexpr int kRows = 4;  // rows of a tile: 8 accumulators (independent chains), the operands and constants fit in 16 registers
constexpr float kDown = 0x1p-112f;
constexpr float kUp = 0x1p112f;
// Patterns beyond the largest FP16 value, scaled: positive above 65504 * 2^-112 (signed compare),
// negative above -65504 * 2^-112 (unsigned compare).
constexpr int kHugePos = 0x0F7FE000;
constexpr unsigned kHugeNeg = 0x8F7FE000u;
constexpr unsigned kMxcsrFtz = 0x8000, kMxcsrUnderflow = 0x10, kMxcsrFlags = 0x3F;

// Sets FTZ (round to nearest, exceptions masked, no DAZ) and restores the caller's MXCSR.
class FlushToZeroScope {
 public:
  FlushToZeroScope() : saved_(_mm_getcsr()) { _mm_setcsr(0x1F80 | kMxcsrFtz); }
  ~FlushToZeroScope() { _mm_setcsr(saved_); }
  FlushToZeroScope(const FlushToZeroScope&) = delete;
  FlushToZeroScope& operator=(const FlushToZeroScope&) = delete;
  // Whether an underflow was flagged since the last call; clears the flags.
  static bool underflowed() {
    const unsigned csr = _mm_getcsr();
    if ((csr & kMxcsrUnderflow) == 0) return false;
    _mm_setcsr(csr & ~kMxcsrFlags);
    return true;
  }
  // IEEE arithmetic (no flush) for the lifetime of a Pause; the flags it raises are dropped.
  class Pause {
   public:
    Pause() { _mm_setcsr(0x1F80); }
    ~Pause() { _mm_setcsr(0x1F80 | kMxcsrFtz); }
    Pause(const Pause&) = delete;
    Pause& operator=(const Pause&) = delete;
  };

 private:
  unsigned saved_;
};

// The accumulators and trackers of an R x 16 tile.
template <int R>
struct TileState {
  __m256 acc[R][2];
  __m256i hi[2];  // signed and unsigned maximum of the rounded patterns (overflow tracking)
};

// RN16 of a scaled FP32 pattern, to nearest even at bit 13: (x + 0xFFF + lsb) & ~0x1FFF.
[[gnu::always_inline]] inline __m256i round_even(__m256i x, __m256i keep) noexcept {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 13), _mm256_set1_epi32(1));
  return _mm256_and_si256(_mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0xFFF))), keep);
}

// The step's results r of one vector with the midpoint lanes `mid` redone; s: RN32(acc + a*b) as
// computed by the FMA.
template <bool kRn>
[[gnu::always_inline]] inline __m256i redo_midpoints(__m256 av, __m256 b, __m256 acc, __m256i s, __m256i r,
                                                     __m256i mid) noexcept {
  __m256i x = s;
  if constexpr (kRn) {
    // Unscaled, so that the operands of TwoSum are normal numbers; scaling back is exact, or flushes
    // (and flags) an FP16-tiny sum like the FMA would.
    const __m256 up = _mm256_set1_ps(kUp);
    const __m256 odd = round_to_odd_sum(_mm256_mul_ps(av, up), b, _mm256_mul_ps(acc, up));
    x = _mm256_castps_si256(_mm256_mul_ps(odd, _mm256_set1_ps(kDown)));
  }
  // Round to nearest even at bit 13 (x is still a midpoint where the sum was exact).
  return _mm256_blendv_epi8(r, round_even(x, _mm256_set1_epi32(~0x1FFF)), mid);
}

// Steps [k, kc) of a tile (R = kRows or 1 rows), its state loaded into registers for the loop and stored
// back after it (a function of its own, so that nothing else competes for the 16 registers).
// Returns the step at which row `hit` met a midpoint (rows before it have done that step, it and
// the rows after have not), or kc.
template <int R, bool kRn, bool kTrack>
[[gnu::noinline]] std::int64_t fast_steps(std::int64_t k, std::int64_t kc, const float* a, const float* bp,
                                          TileState<R>& st, int& hit) {
  static_assert(R == 1 || R == kRows);
  // Named registers (not an array) so that the compiler keeps no memory copy of the accumulators.
  __m256 c00 = st.acc[0][0], c01 = st.acc[0][1], c10 = c00, c11 = c01, c20 = c00, c21 = c01, c30 = c00, c31 = c01;
  if constexpr (R == kRows) {
    c10 = st.acc[1][0], c11 = st.acc[1][1], c20 = st.acc[2][0], c21 = st.acc[2][1];
    c30 = st.acc[3][0], c31 = st.acc[3][1];
  }
  __m256i hi0 = st.hi[0], hi1 = st.hi[1];
  const __m256i half = _mm256_set1_epi32(0x1000), keep = _mm256_set1_epi32(~0x1FFF);
  const __m256i even_bias = _mm256_set1_epi32(0xFFF);
  // One row's step; false at a midpoint (Fp16Rn), leaving c0 and c1 as they were.
  auto row = [&](__m256 av, __m256 b0, __m256 b1, __m256& c0, __m256& c1) [[gnu::always_inline]] {
    const __m256i s0 = _mm256_castps_si256(_mm256_fmadd_ps(av, b0, c0));
    const __m256i s1 = _mm256_castps_si256(_mm256_fmadd_ps(av, b1, c1));
    __m256i r0, r1;
    if constexpr (kRn) {
      const __m256i u0 = _mm256_add_epi32(s0, half), u1 = _mm256_add_epi32(s1, half);
      r0 = _mm256_and_si256(u0, keep);
      r1 = _mm256_and_si256(u1, keep);
      const __m256i mid = _mm256_or_si256(_mm256_cmpeq_epi32(u0, r0), _mm256_cmpeq_epi32(u1, r1));
      if (_mm256_movemask_ps(_mm256_castsi256_ps(mid)) != 0) [[unlikely]] {
#ifdef PROBELAB_INLINE_MID
        r0 = redo_midpoints<kRn>(av, b0, c0, s0, r0, _mm256_cmpeq_epi32(u0, r0));
        r1 = redo_midpoints<kRn>(av, b1, c1, s1, r1, _mm256_cmpeq_epi32(u1, r1));
#else
        return false;
#endif
      }
    } else {  // to nearest even: (s + 0xFFF + lsb) & ~0x1FFF, the lsb off the addition's chain
      const __m256i one = _mm256_set1_epi32(1);
      r0 = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(s0, even_bias),
                                             _mm256_and_si256(_mm256_srli_epi32(s0, 13), one)), keep);
      r1 = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(s1, even_bias),
                                             _mm256_and_si256(_mm256_srli_epi32(s1, 13), one)), keep);
    }
    if constexpr (kTrack) {
      hi0 = _mm256_max_epi32(hi0, _mm256_max_epi32(r0, r1));
      hi1 = _mm256_max_epu32(hi1, _mm256_max_epu32(r0, r1));
    }
    c0 = _mm256_castsi256_ps(r0);
    c1 = _mm256_castsi256_ps(r1);
    return true;
  };
  hit = -1;
  for (; k < kc; ++k) {
    const float* bk = bp + k * kCols;
    const float* ak = a + k * kRows;
    const __m256 b0 = _mm256_load_ps(bk), b1 = _mm256_load_ps(bk + 8);
    if (!row(_mm256_broadcast_ss(ak), b0, b1, c00, c01)) [[unlikely]] {
      hit = 0;
      break;
    }
    if constexpr (R == kRows) {
      if (!row(_mm256_broadcast_ss(ak + 1), b0, b1, c10, c11)) [[unlikely]] {
        hit = 1;
        break;
      }
      if (!row(_mm256_broadcast_ss(ak + 2), b0, b1, c20, c21)) [[unlikely]] {
        hit = 2;
        break;
      }
      if (!row(_mm256_broadcast_ss(ak + 3), b0, b1, c30, c31)) [[unlikely]] {
        hit = 3;
        break;
      }
    }
  }
  st.acc[0][0] = c00, st.acc[0][1] = c01;
  if constexpr (R == kRows) {
    st.acc[1][0] = c10, st.acc[1][1] = c11, st.acc[2][0] = c20, st.acc[2][1] = c21;
    st.acc[3][0] = c30, st.acc[3][1] = c31;
  }
  st.hi[0] = hi0;
  st.hi[1] = hi1;
  return k;
}

// Step k of rows from..R-1, carefully (out of the step loop, on the state in memory).
template <int R, bool kRn, bool kTrack>
[[gnu::noinline]] void careful_steps(TileState<R>& st, int from, std::int64_t k, const float* a, const float* bp) {
  const __m256 b0 = _mm256_load_ps(bp + k * kCols), b1 = _mm256_load_ps(bp + k * kCols + 8);
  for (int i = from; i < R; ++i) {
    const __m256 av = _mm256_broadcast_ss(a + k * kRows + i);
    const __m256i s0 = _mm256_castps_si256(_mm256_fmadd_ps(av, b0, st.acc[i][0]));
    const __m256i s1 = _mm256_castps_si256(_mm256_fmadd_ps(av, b1, st.acc[i][1]));
    const __m256i u0 = _mm256_add_epi32(s0, _mm256_set1_epi32(0x1000)), u1 = _mm256_add_epi32(s1, _mm256_set1_epi32(0x1000));
    const __m256i r0 = redo_midpoints<kRn>(av, b0, st.acc[i][0], s0, _mm256_and_si256(u0, _mm256_set1_epi32(~0x1FFF)),
                                           _mm256_cmpeq_epi32(u0, _mm256_and_si256(u0, _mm256_set1_epi32(~0x1FFF))));
    const __m256i r1 = redo_midpoints<kRn>(av, b1, st.acc[i][1], s1, _mm256_and_si256(u1, _mm256_set1_epi32(~0x1FFF)),
                                           _mm256_cmpeq_epi32(u1, _mm256_and_si256(u1, _mm256_set1_epi32(~0x1FFF))));
    if constexpr (kTrack) {
      st.hi[0] = _mm256_max_epi32(st.hi[0], _mm256_max_epi32(r0, r1));
      st.hi[1] = _mm256_max_epu32(st.hi[1], _mm256_max_epu32(r0, r1));
    }
    st.acc[i][0] = _mm256_castsi256_ps(r0);
    st.acc[i][1] = _mm256_castsi256_ps(r1);
  }
}

bool passed_65504(const __m256i (&hi)[2]) {
  const __m256i big_pos = _mm256_cmpgt_epi32(hi[0], _mm256_set1_epi32(kHugePos));
  const __m256i lim = _mm256_set1_epi32(static_cast<int>(kHugeNeg));  // hi[1] > lim unsigned: max != lim
  const __m256i not_big_neg = _mm256_cmpeq_epi32(_mm256_max_epu32(hi[1], lim), lim);
  return _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_andnot_si256(not_big_neg, _mm256_set1_epi32(-1)))) != 0 ||
         _mm256_movemask_ps(_mm256_castsi256_ps(big_pos)) != 0;
}

// R rows x 16 columns over kc steps. a: rows of a scaled A panel (kRows floats per k); bp: a B
// panel (16 floats per k); in (row stride ld) the scaled accumulators before the block, or null
// for zeros; the accumulators after it go to out (16 floats per row), so that `in` still holds the
// state to redo the block from. Returns whether a tracked tile passed 65504.
template <int R, bool kRn, bool kTrack>
bool tile(std::int64_t kc, const float* a, const float* bp, const float* in, std::int64_t ld, float* out) {
  TileState<R> st;
  for (int i = 0; i < R; ++i) {
    st.acc[i][0] = in ? _mm256_load_ps(in + i * ld) : _mm256_setzero_ps();
    st.acc[i][1] = in ? _mm256_load_ps(in + i * ld + 8) : _mm256_setzero_ps();
  }
  st.hi[0] = st.hi[1] = _mm256_setzero_si256();
  std::int64_t k = 0;
  for (;;) {
    int hit = 0;
    k = fast_steps<R, kRn, kTrack>(k, kc, a, bp, st, hit);
    if (k == kc) break;
    careful_steps<R, kRn, kTrack>(st, hit, k, a, bp);
    ++k;
  }
  for (int i = 0; i < R; ++i) {
    _mm256_store_ps(out + i * kCols, st.acc[i][0]);
    _mm256_store_ps(out + i * kCols + 8, st.acc[i][1]);
  }
  return kTrack && passed_65504(st.hi);
}

template <int R, bool kRn>
bool tile_any(bool track, std::int64_t kc, const float* a, const float* bp, const float* in, std::int64_t ld,
              float* out) {
  return track ? tile<R, kRn, true>(kc, a, bp, in, ld, out) : tile<R, kRn, false>(kc, a, bp, in, ld, out);
}

// Scratch kept per thread (grow-only).
struct Scratch {
  FloatBuffer a;
  std::int64_t cap_a = 0;
  std::vector<double> norm_a, norm_b;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}
float* grown(FloatBuffer& buf, std::int64_t& cap, std::int64_t n) {
  if (n > cap) {
    buf = aligned_floats(n);
    cap = n;
  }
  return buf.get();
}

// Euclidean norms of A's rows and of the 16-column groups' largest column of B, from the packed
// (unscaled) panels.
void norms(std::int64_t M, std::int64_t panels, const Packed& A, const Packed& B, Scratch& sc) {
  const std::int64_t K = A.K;
  sc.norm_a.assign(static_cast<std::size_t>(M), 0.0);
  for (std::int64_t m = 0; m < M; ++m) {
    const float* a = A.panel(m / kPanelA) + m % kPanelA;
    double s = 0;
    for (std::int64_t k = 0; k < K; ++k) s += static_cast<double>(a[k * kPanelA]) * a[k * kPanelA];
    sc.norm_a[static_cast<std::size_t>(m)] = std::sqrt(s);
  }
  sc.norm_b.assign(static_cast<std::size_t>(panels), 0.0);
  for (std::int64_t p = 0; p < panels; ++p) {
    double s[kCols] = {};
    const float* b = B.panel(p);
    for (std::int64_t k = 0; k < K; ++k) {
      for (std::int64_t j = 0; j < kCols; ++j) s[j] += static_cast<double>(b[k * kCols + j]) * b[k * kCols + j];
    }
    sc.norm_b[static_cast<std::size_t>(p)] = std::sqrt(*std::max_element(s, s + kCols));
  }
}

// One K block of one tile again, exactly, from its state before the block (in, scaled, row stride
// ld; null for zeros; a: the scaled A rows), with the caller's MXCSR; the results go to out (16
// floats per row, scaled), the flags to the elements' flags.
void redo_block(const float* in, std::int64_t ld, std::int64_t rows, std::int64_t kc, const float* a, const float* bp,
                Accum accum, const Mode& mode, float* out, std::uint8_t* flags, std::int64_t N, std::int64_t ncols) {
  const FlushToZeroScope::Pause ieee;
  alignas(32) float x[kRows * kCols];
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < kCols; ++j) x[r * kCols + j] = in ? in[r * ld + j] * kUp : 0.0f;
  }
  gemm_f16acc_block_exact(static_cast<int>(rows), kc, a, kRows, kUp, bp, accum, mode, x, flags, N, ncols);
  for (std::int64_t i = 0; i < rows * kCols; ++i) out[i] = x[i] * kDown;  // exact, subnormals kept
}

template <bool kRn>
void run(std::int64_t M, std::int64_t N, const Packed& A, const Packed& B, Accum accum, const Mode& mode,
         std::uint16_t* R, std::uint8_t* flags) {
  const std::int64_t K = A.K;
  const std::int64_t panels = (N + kCols - 1) / kCols;
  Scratch& sc = scratch();
  // A scaled by 2^-112 (exact), repacked in panels of kRows rows ([k][row]), zero padded.
  const std::int64_t a_len = (M + kRows - 1) / kRows * kRows * K;
  float* as = grown(sc.a, sc.cap_a, a_len);
  for (std::int64_t m0 = 0; m0 < M; m0 += kRows) {
    float* dst = as + m0 * K;
    for (std::int64_t r = 0; r < kRows; ++r) {
      const std::int64_t m = m0 + r;
      const float* src = m < M ? A.panel(m / kPanelA) + m % kPanelA : nullptr;
      for (std::int64_t k = 0; k < K; ++k) dst[k * kRows + r] = src ? src[k * kPanelA] * kDown : 0.0f;
    }
  }
  norms(M, panels, A, B, sc);
  const double growth = std::exp(static_cast<double>(K) * std::log1p(0x1p-11 + 0x1p-24 + 0x1p-35)) * 1.001;
  auto tile_rows = [&](std::int64_t m) { return M - m >= kRows ? kRows : 1; };
  auto tracked = [&](std::int64_t m, std::int64_t p) {
    const double na = *std::max_element(sc.norm_a.begin() + m, sc.norm_a.begin() + m + tile_rows(m));
    return !(na * sc.norm_b[static_cast<std::size_t>(p)] * growth < 65504.0);
  };
  const FlushToZeroScope ftz;
  alignas(32) float state[2][kRows * kCols];
  for (std::int64_t mb = 0; mb < M; mb += kRowBlock) {  // a block of A's rows stays in L2
    const std::int64_t mb_end = std::min(M, mb + kRowBlock);
    for (std::int64_t p = 0; p < panels; ++p) {
      const std::int64_t n0 = p * kCols, nc = std::min(kCols, N - n0);
      for (std::int64_t m = mb, rows = 0; m < mb_end; m += rows) {
        rows = tile_rows(m);
        const bool track = tracked(m, p);
        // The tile runs K block by K block; its state passes between the two buffers (L1).
        const float* in = nullptr;
        for (std::int64_t k0 = 0, i = 0; k0 < K; k0 += kKc, i ^= 1) {
          const std::int64_t kc = std::min(kKc, K - k0);
          const float* a = as + (m / kRows) * K * kRows + k0 * kRows + m % kRows;
          const float* bp = B.panel(p) + k0 * kCols;
          float* out = state[i];
          const bool over = rows == kRows ? tile_any<kRows, kRn>(track, kc, a, bp, in, kCols, out)
                                          : tile_any<1, kRn>(track, kc, a, bp, in, kCols, out);
          if (FlushToZeroScope::underflowed() || over) {
            redo_block(in, kCols, rows, kc, a, bp, accum, mode, out, flags + m * N + n0, N, nc);
          }
          in = out;
        }
        alignas(16) std::uint16_t h[kCols];
        const __m256 up = _mm256_set1_ps(kUp);
        for (std::int64_t r = 0; r < rows; ++r) {
          _mm_store_si128(reinterpret_cast<__m128i*>(h),
                          _mm256_cvtps_ph(_mm256_mul_ps(_mm256_load_ps(in + r * kCols), up), _MM_FROUND_TO_NEAREST_INT));
          _mm_store_si128(reinterpret_cast<__m128i*>(h + 8), _mm256_cvtps_ph(_mm256_mul_ps(_mm256_load_ps(in + r * kCols + 8), up),
                                                                             _MM_FROUND_TO_NEAREST_INT));
          std::copy(h, h + nc, R + (m + r) * N + n0);
        }
      }
    }
  }
}

}  // namespace

void gemm_f16acc_kernel(std::int64_t M, std::int64_t N, const Packed& A, const Packed& B, Accum accum,
                        const Mode& mode, std::uint16_t* R, std::vector<std::uint8_t>& flags) {
  flags.assign(static_cast<std::size_t>(M * N), 0);
  if (accum == Accum::Fp16Rn) run<true>(M, N, A, B, accum, mode, R, flags.data());
  else run<false>(M, N, A, B, accum, mode, R, flags.data());
}

}  // namespace probelab::num::detail
