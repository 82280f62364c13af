// Sliding-window geometry shared by Conv and the pooling ops.
#include "graph/ops/spatial.h"

#include <algorithm>

namespace probelab::graph::ops {
namespace {

std::vector<std::int64_t> list_attr(const Op& op, const char* key, std::size_t n, std::int64_t def) {
  std::vector<std::int64_t> v = op.attr_ints(key, {});
  if (v.empty()) return std::vector<std::int64_t>(n, def);
  if (v.size() != n) fail(op, "attribute '{}' has {} values, expected {} (one per spatial dimension)", key, v.size(), n);
  for (std::int64_t x : v)
    if (x < 1) fail(op, "attribute '{}' values must be >= 1, got {}", key, x);
  return v;
}

}  // namespace

std::vector<std::int64_t> kernel_shape(const Op& op, std::size_t rank, const std::vector<std::int64_t>& fallback) {
  std::vector<std::int64_t> k = op.attr_ints("kernel_shape", {});
  if (k.empty()) {
    if (fallback.empty()) fail(op, "missing attribute 'kernel_shape'");
    k = fallback;
  }
  if (k.size() != rank) fail(op, "kernel_shape has {} values, expected {}", k.size(), rank);
  for (std::int64_t x : k)
    if (x < 1) fail(op, "kernel_shape values must be >= 1, got {}", x);
  return k;
}

Window make_window(const Op& op, const std::vector<std::int64_t>& in, const std::vector<std::int64_t>& kernel,
                   bool ceil_mode) {
  const std::size_t r = in.size();
  Window w;
  w.in = in;
  w.kernel = kernel;
  w.stride = list_attr(op, "strides", r, 1);
  w.dilation = list_attr(op, "dilations", r, 1);
  w.pad_begin.assign(r, 0);
  w.pad_end.assign(r, 0);
  w.out.assign(r, 0);
  const std::string auto_pad = op.attr_str("auto_pad", "NOTSET");
  std::vector<std::int64_t> pads = op.attr_ints("pads", {});
  if (!pads.empty()) {
    if (auto_pad != "NOTSET") fail(op, "attribute 'pads' cannot be combined with auto_pad={}", auto_pad);
    if (pads.size() != 2 * r) fail(op, "attribute 'pads' has {} values, expected {}", pads.size(), 2 * r);
    for (std::int64_t p : pads)
      if (p < 0) fail(op, "attribute 'pads' values must be >= 0, got {}", p);
  }
  for (std::size_t i = 0; i < r; ++i) {
    const std::int64_t eff = (kernel[i] - 1) * w.dilation[i] + 1;
    const std::int64_t s = w.stride[i];
    if (auto_pad == "NOTSET" || auto_pad == "VALID") {
      if (!pads.empty()) {
        w.pad_begin[i] = pads[i];
        w.pad_end[i] = pads[i + r];
      }
      const std::int64_t span = in[i] + w.pad_begin[i] + w.pad_end[i] - eff;
      if (span < 0)
        fail(op, "window of extent {} does not fit spatial dimension {} of size {} (+ pads {}, {})", eff, i, in[i],
             w.pad_begin[i], w.pad_end[i]);
      w.out[i] = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
      if (ceil_mode && (w.out[i] - 1) * s >= in[i] + w.pad_begin[i]) --w.out[i];
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      w.out[i] = (in[i] + s - 1) / s;
      const std::int64_t total = std::max<std::int64_t>(0, (w.out[i] - 1) * s + eff - in[i]);
      const std::int64_t small = total / 2, big = total - small;
      w.pad_begin[i] = auto_pad == "SAME_UPPER" ? small : big;
      w.pad_end[i] = auto_pad == "SAME_UPPER" ? big : small;
    } else {
      fail(op, "attribute 'auto_pad' must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got \"{}\"", auto_pad);
    }
  }
  return w;
}

std::vector<std::int64_t> tap_table(const Window& w) {
  const std::size_t r = w.rank();
  const auto in_st = strides_of(w.in);
  const std::int64_t n_k = w.kernel_numel(), n_o = w.out_numel();
  std::vector<std::int64_t> table(static_cast<std::size_t>(n_k * n_o));
  std::vector<std::int64_t> k(r, 0), o(r, 0);
  for (std::int64_t ki = 0; ki < n_k; ++ki) {
    std::fill(o.begin(), o.end(), 0);
    for (std::int64_t oi = 0; oi < n_o; ++oi) {
      std::int64_t off = 0;
      for (std::size_t d = 0; d < r && off >= 0; ++d) {
        const std::int64_t p = o[d] * w.stride[d] - w.pad_begin[d] + k[d] * w.dilation[d];
        off = p < 0 || p >= w.in[d] ? -1 : off + p * in_st[d];
      }
      table[static_cast<std::size_t>(ki * n_o + oi)] = off;
      for (std::size_t d = r; d-- > 0;) {
        if (++o[d] < w.out[d]) break;
        o[d] = 0;
      }
    }
    for (std::size_t d = r; d-- > 0;) {
      if (++k[d] < w.kernel[d]) break;
      k[d] = 0;
    }
  }
  return table;
}

std::vector<AttrSpec> window_attrs(bool with_dilations) {
  std::vector<AttrSpec> a = {
      attr_str("auto_pad", "NOTSET", "NOTSET (use pads), SAME_UPPER, SAME_LOWER or VALID"),
      attr_ints("kernel_shape", {}, "window size per spatial dimension"),
      attr_ints("pads", {}, "[begin..., end...] zero padding per spatial dimension (default 0)"),
      attr_ints("strides", {}, "stride per spatial dimension (default 1)"),
  };
  if (with_dilations) a.push_back(attr_ints("dilations", {}, "dilation per spatial dimension (default 1)"));
  return a;
}

}  // namespace probelab::graph::ops
