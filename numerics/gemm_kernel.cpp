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

// c[R][16] (row stride ldc) = (first ? 0 : c) + sum over kc steps, one fma per k, for the first R
// rows of the panel (R = MR: the full tile; fewer: an edge panel, whose missing rows are not
// computed). a: MR floats per k; b: NR floats per k (32-byte aligned).
template <int R>
[[gnu::always_inline]] inline void micro_rows(std::int64_t kc, const float* a, const float* b, float* c, std::int64_t ldc,
                                              bool first) {
  static_assert(R >= 1 && R <= MR);
  __m256 acc[R][2];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    acc[i][0] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(c + i * ldc);
    acc[i][1] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(c + i * ldc + 8);
  }
#pragma GCC unroll 4
  for (std::int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(b);
    const __m256 b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + i);
      acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
    }
    a += MR;
    b += NR;
  }
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    _mm256_storeu_ps(c + i * ldc, acc[i][0]);
    _mm256_storeu_ps(c + i * ldc + 8, acc[i][1]);
  }
}

void micro_6x16(std::int64_t kc, const float* a, const float* b, float* c, std::int64_t ldc, bool first) {
  micro_rows<MR>(kc, a, b, c, ldc, first);
}

// The first `mr` rows of a panel, full width.
void micro_short(std::int64_t kc, const float* a, const float* b, float* c, std::int64_t ldc, bool first,
                 std::int64_t mr) {
  switch (mr) {
    case 1: micro_rows<1>(kc, a, b, c, ldc, first); break;
    case 2: micro_rows<2>(kc, a, b, c, ldc, first); break;
    case 3: micro_rows<3>(kc, a, b, c, ldc, first); break;
    case 4: micro_rows<4>(kc, a, b, c, ldc, first); break;
    case 5: micro_rows<5>(kc, a, b, c, ldc, first); break;
    default: micro_rows<MR>(kc, a, b, c, ldc, first); break;
  }
}

// Edge tile: the first mr rows computed in a buffer of full width, the valid nr columns copied.
void micro_edge(std::int64_t kc, const float* a, const float* b, float* c, std::int64_t ldc, bool first,
                std::int64_t mr, std::int64_t nr) {
  if (nr == NR) return micro_short(kc, a, b, c, ldc, first, mr);
  alignas(32) float tile[MR * NR];
  if (!first) {
    for (std::int64_t i = 0; i < mr; ++i) std::memcpy(tile + i * NR, c + i * ldc, sizeof(float) * nr);
  }
  micro_short(kc, a, b, tile, NR, first, mr);
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
