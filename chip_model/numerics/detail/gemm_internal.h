// Internal pieces of gemm.cpp: operand conversion/classification, kernels, per-element scalar path.
#pragma once

#include <cstdint>
#include <vector>

#include "chip_model/numerics/bulk.h"
#include "chip_model/numerics/gemm.h"

namespace probelab::num::detail {

// Classification bits of a logical row (of A) or column (of B).
inline constexpr std::uint8_t kClsDenormalIn = 1;  // holds a subnormal input
inline constexpr std::uint8_t kClsSlow = 2;        // needs the scalar path (NaN/Inf, BF16 extremes)

// A logical rows x cols operand converted to dense row-major FP32 (read through the Mode), with
// the class of each logical row and column and the lowest row-major index of a NaN (-1 if none).
struct Operand32 {
  std::vector<float> data;
  std::vector<std::uint8_t> row_cls;
  std::vector<std::uint8_t> col_cls;
  std::int64_t first_nan = -1;
};
Operand32 convert_operand(const GemmOperand& op, std::int64_t rows, std::int64_t cols, const Mode& mode);

// C = A * B, FP32 accumulation in the documented order (k sequential per element from +0). K > 0.
void gemm_f32_kernel(std::int64_t M, std::int64_t N, std::int64_t K, const float* A, std::int64_t lda, const float* B,
                     std::int64_t ldb, float* C, std::int64_t ldc);

// FP16 accumulation (Accum::Fp16Rn or Fp16ViaFp32) of tame FP16 operands given as exact FP32.
// Writes FP16 patterns to R (M x N, dense) and sets attention[m*N + n] = 1 for the elements whose
// accumulator ever left the plain range [2^-14, 65520) \ {0}: the caller recomputes those with the
// scalar path to obtain their exact values and flags.
void gemm_f16acc_kernel(std::int64_t M, std::int64_t N, std::int64_t K, const float* A, const float* B, Accum accum,
                        const Mode& mode, std::uint16_t* R, std::vector<std::uint8_t>& attention);

// The scalar definition of one output element over k in [k0, k1), from the raw operands.
struct ElementResult {
  std::uint32_t bits;  // FP32 pattern (Accum::Fp32) or FP16 pattern (FP16 accumulation)
  Flags flags;         // accumulation flags (no Inexact, no DenormalIn)
};
ElementResult element_scalar(const GemmOperand& a, const GemmOperand& b, std::int64_t m, std::int64_t n,
                             std::int64_t k0, std::int64_t k1, Accum accum, const Mode& mode);

}  // namespace probelab::num::detail
