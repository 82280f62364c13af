// FP32-accumulation GEMM kernel: GotoBLAS-style blocking over N (NC), K (KC) and M (MC) with packed
// panels and a 6x16 AVX2 FMA register tile. The accumulator of each output element lives in a
// register within a K block and in C between K blocks, and k always runs upwards: every element is
// acc = fma(A(m,k), B(k,n), acc) for k = 0..K-1 starting from +0, exactly the scalar loop.
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "chip_model/numerics/detail/gemm_internal.h"

namespace probelab::num::detail {
namespace {

constexpr std::int64_t MR = 6;
constexpr std::int64_t NR = 16;
constexpr std::int64_t KC = 256;
constexpr std::int64_t MC = 96;
constexpr std::int64_t NC = 2048;

// Packs A[0:mc, 0:kc] into MR-row micro-panels (k-major inside a panel), zero padded.
void pack_a(const float* A, std::int64_t lda, std::int64_t mc, std::int64_t kc, float* out) {
  for (std::int64_t i0 = 0; i0 < mc; i0 += MR) {
    const std::int64_t mr = std::min(MR, mc - i0);
    for (std::int64_t k = 0; k < kc; ++k) {
      for (std::int64_t i = 0; i < MR; ++i) out[k * MR + i] = i < mr ? A[(i0 + i) * lda + k] : 0.0f;
    }
    out += kc * MR;
  }
}

// Packs B[0:kc, 0:nc] into NR-column micro-panels, zero padded.
void pack_b(const float* B, std::int64_t ldb, std::int64_t kc, std::int64_t nc, float* out) {
  for (std::int64_t j0 = 0; j0 < nc; j0 += NR) {
    const std::int64_t nr = std::min(NR, nc - j0);
    for (std::int64_t k = 0; k < kc; ++k) {
      const float* src = B + k * ldb + j0;
      float* dst = out + k * NR;
      if (nr == NR) {
        _mm256_storeu_ps(dst, _mm256_loadu_ps(src));
        _mm256_storeu_ps(dst + 8, _mm256_loadu_ps(src + 8));
      } else {
        for (std::int64_t j = 0; j < NR; ++j) dst[j] = j < nr ? src[j] : 0.0f;
      }
    }
    out += kc * NR;
  }
}

// c[6][16] (row stride ldc) = (first ? 0 : c) + sum over the panel, one fma per k.
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

struct AlignedFree {
  void operator()(float* p) const noexcept { std::free(p); }
};
using Buffer = std::unique_ptr<float[], AlignedFree>;
Buffer aligned_floats(std::int64_t n) {
  const auto bytes = static_cast<std::size_t>((n * 4 + 63) / 64 * 64);
  return Buffer(static_cast<float*>(std::aligned_alloc(64, bytes)));
}

}  // namespace

void gemm_f32_kernel(std::int64_t M, std::int64_t N, std::int64_t K, const float* A, std::int64_t lda, const float* B,
                     std::int64_t ldb, float* C, std::int64_t ldc) {
  const std::int64_t nc_max = std::min(NC, (N + NR - 1) / NR * NR);
  const std::int64_t mc_max = std::min(MC, (M + MR - 1) / MR * MR);
  const std::int64_t kc_max = std::min(KC, K);
  Buffer bp = aligned_floats(kc_max * nc_max);
  Buffer ap = aligned_floats(kc_max * mc_max);
  for (std::int64_t jc = 0; jc < N; jc += NC) {
    const std::int64_t nc = std::min(NC, N - jc);
    for (std::int64_t pc = 0; pc < K; pc += KC) {
      const std::int64_t kc = std::min(KC, K - pc);
      pack_b(B + pc * ldb + jc, ldb, kc, nc, bp.get());
      for (std::int64_t ic = 0; ic < M; ic += MC) {
        const std::int64_t mc = std::min(MC, M - ic);
        pack_a(A + ic * lda + pc, lda, mc, kc, ap.get());
        for (std::int64_t jr = 0; jr < nc; jr += NR) {
          const std::int64_t nr = std::min(NR, nc - jr);
          for (std::int64_t ir = 0; ir < mc; ir += MR) {
            const std::int64_t mr = std::min(MR, mc - ir);
            float* c = C + (ic + ir) * ldc + jc + jr;
            const float* a = ap.get() + ir * kc;
            const float* b = bp.get() + jr * kc;
            if (mr == MR && nr == NR) micro_6x16(kc, a, b, c, ldc, pc == 0);
            else micro_edge(kc, a, b, c, ldc, pc == 0, mr, nr);
          }
        }
      }
    }
  }
}

}  // namespace probelab::num::detail
