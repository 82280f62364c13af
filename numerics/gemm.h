// GEMM modelling the Cube unit: C[M x N] = A[M x K] * B[K x N] with FP16 or BF16 inputs.
//
// Order of operations (the contract; the fast kernel and a plain scalar loop agree bit for bit):
//   For every output element (m, n), k runs 0, 1, ..., K-1 sequentially and the accumulator starts
//   at +0. The kernel blocks only over M and N and, across K blocks, carries the accumulator
//   unchanged, so blocking never changes the bits.
//   Accum::Fp32 (default; Cube with FP32 accumulation in L0C):
//       acc = RN32(acc + a*b) with the exact product (a fused multiply-add; for FP16 inputs the
//       product is exact in FP32 anyway, so FMA and multiply-then-add give the same bits).
//       The accumulator is IEEE internally (no saturation, no flush); the Mode applies on the way
//       out (to_f16/to_bf16/deliver), as the write-out path from L0C does.
//   Accum::Fp16Rn: acc16 = RN16(acc16 + a*b) through the Mode, correctly rounded from the exact
//       sum every step: a datapath whose FP16 adder takes the exact product (fused FP16 MAC).
//   Accum::Fp16ViaFp32: acc16 = RN16(RN32(acc16 + a*b)) through the Mode: the product is added to
//       the FP16 accumulator in an FP32 adder and the sum is rounded to FP16 (double rounding) —
//       a datapath that keeps FP16 accumulators but adds in FP32, e.g. FP16 accumulation emulated
//       by FP32 FMA units plus a conversion. Differs from Fp16Rn in ~2% of outputs at K=1024.
//   split_k = ks > 0 (only with Accum::Fp32): K is split into chunks [0,ks), [ks,2ks), ...; each
//       chunk is accumulated in FP32 from +0 as above; its partial is rounded to FP16 through the
//       Mode, and the partials are summed in chunk order in FP16: sum16 = RN16(sum16 + partial16)
//       (sum16 starts at +0): models split-K GEMM with FP16 partial buffers.
//   With FP16 accumulation or split-K the value is an FP16 number; writing it as FP32 is exact,
//   writing it as FP16 is the identity, writing it as BF16 rounds through the Mode.
//
// Inputs are read through the Mode (FLUSH_TO_ZERO reads subnormal inputs as zeros). NaN results are
// the default NaN (types.h).
//
// Flags (GemmReport) per output element (m, n), with the first offending element = lowest
// row-major linear index m*N + n per flag:
//   - DenormalIn   row m of A or column n of B holds a subnormal;
//   - Invalid      sNaN input used, 0*Inf product, Inf-Inf in the accumulator;
//   - Overflow, Underflow, DenormalOut   raised by any accumulation step or the output conversion;
//   - Inexact      raised by the output conversion only. Accumulation steps (FP32 or FP16
//                  accumulators, split-K partial rounding and partial sums) do not report Inexact:
//                  nearly every dot product is inexact and detection circuits do not watch it.
//                  (Their Underflow still follows flags.h: tiny and inexact.)
// NaN inputs raise no IEEE flag when quiet; they are reported separately (first_nan_a/first_nan_b).
//
// Cost: FP32 accumulation runs a register-tiled AVX2 FMA kernel (about as fast as Eigen's FP32 GEMM).
// FP16 accumulation of FP16 inputs is vectorised (gemm_f16acc.cpp: a fifth to a third of Eigen's
// FP32 speed). Elements whose row of A or column of B holds NaN/Inf are recomputed by vector code
// for FP16 inputs (gemm_special.cpp) and by the scalar definition for BF16 inputs (and BF16
// exponents outside [-56, 62]); FP16 accumulation of BF16 inputs is scalar. The kernels run with
// the default MXCSR whatever the caller's. Scratch memory is kept per thread between calls;
// concurrent calls from different threads are safe. So is the packed B of up to four operands a
// thread multiplied by again within its last eight calls (gemm_b_cache.cpp: a recurrent cell's
// weights), reused only while its bytes, shape, type and Mode are unchanged.
#pragma once

#include <array>
#include <cstdint>

#include "numerics/flags.h"
#include "numerics/mode.h"
#include "numerics/types.h"

namespace probelab::num {

enum class InType : std::uint8_t { F16 = 0, BF16 = 1 };
enum class OutType : std::uint8_t { F32 = 0, F16 = 1, BF16 = 2 };
enum class Accum : std::uint8_t { Fp32 = 0, Fp16Rn = 1, Fp16ViaFp32 = 2 };

// A read-only matrix operand of raw 16-bit patterns (f16 or bf16 bits).
//   trans == false: element (r, c) of the logical operand is data[r * ld + c] (row-major).
//   trans == true:  element (r, c) is data[c * ld + r] (the operand is stored transposed).
struct GemmOperand {
  const std::uint16_t* data = nullptr;
  InType type = InType::F16;
  std::int64_t ld = 0;
  bool trans = false;
};

// The output, row-major: element (m, n) at data[m * ld + n] (float, f16 or bf16 by type).
struct GemmOutput {
  void* data = nullptr;
  OutType type = OutType::F32;
  std::int64_t ld = 0;
};

struct GemmOptions {
  Accum accum = Accum::Fp32;
  std::int64_t split_k = 0;  // 0: no split; > 0 only with Accum::Fp32
  Mode mode{};
};

struct GemmReport {
  Flags flags;
  // first[int(f)]: lowest m*N + n whose computation raised flag f, or -1.
  std::array<std::int64_t, kFlagCount> first{-1, -1, -1, -1, -1, -1, -1};
  std::int64_t first_nan_a = -1;    // lowest m*K + k with A(m,k) NaN, or -1
  std::int64_t first_nan_b = -1;    // lowest k*N + n with B(k,n) NaN, or -1
  std::int64_t first_nan_out = -1;  // lowest m*N + n whose delivered value is NaN, or -1
  std::int64_t first_inf_out = -1;  // lowest m*N + n whose delivered value is +-Inf, or -1

  std::int64_t first_index(Flag f) const noexcept { return first[static_cast<int>(f)]; }
};

// Vector instruction sets of the FP16-accumulation tile. The results are the same bits with either;
// only the speed differs.
enum class GemmIsa : std::uint8_t { Avx2 = 0, Avx512 = 1 };
// The tile's instruction set in this process: AVX-512 (F, VL, BW, DQ) on Intel CPUs that have it
// (full-width 512-bit units: about 1.1x the AVX2 tile at n = 1024 on a Xeon), else AVX2 (the
// build's floor; also on AMD Zen 4, whose 512-bit operations are split in two: 0.87-0.96x there).
GemmIsa gemm_isa() noexcept;
// Restricts the tile to `isa` (for tests and benchmarks comparing both on one machine). Returns
// false, changing nothing, when the CPU lacks it. Not for use while another thread runs gemm().
bool set_gemm_isa(GemmIsa isa) noexcept;

// Computes C = A * B as documented above. M, N, K >= 0 (K == 0 gives +0 outputs). Throws
// std::invalid_argument for null data with a non-empty shape, negative sizes, leading dimensions
// smaller than the row length, A/B of different input types, split_k with FP16 accumulation, or
// out-of-range enum values. The output must not overlap the inputs.
GemmReport gemm(std::int64_t M, std::int64_t N, std::int64_t K, const GemmOperand& a, const GemmOperand& b,
                const GemmOutput& c, const GemmOptions& options = {});

// Typed conveniences for dense row-major FP16 operands (lda = K, ldb = N, ldc = N).
GemmReport gemm(std::int64_t M, std::int64_t N, std::int64_t K, const f16* a, const f16* b, float* c,
                const GemmOptions& options = {});
GemmReport gemm(std::int64_t M, std::int64_t N, std::int64_t K, const f16* a, const f16* b, f16* c,
                const GemmOptions& options = {});

}  // namespace probelab::num
