// FP32-accumulation GEMM kernel over pre-packed panels (gemm_pack.cpp): blocking over K (KC) and M
// (MC) with a 6x16 AVX2 FMA register tile. The accumulator of each output element lives in a
// register within a K block and in C between K blocks, and k always runs upwards: every element is
// acc = fma(A(m,k), B(k,n), acc) for k = k0..k1-1 starting from +0, exactly the scalar loop.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "numerics/detail/gemm_internal.h"

namespace probelab::num::detail {
namespace {

constexpr std::int64_t MR = kPanelA;
constexpr std::int64_t NR = kPanelB;
constexpr std::int64_t KC = 256;
constexpr std::int64_t MC = 144;

// c[6][16] (row stride ldc) = (first ? 0 : c) + sum over kc steps, one fma per k.
// a: MR floats per k; b: NR floats per k (32-byte aligned).
void micro_6x16(std::int64_t kc, const float* a, const float* b, float* c, std::int64_t ldc, bool first) {
  __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
  if (first) {
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
  } else {
    c00 = _mm256_loadu_ps(c + 0 * ldc); c01 = _mm256_loadu_ps(c + 0 * ldc + 8);
    c10 = _mm256_loadu_ps(c + 1 * ldc); c11 = _mm256_loadu_ps(c + 1 * ldc + 8);
    c20 = _mm256_loadu_ps(c + 2 * ldc); c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
    c30 = _mm256_loadu_ps(c + 3 * ldc); c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
    c40 = _mm256_loadu_ps(c + 4 * ldc); c41 = _mm256_loadu_ps(c + 4 * ldc + 8);
    c50 = _mm256_loadu_ps(c + 5 * ldc); c51 = _mm256_loadu_ps(c + 5 * ldc + 8);
  }
#pragma GCC unroll 4
  for (std::int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(b);
    const __m256 b1 = _mm256_load_ps(b + 8);
    __m256 av = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(av, b0, c00); c01 = _mm256_fmadd_ps(av, b1, c01);
    av = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(av, b0, c10); c11 = _mm256_fmadd_ps(av, b1, c11);
    av = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(av, b0, c20); c21 = _mm256_fmadd_ps(av, b1, c21);
    av = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(av, b0, c30); c31 = _mm256_fmadd_ps(av, b1, c31);
    av = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(av, b0, c40); c41 = _mm256_fmadd_ps(av, b1, c41);
    av = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(av, b0, c50); c51 = _mm256_fmadd_ps(av, b1, c51);
    a += MR;
    b += NR;
  }
  _mm256_storeu_ps(c + 0 * ldc, c00); _mm256_storeu_ps(c + 0 * ldc + 8, c01);
  _mm256_storeu_ps(c + 1 * ldc, c10); _mm256_storeu_ps(c + 1 * ldc + 8, c11);
  _mm256_storeu_ps(c + 2 * ldc, c20); _mm256_storeu_ps(c + 2 * ldc + 8, c21);
  _mm256_storeu_ps(c + 3 * ldc, c30); _mm256_storeu_ps(c + 3 * ldc + 8, c31);
  _mm256_storeu_ps(c + 4 * ldc, c40); _mm256_storeu_ps(c + 4 * ldc + 8, c41);
  _mm256_storeu_ps(c + 5 * ldc, c50); _mm256_storeu_ps(c + 5 * ldc + 8, c51);
}

// Edge tile (mr < MR or nr < NR): compute a full tile in a buffer and copy the valid part.
void micro_edge(std::int64_t kc, const float* a, const float* b, float* c, std::int64_t ldc, bool first,
                std::int64_t mr, std::int64_t nr) {
  alignas(32) float tile[MR * NR];
  if (!first) {
    for (std::int64_t i = 0; i < mr; ++i) std::memcpy(tile + i * NR, c + i * ldc, sizeof(float) * nr);
  }
  micro_6x16(kc, a, b, tile, NR, first);
  for (std::int64_t i = 0; i < mr; ++i) std::memcpy(c + i * ldc, tile + i * NR, sizeof(float) * nr);
}

}  // namespace

void gemm_f32_kernel(std::int64_t M, std::int64_t N, std::int64_t k0, std::int64_t k1, const Packed& A,
                     const Packed& B, float* C, std::int64_t ldc) {
  for (std::int64_t pc = k0; pc < k1; pc += KC) {
    const std::int64_t kc = std::min(KC, k1 - pc);
    for (std::int64_t ic = 0; ic < M; ic += MC) {
      const std::int64_t mc = std::min(MC, M - ic);
      for (std::int64_t jr = 0; jr < N; jr += NR) {
        const std::int64_t nr = std::min(NR, N - jr);
        const float* b = B.panel(jr / NR) + pc * NR;
        for (std::int64_t ir = ic; ir < ic + mc; ir += MR) {
          const std::int64_t mr = std::min(MR, ic + mc - ir);
          const float* a = A.panel(ir / MR) + pc * MR;
          float* c = C + ir * ldc + jr;
          if (ir + MR < ic + mc) {  // the next tile's accumulators: hide their cache misses
            for (std::int64_t i = 0; i < MR; ++i) {
              _mm_prefetch(reinterpret_cast<const char*>(c + (MR + i) * ldc), _MM_HINT_T0);
              _mm_prefetch(reinterpret_cast<const char*>(c + (MR + i) * ldc + NR - 1), _MM_HINT_T0);
            }
          }
          if (mr == MR && nr == NR) micro_6x16(kc, a, b, c, ldc, pc == k0);
          else micro_edge(kc, a, b, c, ldc, pc == k0, mr, nr);
        }
      }
    }
  }
}

}  // namespace probelab::num::detail
