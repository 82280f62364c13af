// FP16-accumulation GEMM kernel (gemm.h, Accum::Fp16Rn and Accum::Fp16ViaFp32) for FP16 operands.
// Each lane carries one FP16 accumulator as an exact FP32 value. Fp16Rn: the exact sum acc + a*b
// (a*b is exact in FP32) is represented by its FP32 round-to-odd via TwoSum and rounded to FP16
// with F16C, which is the correctly rounded RN16(acc + a*b) (24 >= 11 + 2). Fp16ViaFp32: one FP32
// FMA (= RN32(acc + a*b)) then RN16. While an accumulator stays in the plain range
// [2^-14, 65520) or at an exact zero, no Mode effect and no flag can occur; a lane that leaves it
// at any step is marked for the caller's scalar recomputation (values and flags).
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "chip_model/numerics/detail/gemm_internal.h"
#include "chip_model/numerics/detail/simd.h"

namespace probelab::num::detail {
namespace {

constexpr std::int64_t kCols = 16;

template <bool kRn>
inline __m256 step(__m256 a, __m256 b, __m256 acc, __m256& bad) noexcept {
  __m256 pre;
  if constexpr (kRn) {
    const __m256 p = _mm256_mul_ps(a, b);
    const __m256 s = _mm256_add_ps(acc, p);
    const __m256 bv = _mm256_sub_ps(s, acc);
    const __m256 err = _mm256_add_ps(_mm256_sub_ps(acc, _mm256_sub_ps(s, bv)), _mm256_sub_ps(p, bv));
    const __m256 inexact = _mm256_cmp_ps(err, _mm256_setzero_ps(), _CMP_NEQ_OQ);
    pre = to_odd_ps(s, inexact, same_sign(err, s));
  } else {
    pre = _mm256_fmadd_ps(a, b, acc);
  }
  const __m256 ok = _mm256_or_ps(in_range(abs_ps(pre), 0x1p-14f, 65520.0f), is_zero_ps(pre));
  bad = _mm256_or_ps(bad, _mm256_andnot_ps(ok, _mm256_castsi256_ps(_mm256_set1_epi32(-1))));
  return _mm256_cvtph_ps(_mm256_cvtps_ph(pre, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// R rows x 16 columns; bp is the packed K x 16 panel of B; out rows have stride N.
template <int R, bool kRn>
void tile(std::int64_t K, const float* a, std::int64_t lda, const float* bp, std::uint16_t* out, std::int64_t N,
          std::int64_t ncols, std::uint8_t* attention) {
  __m256 acc[R][2];
  __m256 bad[R];
  for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = bad[i] = _mm256_setzero_ps();
  for (std::int64_t k = 0; k < K; ++k) {
    const __m256 b0 = _mm256_load_ps(bp + k * kCols);
    const __m256 b1 = _mm256_load_ps(bp + k * kCols + 8);
    for (int i = 0; i < R; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + i * lda + k);
      acc[i][0] = step<kRn>(av, b0, acc[i][0], bad[i]);
      acc[i][1] = step<kRn>(av, b1, acc[i][1], bad[i]);
    }
  }
  for (int i = 0; i < R; ++i) {
    alignas(32) std::uint16_t h[kCols];
    _mm_store_si128(reinterpret_cast<__m128i*>(h), _mm256_cvtps_ph(acc[i][0], _MM_FROUND_TO_NEAREST_INT));
    _mm_store_si128(reinterpret_cast<__m128i*>(h + 8), _mm256_cvtps_ph(acc[i][1], _MM_FROUND_TO_NEAREST_INT));
    std::copy(h, h + ncols, out + i * N);
    const int mask = mask8(bad[i]);
    if (mask == 0) continue;
    for (int j = 0; j < 8; ++j) {
      if (!((mask >> j) & 1)) continue;
      if (j < ncols) attention[i * N + j] = 1;
      if (j + 8 < ncols) attention[i * N + j + 8] = 1;
    }
  }
}

template <bool kRn>
void run(std::int64_t M, std::int64_t N, std::int64_t K, const float* A, const float* B, std::uint16_t* R,
         std::uint8_t* attention) {
  std::vector<float, std::allocator<float>> panel_storage(static_cast<std::size_t>(K * kCols + 8));
  // 32-byte aligned view of the panel.
  auto addr = reinterpret_cast<std::uintptr_t>(panel_storage.data());
  float* panel = reinterpret_cast<float*>((addr + 31) / 32 * 32);
  for (std::int64_t n0 = 0; n0 < N; n0 += kCols) {
    const std::int64_t nc = std::min(kCols, N - n0);
    for (std::int64_t k = 0; k < K; ++k) {
      for (std::int64_t j = 0; j < kCols; ++j) panel[k * kCols + j] = j < nc ? B[k * N + n0 + j] : 0.0f;
    }
    std::int64_t m = 0;
    for (; m + 3 <= M; m += 3) tile<3, kRn>(K, A + m * K, K, panel, R + m * N + n0, N, nc, attention + m * N + n0);
    if (M - m == 2) tile<2, kRn>(K, A + m * K, K, panel, R + m * N + n0, N, nc, attention + m * N + n0);
    if (M - m == 1) tile<1, kRn>(K, A + m * K, K, panel, R + m * N + n0, N, nc, attention + m * N + n0);
  }
}

}  // namespace

void gemm_f16acc_kernel(std::int64_t M, std::int64_t N, std::int64_t K, const float* A, const float* B, Accum accum,
                        const Mode& /*mode: lanes where it could matter are recomputed*/, std::uint16_t* R,
                        std::vector<std::uint8_t>& attention) {
  attention.assign(static_cast<std::size_t>(M * N), 0);
  if (accum == Accum::Fp16Rn) run<true>(M, N, K, A, B, R, attention.data());
  else run<false>(M, N, K, A, B, R, attention.data());
}

}  // namespace probelab::num::detail
