// Private: sliding-window geometry shared by Conv and the pooling ops (ONNX semantics of
// kernel_shape, strides, dilations, pads, auto_pad and ceil_mode).
#pragma once

#include <cstdint>
#include <vector>

#include "graph/op.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::ops {

struct Window {
  std::vector<std::int64_t> in, kernel, stride, dilation, pad_begin, pad_end, out;
  std::size_t rank() const { return in.size(); }
  std::int64_t in_numel() const { return prod(in, 0, in.size()); }
  std::int64_t out_numel() const { return prod(out, 0, out.size()); }
  std::int64_t kernel_numel() const { return prod(kernel, 0, kernel.size()); }
};

/// Reads strides, dilations, pads and auto_pad of `op` (absent lists mean 1s / 0s) for spatial
/// input dims `in` and kernel dims `kernel`; `ceil_mode` rounds output sizes up (pooling) but never
/// starts a window inside the end padding. Fails naming the op on inconsistent attributes.
Window make_window(const Op& op, const std::vector<std::int64_t>& in, const std::vector<std::int64_t>& kernel,
                   bool ceil_mode);

/// For every (kernel tap, output position) pair, row-major over [kernel_numel, out_numel], the
/// row-major offset of the input element it reads within one spatial plane, or -1 in padding.
std::vector<std::int64_t> tap_table(const Window& w);

/// kernel_shape attribute, checked against the spatial rank; `fallback` when absent (Conv: W's dims).
std::vector<std::int64_t> kernel_shape(const Op& op, std::size_t rank, const std::vector<std::int64_t>& fallback);

/// Attribute specs common to windowed ops.
std::vector<AttrSpec> window_attrs(bool with_dilations);

}  // namespace probelab::graph::ops
