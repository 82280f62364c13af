#include "chip_model/kernels/depthwise_conv.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "numerics/fp16.h"

namespace probelab::chip::kernels {
namespace {

std::span<const num::f16> bits(const graph::Tensor& t) {
  const auto raw = t.data<std::uint16_t>();
  return {reinterpret_cast<const num::f16*>(raw.data()), raw.size()};
}

// The values the Cube reads: exact in FP32 (FP16 -> FP32 is exact); subnormals as signed zeros
// when the Mode flushes.
std::vector<float> widen(const graph::Tensor& t, bool ftz) {
  const std::span<const num::f16> b = bits(t);
  std::vector<float> f(b.size());
  (void)num::convert(b, std::span<float>(f));
  if (ftz)
    for (std::size_t i = 0; i < b.size(); ++i)
      if (num::is_subnormal(b[i])) f[i] = std::copysign(0.0f, f[i]);
  return f;
}

std::int64_t subnormals(const num::f16* b, std::int64_t n) {
  return num::scan(std::span<const num::f16>(b, static_cast<std::size_t>(n))).subnormal_count;
}

// The first output position whose window reads a subnormal of the plane (the first column of the
// im2col matrix holding one), the plane's first subnormal being element `from`; -1 if none.
std::int64_t first_subnormal_column(const ConvShape& s, const num::f16* plane, std::int64_t from) {
  std::int64_t first = -1;
  for (std::int64_t iy = from / s.w; iy < s.h; ++iy) {
    // Input row iy is read by output rows from ceil((iy + ph - (kh - 1) dh) / sh) on.
    const std::int64_t lo = iy + s.ph - (s.kh - 1) * s.dh;
    if (first >= 0 && lo > 0 && (lo + s.sh - 1) / s.sh * s.ow > first) break;
    for (std::int64_t ix = 0; ix < s.w; ++ix) {
      if (!num::is_subnormal(plane[iy * s.w + ix])) continue;
      for (std::int64_t i = 0; i < s.kh; ++i)
        for (std::int64_t j = 0; j < s.kw; ++j) {
          const std::int64_t ty = iy + s.ph - i * s.dh, tx = ix + s.pw - j * s.dw;
          if (ty < 0 || tx < 0 || ty % s.sh != 0 || tx % s.sw != 0) continue;
          const std::int64_t y = ty / s.sh, x = tx / s.sw;
          if (y >= s.oh || x >= s.ow) continue;
          const std::int64_t p = y * s.ow + x;
          if (first < 0 || p < first) first = p;
        }
    }
  }
  return first;
}

// One output channel of one image: y[P] from the plane x[h * w] and the window weights wk[kh * kw].
void channel(const ConvShape& s, const float* x, const float* wk, float* y) {
  std::fill(y, y + s.oh * s.ow, 0.0f);
  for (std::int64_t i = 0; i < s.kh; ++i)
    for (std::int64_t j = 0; j < s.kw; ++j) {
      const float a = wk[i * s.kw + j];
      const std::int64_t off = j * s.dw - s.pw;
      const auto [x0, x1] = tap_columns(s, off);
      for (std::int64_t row = 0; row < s.oh; ++row) {
        const std::int64_t iy = row * s.sh - s.ph + i * s.dh;
        if (iy < 0 || iy >= s.h) continue;
        const float* src = x + iy * s.w + off;
        float* dst = y + row * s.ow;
        if (s.sw == 1) {
          for (std::int64_t c = x0; c < x1; ++c) dst[c] = std::fma(a, src[c], dst[c]);
        } else {
          for (std::int64_t c = x0; c < x1; ++c) dst[c] = std::fma(a, src[c * s.sw], dst[c]);
        }
      }
    }
}

}  // namespace

std::optional<num::BulkReport> depthwise_conv(const ConvShape& s, std::int64_t images, std::int64_t groups,
                                              std::int64_t mg, const graph::Tensor& x, const graph::Tensor& w,
                                              const AccumulationMode& acc, const num::Mode& mode, float* y) {
  if (s.c != 1 || x.dtype() != graph::DType::F16 || w.dtype() != graph::DType::F16) return std::nullopt;
  if (acc.acc_dtype != graph::DType::F32 || acc.split_k_chunk != 0) return std::nullopt;
  const num::ScanReport xs = num::scan(bits(x)), ws = num::scan(bits(w));
  if (xs.nan_count + xs.inf_count + ws.nan_count + ws.inf_count != 0) return std::nullopt;
  const bool ftz = mode.denormal == num::DenormalMode::FlushToZero;
  const std::vector<float> xf = widen(x, ftz), wf = widen(w, ftz);
  const std::int64_t P = s.oh * s.ow, plane = s.h * s.w, taps = s.kh * s.kw;
  // DenormalIn as the GEMM reports it: at the first row of W_g or column of the group's im2col
  // matrix that holds a subnormal, whichever comes first in row-major order. The row of each group
  // is the same for every image.
  std::vector<std::int64_t> first_row(static_cast<std::size_t>(groups), -1);
  for (std::int64_t g = 0; g < groups && ws.subnormal_count > 0; ++g)
    for (std::int64_t j = 0; j < mg && first_row[static_cast<std::size_t>(g)] < 0; ++j)
      if (subnormals(bits(w).data() + (g * mg + j) * taps, taps) > 0) first_row[static_cast<std::size_t>(g)] = j;
  num::BulkReport rep;
  for (std::int64_t n = 0; n < images; ++n)
    for (std::int64_t g = 0; g < groups; ++g) {
      const std::int64_t in0 = (n * groups + g) * plane, y0 = (n * groups + g) * mg * P;
      for (std::int64_t j = 0; j < mg; ++j) {
        const std::int64_t m = g * mg + j;
        channel(s, xf.data() + in0, wf.data() + m * taps, y + y0 + j * P);
      }
      const std::int64_t row = first_row[static_cast<std::size_t>(g)];
      std::int64_t col = -1;
      if (xs.subnormal_count > 0) {
        const num::f16* px = bits(x).data() + in0;
        const num::ScanReport sub = num::scan(std::span<const num::f16>(px, static_cast<std::size_t>(plane)));
        if (sub.subnormal_count > 0) col = first_subnormal_column(s, px, sub.first_subnormal);
      }
      const std::int64_t at = row < 0 ? col : col < 0 ? row * P : std::min(row * P, col);
      if (at >= 0) rep.raise(num::Flags(num::Flag::DenormalIn), y0 + at);
    }
  return rep;
}

}  // namespace probelab::chip::kernels
