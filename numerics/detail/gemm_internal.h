// Internal pieces of gemm.cpp: operand packing/classification, kernels, per-element scalar path.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "numerics/bulk.h"
#include "numerics/gemm.h"

namespace probelab::num::detail {

// Register tile of the FP32 kernel: A is packed in panels of kPanelA rows, B in panels of kPanelB
// columns, each panel k-major over the whole K ([k][row] resp. [k][col]), zero padded.
inline constexpr std::int64_t kPanelA = 6;
inline constexpr std::int64_t kPanelB = 16;

// Classification bits of a logical row (of A) or column (of B).
inline constexpr std::uint8_t kClsDenormalIn = 1;  // holds a subnormal input
inline constexpr std::uint8_t kClsSlow = 2;        // needs the scalar path (NaN/Inf, BF16 extremes)

struct AlignedFree {
  void operator()(float* p) const noexcept { std::free(p); }
};
using FloatBuffer = std::unique_ptr<float[], AlignedFree>;
FloatBuffer aligned_floats(std::int64_t n);

// A packed operand: exact FP32 values read through the Mode, panel layout as above.
struct Packed {
  const float* data = nullptr;
  std::int64_t K = 0;                 // k extent of every panel
  std::int64_t width = 0;             // kPanelA or kPanelB
  std::vector<std::uint8_t> cls;      // per logical row of A / column of B
  std::int64_t first_nan = -1;        // lowest row-major index of a NaN of the logical operand
  const float* panel(std::int64_t p) const { return data + p * K * width; }
};

// Packs A (M x K) resp. B (K x N) into `storage` (grown as needed, reused between calls).
Packed pack_a(const GemmOperand& a, std::int64_t M, std::int64_t K, const Mode& mode, FloatBuffer& storage,
              std::int64_t& capacity);
Packed pack_b(const GemmOperand& b, std::int64_t K, std::int64_t N, const Mode& mode, FloatBuffer& storage,
              std::int64_t& capacity);

// C = A * B over k in [k0, k1) (k1 > k0), FP32 accumulation in the documented order (k sequential
// per element from +0).
void gemm_f32_kernel(std::int64_t M, std::int64_t N, std::int64_t k0, std::int64_t k1, const Packed& A,
                     const Packed& B, float* C, std::int64_t ldc);

// FP16 accumulation (Accum::Fp16Rn or Fp16ViaFp32) of tame FP16 operands (K > 0).
// Writes FP16 patterns to R (M x N, dense) and sets attention[m*N + n] = 1 for the elements whose
// accumulator ever left the plain range [2^-14, 65520) \ {0}: the caller recomputes those with the
// scalar path to obtain their exact values and flags.
void gemm_f16acc_kernel(std::int64_t M, std::int64_t N, const Packed& A, const Packed& B, Accum accum,
                        std::uint16_t* R, std::vector<std::uint8_t>& attention);

// The scalar definition of one output element over k in [k0, k1), from the raw operands.
struct ElementResult {
  std::uint32_t bits;  // FP32 pattern (Accum::Fp32) or FP16 pattern (FP16 accumulation)
  Flags flags;         // accumulation flags (no Inexact, no DenormalIn)
};
ElementResult element_scalar(const GemmOperand& a, const GemmOperand& b, std::int64_t m, std::int64_t n,
                             std::int64_t k0, std::int64_t k1, Accum accum, const Mode& mode);

}  // namespace probelab::num::detail
