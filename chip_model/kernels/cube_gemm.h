// The Cube unit's matrix multiply on tensors: numerics::gemm for FP16/BF16 operands (bit-exact,
// documented K order), and a sequential-K FP32 loop for FP32 operands; plus im2col.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "chip_model/hooks/fault_hooks.h"
#include "numerics/bulk.h"
#include "numerics/gemm.h"
#include "numerics/mode.h"
#include "graph/dtype.h"
#include "graph/tensor.h"

namespace probelab::chip::kernels {

/// A matrix operand: element (r, c) at data[r * ld + c], or data[c * ld + r] when `trans`.
/// `data` points at 16-bit patterns for F16/BF16 and at floats for F32.
struct CubeOperand {
  graph::DType dtype = graph::DType::F16;
  const void* data = nullptr;
  std::int64_t ld = 0;
  bool trans = false;
};

/// Operand view of tensor `t` starting at element `offset`.
CubeOperand operand_of(const graph::Tensor& t, std::int64_t offset, std::int64_t ld, bool trans);

/// numerics GEMM options of an accumulation mode (throws std::runtime_error for combinations
/// the Cube model lacks, e.g. split-K with a non-FP16 partial dtype).
num::GemmOptions gemm_options(const AccumulationMode& acc, const num::Mode& mode);

/// C[M x N] (FP32, row-major, leading dimension ldc) = A[M x K] * B[K x N].
///  - F16/BF16 operands: numerics::gemm with FP32 output (see numerics/gemm.h for the order and
///    the accumulation modes); the returned flags are those of the accumulation (the output
///    conversion is the caller's, through the Mode, which gives the bits numerics::gemm would
///    deliver directly). With FP32 accumulation the result is delivered in INF_NAN mode (the
///    Mode's saturation applies at the output conversion, so Inf/NaN stay visible to detection);
///    FP16 accumulators and split-K partials go through the full Mode at every step.
///  - F32 operands: acc = fma(a(m,k), b(k,n), acc) for k = 0..K-1 from +0, no flags.
/// Indices of the returned report are m * N + n.
num::BulkReport cube_gemm(std::int64_t M, std::int64_t N, std::int64_t K, const CubeOperand& a, const CubeOperand& b,
                          float* c, std::int64_t ldc, const AccumulationMode& acc, const num::Mode& mode);

/// A copy of a float tensor with every element multiplied by `scale` and rounded back to the
/// tensor's dtype through the Mode (AccumulationMode::input_scale).
graph::Tensor scale_tensor(const graph::Tensor& t, double scale, const num::Mode& mode);

/// A float tensor converted to `dtype` (F16/BF16/F32) through the Mode (an FP32 intermediate
/// feeding a Cube op of a fused body).
graph::Tensor round_tensor(const graph::Tensor& t, graph::DType dtype, const num::Mode& mode);

/// Geometry of a 2-D convolution window (NCHW).
struct ConvShape {
  std::int64_t c = 0, h = 0, w = 0;      // input channels (of one group) and spatial size
  std::int64_t kh = 1, kw = 1;
  std::int64_t sh = 1, sw = 1, dh = 1, dw = 1;
  std::int64_t ph = 0, pw = 0;           // padding before (top / left)
  std::int64_t oh = 0, ow = 0;
  std::int64_t rows() const { return c * kh * kw; }
  std::int64_t cols() const { return oh * ow; }
};

/// The output columns x of a window tap whose input column x*sw + off (off = j*dw - pw) lies
/// inside the image: [first, second), empty when none does.
std::pair<std::int64_t, std::int64_t> tap_columns(const ConvShape& g, std::int64_t off);

/// cols[(ci * kh + i) * kw + j][y * ow + x] = img[ci][y*sh - ph + i*dh][x*sw - pw + j*dw] (zero
/// outside the image), for `elem` = 2 (16-bit patterns) or 4 (floats) bytes per element.
/// `img` points at the group's first channel of one image; row r of cols starts at element
/// r * row_stride (row_stride >= oh * ow).
void im2col(const ConvShape& g, const std::byte* img, std::size_t elem, std::byte* cols, std::int64_t row_stride);

/// The adjoint of im2col: img[ci][y][x] += cols[...] over every window position in the order
/// (ci, i, j, y, x) row-major, in FP32. `img` must be zeroed by the caller.
void col2im(const ConvShape& g, const float* cols, float* img);

/// The same over any number of spatial dims, driven by a tap table (graph::ops::tap_table: for
/// tap t and window position p, the offset taps[t * P + p] in one input plane of `plane`
/// elements, or -1 in padding): cols[(c * kn + t) * row_stride + p] = img[c * plane + tap]
/// (zero at -1), for c < channels.
void im2col_taps(const std::vector<std::int64_t>& taps, std::int64_t channels, std::int64_t kn, std::int64_t P,
                 std::int64_t plane, const std::byte* img, std::size_t elem, std::byte* cols, std::int64_t row_stride);
/// img[c * plane + tap] += cols[(c * kn + t) * P + p] in the order (c, t, p), in FP32.
void col2im_taps(const std::vector<std::int64_t>& taps, std::int64_t channels, std::int64_t kn, std::int64_t P,
                 std::int64_t plane, const float* cols, float* img);

}  // namespace probelab::chip::kernels
