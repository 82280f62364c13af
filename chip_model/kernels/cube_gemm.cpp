// Cube GEMM on tensors, im2col/col2im.
#include "chip_model/kernels/cube_gemm.h"

#include <fmt/format.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "numerics/bf16.h"
#include "numerics/fp16.h"
#include "numerics/fp32.h"

namespace probelab::chip::kernels {

CubeOperand operand_of(const graph::Tensor& t, std::int64_t offset, std::int64_t ld, bool trans) {
  const auto* base = reinterpret_cast<const std::byte*>(t.bytes().data());
  return CubeOperand{t.dtype(), base + static_cast<std::size_t>(offset) * graph::dtype_size(t.dtype()), ld, trans};
}

num::GemmOptions gemm_options(const AccumulationMode& acc, const num::Mode& mode) {
  num::GemmOptions o;
  o.mode = mode;
  if (acc.acc_dtype == graph::DType::F16) {
    o.accum = acc.f16_double_rounding ? num::Accum::Fp16ViaFp32 : num::Accum::Fp16Rn;
    if (acc.split_k_chunk != 0)
      throw std::runtime_error("Cube: split-K with an FP16 accumulator is not modelled (use FP32 accumulation)");
  } else if (acc.acc_dtype == graph::DType::F32) {
    o.accum = num::Accum::Fp32;
    // The FP32 L0C result is returned as IEEE; saturation applies at the output conversion.
    if (acc.split_k_chunk == 0) o.mode.overflow = num::OverflowMode::InfNan;
  } else {
    throw std::runtime_error(fmt::format("Cube: accumulation dtype {} is not modelled (float32 or float16)",
                                         graph::dtype_name(acc.acc_dtype)));
  }
  if (acc.split_k_chunk != 0) {
    if (acc.partial_dtype != graph::DType::F16)
      throw std::runtime_error(fmt::format("Cube: split-K partials in {} are not modelled (float16 only)",
                                           graph::dtype_name(acc.partial_dtype)));
    o.split_k = acc.split_k_chunk;
  }
  return o;
}

namespace {

num::BulkReport gemm_f32(std::int64_t M, std::int64_t N, std::int64_t K, const CubeOperand& a, const CubeOperand& b,
                         float* c, std::int64_t ldc) {
  const auto* pa = static_cast<const float*>(a.data);
  const auto* pb = static_cast<const float*>(b.data);
  std::vector<float> brow;
  if (b.trans) brow.resize(static_cast<std::size_t>(N));
  for (std::int64_t m = 0; m < M; ++m) {
    float* acc = c + m * ldc;
    std::fill(acc, acc + N, 0.0f);
    for (std::int64_t k = 0; k < K; ++k) {
      const float av = a.trans ? pa[k * a.ld + m] : pa[m * a.ld + k];
      const float* bk = pb + k * b.ld;
      if (b.trans) {
        for (std::int64_t n = 0; n < N; ++n) brow[n] = pb[n * b.ld + k];
        bk = brow.data();
      }
      for (std::int64_t n = 0; n < N; ++n) acc[n] = std::fma(av, bk[n], acc[n]);
    }
  }
  return {};
}

}  // namespace

num::BulkReport cube_gemm(std::int64_t M, std::int64_t N, std::int64_t K, const CubeOperand& a, const CubeOperand& b,
                          float* c, std::int64_t ldc, const AccumulationMode& acc, const num::Mode& mode) {
  if (a.dtype != b.dtype)
    throw std::runtime_error(fmt::format("Cube: operands of different dtypes ({} and {})", graph::dtype_name(a.dtype),
                                         graph::dtype_name(b.dtype)));
  if (a.dtype == graph::DType::F32) return gemm_f32(M, N, K, a, b, c, ldc);
  if (a.dtype != graph::DType::F16 && a.dtype != graph::DType::BF16)
    throw std::runtime_error(fmt::format("Cube: {} operands are not supported", graph::dtype_name(a.dtype)));
  const num::InType in = a.dtype == graph::DType::F16 ? num::InType::F16 : num::InType::BF16;
  const num::GemmOperand ga{static_cast<const std::uint16_t*>(a.data), in, a.ld, a.trans};
  const num::GemmOperand gb{static_cast<const std::uint16_t*>(b.data), in, b.ld, b.trans};
  const num::GemmOutput out{c, num::OutType::F32, ldc};
  const num::GemmReport r = num::gemm(M, N, K, ga, gb, out, gemm_options(acc, mode));
  num::BulkReport br;
  br.flags = r.flags;
  br.first = r.first;
  return br;
}

graph::Tensor round_tensor(const graph::Tensor& t, graph::DType dtype, const num::Mode& mode) {
  const std::vector<float> v = t.dtype() == graph::DType::F32 ? std::vector<float>(t.data<float>().begin(),
                                                                                     t.data<float>().end())
                                                                : t.to_f32();
  graph::Tensor out = graph::Tensor::for_overwrite(graph::TensorDesc{dtype, t.shape(), graph::Format::ND});
  if (dtype == graph::DType::F16) {
    auto raw = out.data<std::uint16_t>();
    num::convert(v, std::span<num::f16>(reinterpret_cast<num::f16*>(raw.data()), raw.size()), mode);
  } else if (dtype == graph::DType::BF16) {
    auto raw = out.data<std::uint16_t>();
    num::convert(v, std::span<num::bf16>(reinterpret_cast<num::bf16*>(raw.data()), raw.size()), mode);
  } else if (dtype == graph::DType::F32) {
    auto dst = out.data<float>();
    for (std::size_t i = 0; i < v.size(); ++i) dst[i] = num::deliver(v[i], mode).value;
  } else {
    throw std::runtime_error(fmt::format("Cube: cannot round to {}", graph::dtype_name(dtype)));
  }
  return out;
}

graph::Tensor scale_tensor(const graph::Tensor& t, double scale, const num::Mode& mode) {
  std::vector<float> v = t.to_f32();
  graph::Tensor f = graph::Tensor::for_overwrite(graph::TensorDesc{graph::DType::F32, t.shape(), graph::Format::ND});
  auto dst = f.data<float>();
  for (std::size_t i = 0; i < v.size(); ++i) dst[i] = num::to_f32(static_cast<double>(v[i]) * scale, mode).value;
  return round_tensor(f, t.dtype(), mode);
}

std::pair<std::int64_t, std::int64_t> tap_columns(const ConvShape& g, std::int64_t off) {
  std::int64_t x0 = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
  std::int64_t x1 = g.w - off <= 0 ? 0 : (g.w - off + g.sw - 1) / g.sw;
  x0 = std::min(x0, g.ow);
  x1 = std::clamp(x1, x0, g.ow);
  return {x0, x1};
}

namespace {

// n bytes to d, from s (not overlapping) or, with kZero, zeros (s unused): short runs, the rows
// and planes of a small image, as 32-byte moves and one (overlapping) move of the rest, inline;
// long ones through the library.
struct B16 { std::uint64_t a, b; };
struct B32 { std::uint64_t a, b, c, e; };
template <bool kZero>
inline void fill_run(std::byte* d, const std::byte* s, std::size_t n) {
  const auto move = [&](auto chunk, std::size_t at) {  // sizeof(chunk) bytes at offset `at`
    if constexpr (!kZero) std::memcpy(&chunk, s + at, sizeof(chunk));
    std::memcpy(d + at, &chunk, sizeof(chunk));
  };
  // The first and the last sizeof(chunk) bytes (n in [k, 2k]); the source read before writing.
  const auto two = [&](auto chunk) {
    decltype(chunk) last{};
    if constexpr (!kZero) std::memcpy(&last, s + n - sizeof(chunk), sizeof(chunk));
    move(chunk, 0);
    std::memcpy(d + n - sizeof(chunk), &last, sizeof(chunk));
  };
  if (n > 256) {
    if constexpr (kZero) std::memset(d, 0, n);
    else std::memcpy(d, s, n);
  } else if (n > 64) {
    for (std::size_t i = 0; i + 32 < n; i += 32) move(B32{}, i);
    move(B32{}, n - 32);
  } else if (n >= 32) two(B32{});
  else if (n >= 16) two(B16{});
  else if (n >= 8) two(std::uint64_t{});
  else if (n >= 4) two(std::uint32_t{});
  else if (n >= 2) two(std::uint16_t{});
  else if (n == 1) move(std::byte{}, 0);
}

inline void copy_run(std::byte* d, const std::byte* s, std::size_t n) { fill_run<false>(d, s, n); }

// Zeroes d[0, n) inline (the padding at a row's ends is mostly one or two elements: a fill loop
// would be a library call per row end, a run of moves a branch chain); n <= 0: nothing.
template <class E>
void zero_elems(E* d, std::int64_t n) {
  if (n <= 2) {  // the common row end: one or two direct stores
    if (n > 0) d[0] = E{};
    if (n > 1) d[1] = E{};
    return;
  }
  fill_run<true>(reinterpret_cast<std::byte*>(d), nullptr, static_cast<std::size_t>(n) * sizeof(E));
}

// im2col_typed for unit strides with rows as wide as the image's (a "same" convolution): a tap's
// rows inside the image are one contiguous run of the channel's plane, copied at once, whose
// elements that fall in the padding columns (the neighbouring rows' ends) are then zeroed.
template <class E>
void im2col_unit_stride(const ConvShape& g, const E* img, E* cols, std::int64_t P) {
  for (std::int64_t ci = 0; ci < g.c; ++ci)
    for (std::int64_t i = 0; i < g.kh; ++i)
      for (std::int64_t j = 0; j < g.kw; ++j) {
        E* row = cols + ((ci * g.kh + i) * g.kw + j) * P;
        const std::int64_t off = j * g.dw - g.pw, dy = i * g.dh - g.ph;
        const auto [x0, x1] = tap_columns(g, off);
        const std::int64_t ya = std::clamp<std::int64_t>(-dy, 0, g.oh), yb = std::clamp<std::int64_t>(g.h - dy, ya, g.oh);
        if (x1 <= x0 || ya == yb) {
          zero_elems(row, g.oh * g.ow);
          continue;
        }
        zero_elems(row, ya * g.ow + x0);
        const E* src = img + (ci * g.h + ya + dy) * g.w + x0 + off;
        copy_run(reinterpret_cast<std::byte*>(row + ya * g.ow + x0), reinterpret_cast<const std::byte*>(src),
                 static_cast<std::size_t>((yb - ya - 1) * g.ow + x1 - x0) * sizeof(E));
        for (std::int64_t y = ya; y + 1 < yb; ++y) zero_elems(row + y * g.ow + x1, g.ow - x1 + x0);
        zero_elems(row + (yb - 1) * g.ow + x1, (g.oh - yb + 1) * g.ow - x1);
      }
}

// Rows at most this wide take im2col_masked (a row's ends cost more there than its elements).
constexpr std::int64_t kMaskedMaxWidth = 32;

// im2col_unit_stride for narrow rows: a tap's column row is the channel's plane read from
// (dy * w + off) on, its elements outside the image zero. The plane sits in a buffer whose zeros
// before and after it cover every such read that falls above or below the image (a row out of
// the image reads at least one row width before the plane's start or after its end), and a mask
// per tap column zeroes the elements that fall left or right of it; so a row is a run of 32-byte
// loads, ANDs and stores whatever its padding.
template <class E>
void im2col_masked(const ConvShape& g, const E* img, E* cols, std::int64_t P) {
  constexpr std::int64_t L = 32 / static_cast<std::int64_t>(sizeof(E));
  const std::int64_t plane = g.h * g.w;
  // Reads span [lo, hi) of the plane's indices: t + shift over t in [0, P) and every tap's shift.
  const std::int64_t lo = std::min<std::int64_t>(0, -g.ph * g.w - g.pw);
  const std::int64_t hi = std::max(plane, P + ((g.kh - 1) * g.dh - g.ph) * g.w + (g.kw - 1) * g.dw - g.pw);
  thread_local std::vector<E> buf, mask;
  buf.assign(static_cast<std::size_t>(hi - lo), E{});
  E* base = buf.data() + (-lo);
  mask.assign(static_cast<std::size_t>(g.kw * P), E{});
  for (std::int64_t j = 0; j < g.kw; ++j) {
    const auto [x0, x1] = tap_columns(g, j * g.dw - g.pw);
    for (std::int64_t y = 0; y < g.oh; ++y)
      std::fill(mask.data() + j * P + y * g.ow + x0, mask.data() + j * P + y * g.ow + x1, static_cast<E>(~E{}));
  }
  for (std::int64_t ci = 0; ci < g.c; ++ci) {
    std::copy_n(img + ci * plane, plane, base);
    for (std::int64_t i = 0; i < g.kh; ++i)
      for (std::int64_t j = 0; j < g.kw; ++j) {
        const E* src = base + (i * g.dh - g.ph) * g.w + j * g.dw - g.pw;
        const E* m = mask.data() + j * P;
        E* row = cols + ((ci * g.kh + i) * g.kw + j) * P;
        std::int64_t t = 0;
        for (; t + L <= P; t += L) {
          const __m256i v = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + t)),
                                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m + t)));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + t), v);
        }
        for (; t < P; ++t) row[t] = static_cast<E>(src[t] & m[t]);
      }
  }
}

// Element copies of one fixed width: a typed load/store, never a library call per element.
template <class E>
void im2col_typed(const ConvShape& g, const E* img, E* cols, std::int64_t P) {
  if (g.sw == 1 && g.sh == 1 && g.ow == g.w && P == g.oh * g.ow)
    return g.ow <= kMaskedMaxWidth ? im2col_masked(g, img, cols, P) : im2col_unit_stride(g, img, cols, P);
  for (std::int64_t ci = 0; ci < g.c; ++ci)
    for (std::int64_t i = 0; i < g.kh; ++i)
      for (std::int64_t j = 0; j < g.kw; ++j) {
        E* row = cols + ((ci * g.kh + i) * g.kw + j) * P;
        const std::int64_t off = j * g.dw - g.pw;
        const auto [x0, x1] = tap_columns(g, off);
        for (std::int64_t y = 0; y < g.oh; ++y) {
          const std::int64_t iy = y * g.sh - g.ph + i * g.dh;
          E* dst = row + y * g.ow;
          if (iy < 0 || iy >= g.h) {
            std::fill(dst, dst + g.ow, E{});
            continue;
          }
          const E* src = img + (ci * g.h + iy) * g.w;  // input column x*sw + off
          zero_elems(dst, x0);
          if (g.sw == 1) {
            if (x1 > x0)
              copy_run(reinterpret_cast<std::byte*>(dst + x0), reinterpret_cast<const std::byte*>(src + x0 + off),
                       static_cast<std::size_t>(x1 - x0) * sizeof(E));
          } else {
            for (std::int64_t x = x0; x < x1; ++x) dst[x] = src[x * g.sw + off];
          }
          zero_elems(dst + x1, g.ow - x1);
        }
      }
}

template <class E>
void im2col_taps_typed(const std::vector<std::int64_t>& taps, std::int64_t channels, std::int64_t kn, std::int64_t P,
                       std::int64_t plane, const E* img, E* cols, std::int64_t row_stride) {
  for (std::int64_t c = 0; c < channels; ++c)
    for (std::int64_t t = 0; t < kn; ++t) {
      const std::int64_t* tap = taps.data() + t * P;
      E* row = cols + (c * kn + t) * row_stride;
      const E* src = img + c * plane;
      for (std::int64_t p = 0; p < P; ++p) row[p] = tap[p] < 0 ? E{} : src[tap[p]];
    }
}

template <class F>
void by_width(std::size_t elem, F&& f) {
  switch (elem) {
    case 1: return f(std::uint8_t{});
    case 2: return f(std::uint16_t{});
    case 4: return f(std::uint32_t{});
    case 8: return f(std::uint64_t{});
    default: throw std::runtime_error(fmt::format("im2col: {}-byte elements are not supported", elem));
  }
}

}  // namespace

void im2col(const ConvShape& g, const std::byte* img, std::size_t elem, std::byte* cols, std::int64_t row_stride) {
  by_width(elem, [&](auto e) {
    using E = decltype(e);
    im2col_typed(g, reinterpret_cast<const E*>(img), reinterpret_cast<E*>(cols), row_stride);
  });
}

void im2col_taps(const std::vector<std::int64_t>& taps, std::int64_t channels, std::int64_t kn, std::int64_t P,
                 std::int64_t plane, const std::byte* img, std::size_t elem, std::byte* cols, std::int64_t row_stride) {
  by_width(elem, [&](auto e) {
    using E = decltype(e);
    im2col_taps_typed(taps, channels, kn, P, plane, reinterpret_cast<const E*>(img), reinterpret_cast<E*>(cols),
                      row_stride);
  });
}

void col2im_taps(const std::vector<std::int64_t>& taps, std::int64_t channels, std::int64_t kn, std::int64_t P,
                 std::int64_t plane, const float* cols, float* img) {
  for (std::int64_t c = 0; c < channels; ++c)
    for (std::int64_t t = 0; t < kn; ++t) {
      const std::int64_t* tap = taps.data() + t * P;
      const float* row = cols + (c * kn + t) * P;
      float* dst = img + c * plane;
      for (std::int64_t p = 0; p < P; ++p)
        if (tap[p] >= 0) dst[tap[p]] += row[p];
    }
}

void col2im(const ConvShape& g, const float* cols, float* img) {
  const std::int64_t P = g.cols();
  for (std::int64_t ci = 0; ci < g.c; ++ci)
    for (std::int64_t i = 0; i < g.kh; ++i)
      for (std::int64_t j = 0; j < g.kw; ++j) {
        const float* row = cols + ((ci * g.kh + i) * g.kw + j) * P;
        for (std::int64_t y = 0; y < g.oh; ++y) {
          const std::int64_t iy = y * g.sh - g.ph + i * g.dh;
          if (iy < 0 || iy >= g.h) continue;
          float* dst = img + (ci * g.h + iy) * g.w;
          const float* src = row + y * g.ow;
          const std::int64_t off = j * g.dw - g.pw;  // ix = x * sw + off
          if (g.sw == 1) {  // one run of independent adds (the same order per element)
            const std::int64_t x0 = std::clamp<std::int64_t>(-off, 0, g.ow), x1 = std::clamp<std::int64_t>(g.w - off, x0, g.ow);
            for (std::int64_t x = x0; x < x1; ++x) dst[x + off] += src[x];
            continue;
          }
          for (std::int64_t x = 0; x < g.ow; ++x) {
            const std::int64_t ix = x * g.sw + off;
            if (ix >= 0 && ix < g.w) dst[ix] += src[x];
          }
        }
      }
}

}  // namespace probelab::chip::kernels
