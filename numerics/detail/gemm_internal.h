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

// pack_b, or the same operand packed by an earlier call of this thread when its patterns, shape,
// type and Mode are equal to that call's (gemm_b_cache.cpp); `scratch` holds the result
// otherwise. The reference is valid until the thread's next call.
const Packed& packed_b(const GemmOperand& b, std::int64_t K, std::int64_t N, const Mode& mode, FloatBuffer& storage,
                       std::int64_t& capacity, Packed& scratch);

// What this thread's packed-B cache did so far (tests: a model's weights are packed once).
struct BCacheStats {
  std::uint64_t calls = 0;  // packed_b calls of operands small enough to be cached
  std::uint64_t hits = 0;   // answered from an entry
  std::uint64_t cached_elems = 0;  // elements the valid entries hold now
};
BCacheStats b_cache_stats();

// C = A * B over k in [k0, k1) (k1 > k0), FP32 accumulation in the documented order (k sequential
// per element from +0).
void gemm_f32_kernel(std::int64_t M, std::int64_t N, std::int64_t k0, std::int64_t k1, const Packed& A,
                     const Packed& B, float* C, std::int64_t ldc);

// The fast FP16-accumulation tile (gemm_f16acc_tile.cpp) over one K block of kc steps: kF16accRows
// rows (or one) of A scaled by 2^-112 (a: kF16accRows floats per k) against a 16-column B panel
// (bp: 16 floats per k), from the scaled accumulators `in` (row stride ld; null: zeros) to `out`
// (16 floats per row). Returns whether a tracked tile passed 65504. fn[rn][one_row][track].
inline constexpr int kF16accRows = 4;
inline constexpr float kF16accDown = 0x1p-112f;  // the fast kernel's scale of A (gemm_f16acc.cpp)
inline constexpr float kF16accUp = 0x1p112f;
using F16accTileFn = bool (*)(std::int64_t kc, const float* a, const float* bp, const float* in, std::int64_t ld,
                              float* out);
struct F16accTiles {
  F16accTileFn fn[2][2][2];
};
// The table of one tile implementation: pick.template operator()<R, kRn, kTrack>() is its tile
// function for R rows (kF16accRows or 1), Fp16Rn or not, tracked or not.
template <class Pick>
F16accTiles make_f16acc_tiles(Pick pick) {
  F16accTiles t;
  t.fn[0][0][0] = pick.template operator()<kF16accRows, false, false>();
  t.fn[0][0][1] = pick.template operator()<kF16accRows, false, true>();
  t.fn[0][1][0] = pick.template operator()<1, false, false>();
  t.fn[0][1][1] = pick.template operator()<1, false, true>();
  t.fn[1][0][0] = pick.template operator()<kF16accRows, true, false>();
  t.fn[1][0][1] = pick.template operator()<kF16accRows, true, true>();
  t.fn[1][1][0] = pick.template operator()<1, true, false>();
  t.fn[1][1][1] = pick.template operator()<1, true, true>();
  return t;
}
const F16accTiles& f16acc_tiles();         // AVX2 (gemm_f16acc_tile.cpp)
const F16accTiles& f16acc_tiles_avx512();  // the same with AVX-512 (gemm_f16acc_tile512.cpp)

// FP16 accumulation (Accum::Fp16Rn or Fp16ViaFp32) of FP16 operands (K > 0) through the Mode.
// Writes FP16 patterns to R (M x N, dense) and the accumulation flags of each element (Flags bits:
// Overflow, Underflow, DenormalOut) to flags[m*N + n]. Elements whose row of A or column of B is
// slow (NaN/Inf inputs, packed as zeros) are meaningless there: the caller recomputes them.
void gemm_f16acc_kernel(std::int64_t M, std::int64_t N, const Packed& A, const Packed& B, Accum accum,
                        const Mode& mode, std::uint16_t* R, std::vector<std::uint8_t>& flags);

// The exact FP16 accumulation of `rows` (1..4) rows of A against one 16-column B panel over kc steps
// (every lane rounded as IEEE FP16 through the Mode): element (i, k) of the rows is
// a[k * a_stride + i] * a_scale (exactly an FP16 value), bp points at the panel (16 floats per k).
// acc (rows x 16, 32-byte aligned) holds the accumulators as FP32 values, in and out; the
// accumulation flags of row i, column j are ORed into flags[i * ld_flags + j] for j < ncols.
// Call with the caller's MXCSR (no flush to zero).
void gemm_f16acc_block_exact(int rows, std::int64_t kc, const float* a, std::int64_t a_stride, float a_scale,
                             const float* bp, Accum accum, const Mode& mode, float* acc, std::uint8_t* flags,
                             std::int64_t ld_flags, std::int64_t ncols);

// Accumulation (any Accum) over k in [k0, k1) of FP16 operands for the elements whose row of A is
// slow (row_slow[m], every column) or whose column of B is (col_slow[n], the other rows): values to
// acc[m * ld + n] as FP32 (FP16 accumulation: FP16 numbers; a NaN as the default NaN) and
// accumulation flags raised into rep at index m*N + n, as element_scalar gives them. A: the packed
// operand (its tame rows are exact).
void gemm_special(const GemmOperand& a, const GemmOperand& b, Accum accum, const Mode& mode, std::int64_t M,
                  std::int64_t N, std::int64_t k0, std::int64_t k1, const Packed& A,
                  const std::vector<std::uint8_t>& row_slow, const std::vector<std::uint8_t>& col_slow, float* acc,
                  std::int64_t ld, BulkReport& rep);

// The exact FP16 accumulation of one row, any inputs (NaN, Inf): a[k * sa] against the W columns of
// bt (K x W row-major, W a multiple of 8), results (FP16 numbers as FP32, NaN the default NaN) to
// out[0..W), flags (Invalid from 0*Inf and Inf - Inf, Overflow, Underflow, DenormalOut) to fl[0..W).
void gemm_f16acc_row_special(std::int64_t K, const float* a, std::int64_t sa, const float* bt, std::int64_t W,
                             Accum accum, const Mode& mode, float* out, std::uint8_t* fl);

// The scalar definition of one output element over k in [k0, k1), from the raw operands.
struct ElementResult {
  std::uint32_t bits;  // FP32 pattern (Accum::Fp32) or FP16 pattern (FP16 accumulation)
  Flags flags;         // accumulation flags (no Inexact, no DenormalIn)
};
ElementResult element_scalar(const GemmOperand& a, const GemmOperand& b, std::int64_t m, std::int64_t n,
                             std::int64_t k0, std::int64_t k1, Accum accum, const Mode& mode);

}  // namespace probelab::num::detail
