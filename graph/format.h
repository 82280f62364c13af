// Memory formats: physical shapes and byte-exact conversions between ND/NCHW, NHWC and the Ascend
// private formats NC1HWC0 and FRACTAL_NZ.
//
// A TensorDesc's `shape` is always the logical shape; `format` says how the elements are stored:
//   ND, NCHW    row-major over the logical shape (any rank; NCHW just names the 4-D meaning).
//   NHWC        logical [N, C, H, W] (rank 4) stored as [N, H, W, C].
//   NC1HWC0     logical [N, C, H, W] (rank 4) stored as [N, C1, H, W, C0] with C0 = 16 and
//               C1 = ceil(C / 16); logical channel c lives at (c1, c0) = (c / 16, c % 16).
//               Channels c >= C of the last C1 block are padding and hold zero bytes.
//   FRACTAL_NZ  logical [B..., M, N] (rank >= 2) stored as [B..., N1, M1, 16, 16] with
//               M1 = ceil(M / 16), N1 = ceil(N / 16): the matrix is cut into 16x16 fractals, the
//               fractals are ordered column-major ("N": all fractals of column block 0, top to
//               bottom, then column block 1, ...) and each fractal is row-major ("Z"), i.e. element
//               (m, n) lives at [n / 16, m / 16, m % 16, n % 16]. Rows m >= M and columns n >= N
//               are padding and hold zero bytes. Batch dimensions B... are kept outermost.
// The same C0/fractal size of 16 is used for every dtype (the model's choice). Conversions move
// element bytes unchanged, so round trips are exact for every dtype and every bit pattern.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "graph/dtype.h"
#include "graph/tensor.h"

namespace probelab::graph {

/// Channel block of NC1HWC0 and side of a FRACTAL_NZ fractal.
inline constexpr std::int64_t kC0 = 16;
inline constexpr std::int64_t kFractal = 16;

/// Shape of the stored elements of `d` (including padding). Throws GraphError when the logical
/// rank does not suit the format (NHWC/NC1HWC0 need rank 4, FRACTAL_NZ rank >= 2).
Shape physical_shape(const TensorDesc& d);
/// Number of stored elements (product of physical_shape).
std::int64_t physical_numel(const TensorDesc& d);
/// Bytes occupied by a tensor of desc `d`.
std::size_t physical_nbytes(const TensorDesc& d);

/// For every logical element (row-major over the logical shape) its element offset in the stored
/// layout of `format`. Padding offsets never appear.
std::vector<std::int64_t> physical_offsets(const Shape& logical, Format format);

/// Moves the elements of a buffer laid out as `from` into a buffer laid out as `to` (both for the
/// same logical shape and element size). `dst` must have the size of the `to` layout; padding
/// elements of `dst` are set to zero bytes.
void convert_layout(std::span<const std::byte> src, Format from, std::span<std::byte> dst, Format to,
                    const Shape& logical, std::size_t elem_size);

/// Same tensor stored in another format (dtype and logical shape unchanged).
Tensor convert_format(const Tensor& t, Format to);
/// The plain layout of a tensor: NCHW for NHWC/NC1HWC0 inputs, ND for FRACTAL_NZ, unchanged otherwise.
Tensor to_logical(const Tensor& t);
/// As above; a tensor already in its plain layout is moved, not copied.
Tensor to_logical(Tensor&& t);

}  // namespace probelab::graph
