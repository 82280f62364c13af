// Private: geometry of ConvTranspose, shared by its reference kernel (graph/ops) and its Cube
// kernel (chip_model/kernels).
#pragma once

#include <cstdint>

#include "graph/op.h"
#include "graph/ops/spatial.h"

namespace probelab::graph::ops {

/// X [N, C, in...], W [C, M/group, k...], Y [N, M, out...]. `win` is the window of the Conv that
/// ConvTranspose is the input-adjoint of: win.in = Y's spatial dims, win.out = X's, with the
/// kernel, strides, dilations and begin pads (tap_table(win) maps (tap, X position) to the Y
/// offset it adds into, or -1).
struct ConvTransposeGeom {
  std::int64_t n = 0, c = 0, m = 0, group = 1;
  Window win;
  std::int64_t cg() const { return c / group; }
  std::int64_t mg() const { return m / group; }
  Shape y_shape() const {
    Shape s{n, m};
    s.insert(s.end(), win.in.begin(), win.in.end());
    return s;
  }
};

/// Reads the attributes of `op` (ONNX ConvTranspose: output_shape, output_padding, auto_pad,
/// pads, strides, dilations, group, kernel_shape) for input shape `x` and weight shape `w`.
/// Fails naming the op on inconsistent shapes or attributes.
ConvTransposeGeom conv_transpose_geom(const Op& op, const Shape& x, const Shape& w);

}  // namespace probelab::graph::ops
