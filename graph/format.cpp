// Physical shapes and layout conversions, see format.h for the exact layouts.
#include "graph/format.h"

#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "graph/graph.h"

namespace probelab::graph {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

void check_rank(const Shape& s, Format f) {
  const bool ok = (f == Format::NHWC || f == Format::NC1HWC0) ? s.size() == 4
                  : f == Format::FRACTAL_NZ                    ? s.size() >= 2
                                                               : true;
  if (!ok)
    throw GraphError(fmt::format("format {} does not apply to logical shape {} (needs {})", format_name(f),
                                 shape_str(s), f == Format::FRACTAL_NZ ? "rank >= 2" : "rank 4 [N, C, H, W]"));
  for (std::int64_t d : s)
    if (d < 0) throw GraphError(fmt::format("negative dimension in shape {}", shape_str(s)));
}

template <std::size_t N>
void scatter(const std::byte* src, const std::int64_t* src_off, std::byte* dst, const std::int64_t* dst_off,
             std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    std::memcpy(dst + dst_off[i] * N, src + src_off[i] * N, N);
}

}  // namespace

Shape physical_shape(const TensorDesc& d) {
  const Shape& s = d.shape;
  check_rank(s, d.format);
  switch (d.format) {
    case Format::ND:
    case Format::NCHW: return s;
    case Format::NHWC: return {s[0], s[2], s[3], s[1]};
    case Format::NC1HWC0: return {s[0], ceil_div(s[1], kC0), s[2], s[3], kC0};
    case Format::FRACTAL_NZ: {
      Shape p(s.begin(), s.end() - 2);
      const std::int64_t m = s[s.size() - 2], n = s[s.size() - 1];
      p.insert(p.end(), {ceil_div(n, kFractal), ceil_div(m, kFractal), kFractal, kFractal});
      return p;
    }
  }
  throw GraphError("physical_shape: invalid format value");
}

std::int64_t physical_numel(const TensorDesc& d) {
  // Formats that only permute dimensions hold the logical elements: no shape copy needed.
  if (d.format == Format::ND || d.format == Format::NCHW || d.format == Format::NHWC) {
    check_rank(d.shape, d.format);
    return numel(d.shape);
  }
  return numel(physical_shape(d));
}

std::size_t physical_nbytes(const TensorDesc& d) {
  return static_cast<std::size_t>(physical_numel(d)) * dtype_size(d.dtype);
}

std::vector<std::int64_t> physical_offsets(const Shape& s, Format f) {
  check_rank(s, f);
  std::vector<std::int64_t> off(static_cast<std::size_t>(numel(s)));
  std::size_t i = 0;
  switch (f) {
    case Format::ND:
    case Format::NCHW:
      for (; i < off.size(); ++i) off[i] = static_cast<std::int64_t>(i);
      break;
    case Format::NHWC: {
      const std::int64_t N = s[0], C = s[1], H = s[2], W = s[3];
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t c = 0; c < C; ++c)
          for (std::int64_t h = 0; h < H; ++h)
            for (std::int64_t w = 0; w < W; ++w) off[i++] = ((n * H + h) * W + w) * C + c;
      break;
    }
    case Format::NC1HWC0: {
      const std::int64_t N = s[0], C = s[1], H = s[2], W = s[3], C1 = ceil_div(C, kC0);
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t c = 0; c < C; ++c)
          for (std::int64_t h = 0; h < H; ++h)
            for (std::int64_t w = 0; w < W; ++w)
              off[i++] = (((n * C1 + c / kC0) * H + h) * W + w) * kC0 + c % kC0;
      break;
    }
    case Format::FRACTAL_NZ: {
      const std::int64_t M = s[s.size() - 2], Nn = s[s.size() - 1];
      const std::int64_t M1 = ceil_div(M, kFractal), N1 = ceil_div(Nn, kFractal);
      const std::int64_t batch = M * Nn == 0 ? 0 : numel(s) / (M * Nn);
      const std::int64_t block = N1 * M1 * kFractal * kFractal;
      for (std::int64_t b = 0; b < batch; ++b)
        for (std::int64_t m = 0; m < M; ++m)
          for (std::int64_t n = 0; n < Nn; ++n)
            off[i++] = b * block + ((n / kFractal) * M1 + m / kFractal) * kFractal * kFractal +
                       (m % kFractal) * kFractal + n % kFractal;
      break;
    }
  }
  return off;
}

void convert_layout(std::span<const std::byte> src, Format from, std::span<std::byte> dst, Format to,
                    const Shape& logical, std::size_t elem_size) {
  const auto src_need = static_cast<std::size_t>(physical_numel({DType::F32, logical, from})) * elem_size;
  const auto dst_need = static_cast<std::size_t>(physical_numel({DType::F32, logical, to})) * elem_size;
  if (src.size() != src_need || dst.size() != dst_need)
    throw GraphError(fmt::format("convert_layout {} -> {} of {}: buffer sizes {} / {} bytes, expected {} / {}",
                                 format_name(from), format_name(to), shape_str(logical), src.size(), dst.size(),
                                 src_need, dst_need));
  const auto so = physical_offsets(logical, from);
  const auto dof = physical_offsets(logical, to);
  if (dof.size() * elem_size != dst.size()) std::memset(dst.data(), 0, dst.size());  // zero the padding
  switch (elem_size) {
    case 1: scatter<1>(src.data(), so.data(), dst.data(), dof.data(), so.size()); break;
    case 2: scatter<2>(src.data(), so.data(), dst.data(), dof.data(), so.size()); break;
    case 4: scatter<4>(src.data(), so.data(), dst.data(), dof.data(), so.size()); break;
    case 8: scatter<8>(src.data(), so.data(), dst.data(), dof.data(), so.size()); break;
    default:
      for (std::size_t i = 0; i < so.size(); ++i)
        std::memcpy(dst.data() + dof[i] * elem_size, src.data() + so[i] * elem_size, elem_size);
  }
}

Tensor convert_format(const Tensor& t, Format to) {
  TensorDesc d = t.desc();
  d.format = to;
  Tensor out = Tensor::for_overwrite(d);  // convert_layout writes every element and zeroes the padding
  convert_layout(t.bytes(), t.desc().format, out.bytes(), to, d.shape, dtype_size(d.dtype));
  return out;
}

Tensor to_logical(const Tensor& t) {
  switch (t.desc().format) {
    case Format::NHWC:
    case Format::NC1HWC0: return convert_format(t, Format::NCHW);
    case Format::FRACTAL_NZ: return convert_format(t, Format::ND);
    default: return t;
  }
}

Tensor to_logical(Tensor&& t) {
  const Format f = t.desc().format;
  return f == Format::ND || f == Format::NCHW ? std::move(t) : to_logical(std::as_const(t));
}

}  // namespace probelab::graph
