// FP16-accumulation GEMM kernel (gemm.h, Accum::Fp16Rn and Accum::Fp16ViaFp32) for FP16 operands,
// vectorised across output columns: each lane carries one FP16 accumulator as an exact FP32 value.
//
// Scaled domain. A is multiplied by 2^-112 (exact), so each lane holds acc * 2^-112: FP16's normal
// range [2^-14, 65504] maps into FP32's normal range from its smallest normal 2^-126 up, and FP16's
// subnormals map onto FP32 subnormals. The kernel runs with MXCSR.FTZ set: an FMA whose result is
// below 2^-126 (an FP16 accumulator that is tiny) delivers zero and raises the sticky underflow
// flag, exact or not (checked on this hardware and by the tests). So tininess, which FP16 rounds to a
// fixed quantum and flags as Underflow/DenormalOut, needs no per-step test: the K block of a tile
// that raised the flag is redone by the exact kernel (gemm_f16acc_exact.cpp).
//
// Rounding. Every step computes s = RN32(acc + a*b) with one FMA (a*b is exact in FP32) and rounds
// it to FP16 precision by integer ops on the pattern (gemm_f16acc_tile.cpp):
//   Fp16ViaFp32: s is the defined FP32 sum; it is rounded to nearest even at bit 13,
//       (bits + 0xFFF + lsb) & ~0x1FFF, with no test.
//   Fp16Rn: u = bits + 0x1000, r = u & ~0x1FFF, i.e. round half away from zero at bit 13. That is
//       RN16 of s except when s is exactly an FP16 midpoint (its 13 bits below the FP16 unit in the
//       last place are 1000000000000), which is precisely when u == r: one compare per vector and one
//       mask test per row of 16 lanes find them (one lane-step in 800 to 1200 for normally distributed
//       FP16 data, nine in ten of them exact ties), and an out-of-line call finishes that row's step
//       in registers, without leaving the step loop. Rounding twice to nearest goes wrong only when
//       the first rounding lands on a midpoint of the second format, so TwoSum gives the rounding
//       error of s, s moves one FP32 ulp towards the exact sum (round to odd), and RN16 of that (to
//       nearest even: an exact sum may be a midpoint) is RN16(acc + a*b) (24 >= 11 + 2).
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
// rounding per step); kRowBlock rows of A stay in L2 while the B panels pass by. Elements whose
// operands hold NaN or Inf (packed as zeros here) are the caller's: gemm_special.cpp.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "numerics/detail/gemm_internal.h"

namespace probelab::num::detail {
namespace {

constexpr std::int64_t kCols = kPanelB;
constexpr int kRows = kF16accRows;
constexpr std::int64_t kKc = 32;  // short: a K block with a tiny accumulator is redone exactly (32 measured faster than 64)
constexpr std::int64_t kRowBlock = 96;  // rows of A per pass over the B panels (96 x K floats in L2)
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
    for (std::int64_t j = 0; j < kCols; ++j) x[r * kCols + j] = in ? in[r * ld + j] * kF16accUp : 0.0f;
  }
  gemm_f16acc_block_exact(static_cast<int>(rows), kc, a, kRows, kF16accUp, bp, accum, mode, x, flags, N, ncols);
  for (std::int64_t i = 0; i < rows * kCols; ++i) out[i] = x[i] * kF16accDown;  // exact, subnormals kept
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
      for (std::int64_t k = 0; k < K; ++k) dst[k * kRows + r] = src ? src[k * kPanelA] * kF16accDown : 0.0f;
    }
  }
  norms(M, panels, A, B, sc);
  const double growth = std::exp(static_cast<double>(K) * std::log1p(0x1p-11 + 0x1p-24 + 0x1p-35)) * 1.001;
  auto tile_rows = [&](std::int64_t m) { return M - m >= kRows ? kRows : 1; };
  auto tracked = [&](std::int64_t m, std::int64_t p) {
    const double na = *std::max_element(sc.norm_a.begin() + m, sc.norm_a.begin() + m + tile_rows(m));
    return !(na * sc.norm_b[static_cast<std::size_t>(p)] * growth < 65504.0);
  };
  const F16accTiles& tiles = gemm_isa() == GemmIsa::Avx512 ? f16acc_tiles_avx512() : f16acc_tiles();
  const FlushToZeroScope ftz;
  alignas(64) float state[2][kRows * kCols];
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
          const bool over = tiles.fn[kRn][rows != kRows][track](kc, a, bp, in, kCols, out);
          if (FlushToZeroScope::underflowed() || over) {
            redo_block(in, kCols, rows, kc, a, bp, accum, mode, out, flags + m * N + n0, N, nc);
          }
          in = out;
        }
        alignas(16) std::uint16_t h[kCols];
        const __m256 up = _mm256_set1_ps(kF16accUp);
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
