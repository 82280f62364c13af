// What the device computes for capture and breakpoint tasks, defined exactly so that a host (the
// probe runtime, a CPU reference) can reproduce it bit for bit. Header-only, no SystemC.
//
// Elements are taken in row-major order over the logical shape (after any format conversion).
//  - statistics (spec::CaptureStats), FP64 arithmetic in that order:
//      count      = number of elements; nan_count / inf_count = NaN / +-Inf elements;
//      over the finite elements only (n of them): finite_min, finite_max, finite_max_abs = max |x|,
//      finite_mean = (sum x) / n, finite_abs_mean = (sum |x|) / n, and the finite parts below;
//      zero_count = finite elements equal to +-0. With n = 0 the finite_* fields are 0.
//      Over every element, as numpy computes them (np.min, np.max, np.mean, np.mean(np.abs),
//      np.std, np.linalg.norm, np.max(np.abs)):
//        - a NaN present: min, max, mean, abs_mean, std, l2, max_abs are NaN;
//        - else an Inf present: min = -Inf if a -Inf is present (else finite_min, or +Inf when
//          every element is +Inf), max likewise, max_abs = abs_mean = l2 = +Inf, mean = +-Inf
//          (NaN when both signs are present), std = NaN;
//        - else min = finite_min, max = finite_max, max_abs = finite_max_abs, mean = finite_mean,
//          abs_mean = finite_abs_mean, l2 = sqrt(sum x*x), std = sqrt((sum (x - mean)^2) / n)
//          (population, second pass over the data).
//      With count = 0 every FP field is 0.
//    Every sum runs over kStatLanes = 16 interleaved FP64 partial sums: element i is added to
//    partial i mod 16 (each partial in element order; non-finite elements add 0), then the
//    partials are added in order 0..15 — the way a 16-lane vector unit accumulates, and
//    bit-reproducible by any host. min/max compare with < / > lane by lane, lanes in order.
//  - hash: XXH64 (seed 0) of the element bytes in that order (the FullTensor payload bytes).
//  - breakpoint predicate: see eval_predicate().
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string_view>

#include <zlib.h>

#if defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "chip_model/spec/capture_record.h"
#include "chip_model/spec/kernel_args.h"
#include "graph/dtype.h"

namespace probelab::spec {

/// Exact value of an FP16 bit pattern as a double (NaN payloads not preserved).
inline double f16_bits_to_double(std::uint16_t h) {
#if defined(__F16C__)
  return static_cast<double>(_cvtsh_ss(h));  // exact: every FP16 value is an FP32 value
#else
  const int exp = (h >> 10) & 0x1F;
  const int frac = h & 0x3FF;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exp == 0x1F) return frac ? std::numeric_limits<double>::quiet_NaN() : sign * std::numeric_limits<double>::infinity();
  if (exp == 0) return sign * std::ldexp(static_cast<double>(frac), -24);
  return sign * std::ldexp(static_cast<double>(frac | 0x400), exp - 25);
#endif
}
inline double bf16_bits_to_double(std::uint16_t b) {
  return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16));
}

/// Bytes per element of a graph::DType code, 0 if unknown.
inline std::size_t element_bytes(std::uint8_t dtype) {
  switch (static_cast<graph::DType>(dtype)) {
    case graph::DType::F32: case graph::DType::I32: return 4;
    case graph::DType::F16: case graph::DType::BF16: return 2;
    case graph::DType::I64: case graph::DType::F64: return 8;
    case graph::DType::Bool: case graph::DType::I8: case graph::DType::U8: return 1;
  }
  return 0;
}

/// Element i of `bytes` (dtype code `dtype`) as a double.
inline double element_value(std::span<const std::byte> bytes, std::uint8_t dtype, std::size_t i) {
  const std::byte* p = bytes.data() + i * element_bytes(dtype);
  switch (static_cast<graph::DType>(dtype)) {
    case graph::DType::F32: { float v; std::memcpy(&v, p, 4); return v; }
    case graph::DType::F16: { std::uint16_t v; std::memcpy(&v, p, 2); return f16_bits_to_double(v); }
    case graph::DType::BF16: { std::uint16_t v; std::memcpy(&v, p, 2); return bf16_bits_to_double(v); }
    case graph::DType::I32: { std::int32_t v; std::memcpy(&v, p, 4); return v; }
    case graph::DType::I64: { std::int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case graph::DType::Bool: return std::to_integer<int>(*p) != 0 ? 1.0 : 0.0;
    case graph::DType::F64: { double v; std::memcpy(&v, p, 8); return v; }
    case graph::DType::I8: return static_cast<std::int8_t>(std::to_integer<std::uint8_t>(*p));
    case graph::DType::U8: return std::to_integer<std::uint8_t>(*p);
  }
  return 0.0;
}

namespace detail {

/// Interleaved partial sums of the statistics (see the top of the file).
inline constexpr std::size_t kStatLanes = 16;

/// Per-lane accumulators; element i of the data goes to lane i mod kStatLanes.
struct StatLanes {
  static constexpr std::size_t L = kStatLanes;
  double sum[L] = {}, abs_sum[L] = {}, sq_sum[L] = {}, mn[L], mx[L], nans[L] = {}, infs[L] = {}, pinfs[L] = {},
         zeros[L] = {};
  StatLanes() {
    for (std::size_t j = 0; j < L; ++j) {
      mn[j] = std::numeric_limits<double>::infinity();
      mx[j] = -std::numeric_limits<double>::infinity();
    }
  }
  /// xs[0..m) into lanes 0..m-1. Non-finite elements add 0 to the sums and are counted.
  void add(const double* xs, std::size_t m) {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < m; ++j) {
      const double x = xs[j];
      const double a = std::fabs(x);
      const bool nan = x != x, inf = a == kInf, fin = a < kInf;
      const double v = fin ? x : 0.0;
      nans[j] += nan ? 1.0 : 0.0;
      infs[j] += inf ? 1.0 : 0.0;
      pinfs[j] += inf && x > 0 ? 1.0 : 0.0;
      zeros[j] += fin && v == 0.0 ? 1.0 : 0.0;
      sum[j] += v;
      abs_sum[j] += std::fabs(v);
      sq_sum[j] += v * v;
      mn[j] = fin && x < mn[j] ? x : mn[j];
      mx[j] = fin && x > mx[j] ? x : mx[j];
    }
  }
};

#if defined(__AVX2__)
/// The same as StatLanes::add over whole blocks of kStatLanes elements, four lanes per vector;
/// next(b) returns block b.
template <class Next>
void add_blocks(StatLanes& st, std::size_t blocks, Next next) {
  const __m256d sign = _mm256_set1_pd(-0.0), inf = _mm256_set1_pd(std::numeric_limits<double>::infinity());
  const __m256d one = _mm256_set1_pd(1.0), zero = _mm256_setzero_pd();
  __m256d sum[4], abs_sum[4], sq[4], mn[4], mx[4], nans[4], infs[4], pinfs[4], zeros[4];
  for (int k = 0; k < 4; ++k) {
    sum[k] = _mm256_loadu_pd(st.sum + 4 * k);
    abs_sum[k] = _mm256_loadu_pd(st.abs_sum + 4 * k);
    sq[k] = _mm256_loadu_pd(st.sq_sum + 4 * k);
    mn[k] = _mm256_loadu_pd(st.mn + 4 * k);
    mx[k] = _mm256_loadu_pd(st.mx + 4 * k);
    nans[k] = _mm256_loadu_pd(st.nans + 4 * k);
    infs[k] = _mm256_loadu_pd(st.infs + 4 * k);
    pinfs[k] = _mm256_loadu_pd(st.pinfs + 4 * k);
    zeros[k] = _mm256_loadu_pd(st.zeros + 4 * k);
  }
  for (std::size_t b = 0; b < blocks; ++b) {
    const double* xs = next(b);
    __m256d xv[4], any_nonfinite = zero;
    for (int k = 0; k < 4; ++k) {
      xv[k] = _mm256_loadu_pd(xs + 4 * k);
      any_nonfinite = _mm256_or_pd(any_nonfinite, _mm256_cmp_pd(_mm256_andnot_pd(sign, xv[k]), inf, _CMP_NLT_UQ));
    }
    if (_mm256_movemask_pd(any_nonfinite) == 0) {
      // Every element finite (the common block): the same sums without the masks, whose
      // counts would add 0 and whose selections would keep every element; min/max as
      // x < mn ? x : mn and x > mx ? x : mx, which is what _mm256_min_pd / _mm256_max_pd do.
      for (int k = 0; k < 4; ++k) {
        const __m256d x = xv[k];
        zeros[k] = _mm256_add_pd(zeros[k], _mm256_and_pd(_mm256_cmp_pd(x, zero, _CMP_EQ_OQ), one));
        sum[k] = _mm256_add_pd(sum[k], x);
        abs_sum[k] = _mm256_add_pd(abs_sum[k], _mm256_andnot_pd(sign, x));
        sq[k] = _mm256_add_pd(sq[k], _mm256_mul_pd(x, x));
        mn[k] = _mm256_min_pd(x, mn[k]);
        mx[k] = _mm256_max_pd(x, mx[k]);
      }
      continue;
    }
    for (int k = 0; k < 4; ++k) {
      const __m256d x = xv[k];
      const __m256d a = _mm256_andnot_pd(sign, x);
      const __m256d fin = _mm256_cmp_pd(a, inf, _CMP_LT_OQ);
      const __m256d v = _mm256_and_pd(fin, x);
      nans[k] = _mm256_add_pd(nans[k], _mm256_and_pd(_mm256_cmp_pd(x, x, _CMP_UNORD_Q), one));
      infs[k] = _mm256_add_pd(infs[k], _mm256_and_pd(_mm256_cmp_pd(a, inf, _CMP_EQ_OQ), one));
      pinfs[k] = _mm256_add_pd(pinfs[k], _mm256_and_pd(_mm256_cmp_pd(x, inf, _CMP_EQ_OQ), one));
      zeros[k] = _mm256_add_pd(zeros[k], _mm256_and_pd(_mm256_and_pd(fin, _mm256_cmp_pd(v, zero, _CMP_EQ_OQ)), one));
      sum[k] = _mm256_add_pd(sum[k], v);
      abs_sum[k] = _mm256_add_pd(abs_sum[k], _mm256_andnot_pd(sign, v));
      sq[k] = _mm256_add_pd(sq[k], _mm256_mul_pd(v, v));
      mn[k] = _mm256_blendv_pd(mn[k], x, _mm256_and_pd(fin, _mm256_cmp_pd(x, mn[k], _CMP_LT_OQ)));
      mx[k] = _mm256_blendv_pd(mx[k], x, _mm256_and_pd(fin, _mm256_cmp_pd(x, mx[k], _CMP_GT_OQ)));
    }
  }
  for (int k = 0; k < 4; ++k) {
    _mm256_storeu_pd(st.sum + 4 * k, sum[k]);
    _mm256_storeu_pd(st.abs_sum + 4 * k, abs_sum[k]);
    _mm256_storeu_pd(st.sq_sum + 4 * k, sq[k]);
    _mm256_storeu_pd(st.mn + 4 * k, mn[k]);
    _mm256_storeu_pd(st.mx + 4 * k, mx[k]);
    _mm256_storeu_pd(st.nans + 4 * k, nans[k]);
    _mm256_storeu_pd(st.infs + 4 * k, infs[k]);
    _mm256_storeu_pd(st.pinfs + 4 * k, pinfs[k]);
    _mm256_storeu_pd(st.zeros + 4 * k, zeros[k]);
  }
}

/// Second pass: dev[j] += (x - mean)^2, whole blocks. Made only for data with no NaN or Inf
/// (the standard deviation is NaN otherwise), so every element counts.
template <class Next>
void add_dev_blocks(double* dev, double mean, std::size_t blocks, Next next) {
  const __m256d m = _mm256_set1_pd(mean);
  __m256d acc[4];
  for (int k = 0; k < 4; ++k) acc[k] = _mm256_loadu_pd(dev + 4 * k);
  for (std::size_t b = 0; b < blocks; ++b) {
    const double* xs = next(b);
    for (int k = 0; k < 4; ++k) {
      const __m256d d = _mm256_sub_pd(_mm256_loadu_pd(xs + 4 * k), m);
      acc[k] = _mm256_add_pd(acc[k], _mm256_mul_pd(d, d));
    }
  }
  for (int k = 0; k < 4; ++k) _mm256_storeu_pd(dev + 4 * k, acc[k]);
}
#endif

/// The statistics of elements get(0) .. get(numel - 1); fill(b, xs) writes the doubles of whole
/// block b (elements b * kStatLanes ..) to xs, as kStatLanes calls of get would.
template <class Get, class Fill>
CaptureStats stats_impl(std::size_t numel, Get get, Fill fill) {
  constexpr std::size_t L = kStatLanes;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double xs[L];
  auto next = [&](std::size_t b) -> const double* {  // block b (elements b*L ..) as doubles
    fill(b, xs);
    return xs;
  };
  const std::size_t blocks = numel / L, tail = numel % L;
  StatLanes st;
#if defined(__AVX2__)
  add_blocks(st, blocks, next);
#else
  for (std::size_t b = 0; b < blocks; ++b) st.add(next(b), L);
#endif
  for (std::size_t j = 0; j < tail; ++j) xs[j] = get(blocks * L + j);
  st.add(xs, tail);

  CaptureStats s;
  s.count = numel;
  double total = 0, abs_total = 0, sq_total = 0, lo = kInf, hi = -kInf, nan = 0, inf = 0, pinf = 0, zero = 0;
  for (std::size_t j = 0; j < L; ++j) {
    nan += st.nans[j];
    inf += st.infs[j];
    pinf += st.pinfs[j];
    zero += st.zeros[j];
    total += st.sum[j];
    abs_total += st.abs_sum[j];
    sq_total += st.sq_sum[j];
    if (st.mn[j] < lo) lo = st.mn[j];
    if (st.mx[j] > hi) hi = st.mx[j];
  }
  s.nan_count = static_cast<std::uint64_t>(nan);
  s.inf_count = static_cast<std::uint64_t>(inf);
  s.zero_count = static_cast<std::uint64_t>(zero);
  const std::uint64_t pos_inf = static_cast<std::uint64_t>(pinf), neg_inf = s.inf_count - pos_inf;
  const std::uint64_t n = numel - s.nan_count - s.inf_count;
  if (n > 0) {
    s.finite_min = lo;
    s.finite_max = hi;
    s.finite_max_abs = std::max(std::fabs(lo), std::fabs(hi));
    s.finite_mean = total / static_cast<double>(n);
    s.finite_abs_mean = abs_total / static_cast<double>(n);
  }
  if (numel == 0) return s;
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  if (s.nan_count > 0) {
    s.min = s.max = s.mean = s.abs_mean = s.std = s.l2 = s.max_abs = kNaN;
    return s;
  }
  if (s.inf_count > 0) {
    s.min = neg_inf > 0 ? -kInf : (n > 0 ? s.finite_min : kInf);
    s.max = pos_inf > 0 ? kInf : (n > 0 ? s.finite_max : -kInf);
    s.max_abs = s.abs_mean = s.l2 = kInf;
    s.mean = pos_inf > 0 && neg_inf > 0 ? kNaN : (pos_inf > 0 ? kInf : -kInf);
    s.std = kNaN;
    return s;
  }
  s.min = s.finite_min;
  s.max = s.finite_max;
  s.max_abs = s.finite_max_abs;
  s.mean = s.finite_mean;
  s.abs_mean = s.finite_abs_mean;
  s.l2 = std::sqrt(sq_total);
  double dev[L] = {};
  const double mean = s.mean;
  auto dev_add = [&](const double* b, std::size_t m) {
    for (std::size_t j = 0; j < m; ++j) {
      const double d = b[j] - mean;
      dev[j] += d * d;
    }
  };
#if defined(__AVX2__)
  add_dev_blocks(dev, mean, blocks, next);
#else
  for (std::size_t b = 0; b < blocks; ++b) dev_add(next(b), L);
#endif
  for (std::size_t j = 0; j < tail; ++j) xs[j] = get(blocks * L + j);
  dev_add(xs, tail);
  double dev_total = 0;
  for (std::size_t j = 0; j < L; ++j) dev_total += dev[j];
  s.std = std::sqrt(dev_total / static_cast<double>(n));
  return s;
}
template <class Get>
CaptureStats stats_impl(std::size_t numel, Get get) {
  return stats_impl(numel, get, [&get](std::size_t b, double* xs) {
    for (std::size_t j = 0; j < kStatLanes; ++j) xs[j] = get(b * kStatLanes + j);
  });
}

template <class T>
T load(const std::byte* base, std::size_t i) {
  T v;
  std::memcpy(&v, base + i * sizeof(T), sizeof(T));
  return v;
}

#if defined(__AVX2__) && defined(__F16C__)
/// A block of kStatLanes = 16 FP32 values (four vectors of four) widened to doubles: exact, as
/// the scalar conversions are.
inline void widen_block(__m256 lo, __m256 hi, double* xs) {
  _mm256_storeu_pd(xs, _mm256_cvtps_pd(_mm256_castps256_ps128(lo)));
  _mm256_storeu_pd(xs + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(lo, 1)));
  _mm256_storeu_pd(xs + 8, _mm256_cvtps_pd(_mm256_castps256_ps128(hi)));
  _mm256_storeu_pd(xs + 12, _mm256_cvtps_pd(_mm256_extractf128_ps(hi, 1)));
}
inline __m128i load_halves(const std::byte* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
/// Whole blocks of FP32, FP16 and BF16 data converted a vector at a time (the same doubles as
/// f16_bits_to_double / bf16_bits_to_double element by element: F16C and a shift are exact).
inline void fill_f32(const std::byte* b, std::size_t blk, double* xs) {
  const float* p = reinterpret_cast<const float*>(b) + blk * kStatLanes;
  widen_block(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), xs);
}
inline void fill_f16(const std::byte* b, std::size_t blk, double* xs) {
  const std::byte* p = b + blk * kStatLanes * 2;
  widen_block(_mm256_cvtph_ps(load_halves(p)), _mm256_cvtph_ps(load_halves(p + 16)), xs);
}
inline __m256 bf16_to_ps(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
inline void fill_bf16(const std::byte* b, std::size_t blk, double* xs) {
  const std::byte* p = b + blk * kStatLanes * 2;
  widen_block(bf16_to_ps(load_halves(p)), bf16_to_ps(load_halves(p + 16)), xs);
}
#endif
}  // namespace detail

/// Statistics of `numel` elements of dtype `dtype` stored contiguously in `bytes`.
inline CaptureStats compute_stats(std::span<const std::byte> bytes, std::uint8_t dtype, std::size_t numel) {
  const std::byte* b = bytes.data();
  using detail::load;
  const auto f32 = [b](std::size_t i) { return double{load<float>(b, i)}; };
  const auto f16 = [b](std::size_t i) { return f16_bits_to_double(load<std::uint16_t>(b, i)); };
  const auto bf16 = [b](std::size_t i) { return bf16_bits_to_double(load<std::uint16_t>(b, i)); };
  switch (static_cast<graph::DType>(dtype)) {
#if defined(__AVX2__) && defined(__F16C__)
    case graph::DType::F32:
      return detail::stats_impl(numel, f32, [b](std::size_t blk, double* xs) { detail::fill_f32(b, blk, xs); });
    case graph::DType::F16:
      return detail::stats_impl(numel, f16, [b](std::size_t blk, double* xs) { detail::fill_f16(b, blk, xs); });
    case graph::DType::BF16:
      return detail::stats_impl(numel, bf16, [b](std::size_t blk, double* xs) { detail::fill_bf16(b, blk, xs); });
#else
    case graph::DType::F32: return detail::stats_impl(numel, f32);
    case graph::DType::F16: return detail::stats_impl(numel, f16);
    case graph::DType::BF16: return detail::stats_impl(numel, bf16);
#endif
    case graph::DType::F64: return detail::stats_impl(numel, [b](std::size_t i) { return load<double>(b, i); });
    default: return detail::stats_impl(numel, [&](std::size_t i) { return element_value(bytes, dtype, i); });
  }
}

/// CRC-32 of a capture record's payload (CaptureRecordHeader::checksum) and of dump files: IEEE
/// 802.3, reflected, init and xorout 0xFFFFFFFF (the values of boost::crc_32_type), computed by
/// zlib. `crc` continues a CRC over earlier bytes: crc32(b, crc32(a)) == crc32(a then b).
inline std::uint32_t crc32(std::span<const std::byte> bytes, std::uint32_t crc = 0) {
  if (bytes.empty()) return crc;  // zlib answers a null buffer with its initial value, 0
  return static_cast<std::uint32_t>(::crc32_z(crc, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}
inline std::uint32_t crc32(std::string_view text, std::uint32_t crc = 0) {
  return crc32(std::as_bytes(std::span(text.data(), text.size())), crc);
}

/// XXH64 (the xxHash 64-bit algorithm) of `data` with `seed`.
inline std::uint64_t xxh64(std::span<const std::byte> data, std::uint64_t seed = 0) {
  constexpr std::uint64_t P1 = 0x9E3779B185EBCA87ull, P2 = 0xC2B2AE3D27D4EB4Full, P3 = 0x165667B19E3779F9ull,
                          P4 = 0x85EBCA77C2B2AE63ull, P5 = 0x27D4EB2F165667C5ull;
  auto rd64 = [](const std::byte* p) { std::uint64_t v; std::memcpy(&v, p, 8); return v; };
  auto rd32 = [](const std::byte* p) { std::uint32_t v; std::memcpy(&v, p, 4); return std::uint64_t{v}; };
  auto round = [&](std::uint64_t acc, std::uint64_t in) { return std::rotl(acc + in * P2, 31) * P1; };
  auto merge = [&](std::uint64_t acc, std::uint64_t v) { return (acc ^ round(0, v)) * P1 + P4; };
  const std::byte* p = data.data();
  const std::byte* const end = p + data.size();
  std::uint64_t h;
  if (data.size() >= 32) {
    std::uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
    do {
      v1 = round(v1, rd64(p)); v2 = round(v2, rd64(p + 8)); v3 = round(v3, rd64(p + 16)); v4 = round(v4, rd64(p + 24));
      p += 32;
    } while (end - p >= 32);
    h = std::rotl(v1, 1) + std::rotl(v2, 7) + std::rotl(v3, 12) + std::rotl(v4, 18);
    h = merge(h, v1); h = merge(h, v2); h = merge(h, v3); h = merge(h, v4);
  } else {
    h = seed + P5;
  }
  h += data.size();
  for (; end - p >= 8; p += 8) h = std::rotl(h ^ round(0, rd64(p)), 27) * P1 + P4;
  if (end - p >= 4) { h = std::rotl(h ^ (rd32(p) * P1), 23) * P2 + P3; p += 4; }
  for (; p < end; ++p) h = std::rotl(h ^ (std::to_integer<std::uint64_t>(*p) * P5), 11) * P1;
  h ^= h >> 33; h *= P2; h ^= h >> 29; h *= P3; h ^= h >> 32;
  return h;
}

/// Value of one statistic (counts as doubles).
inline double stat_value(const CaptureStats& s, StatField f) {
  switch (f) {
    case StatField::Min: return s.min;
    case StatField::Max: return s.max;
    case StatField::Mean: return s.mean;
    case StatField::AbsMean: return s.abs_mean;
    case StatField::Std: return s.std;
    case StatField::L2: return s.l2;
    case StatField::MaxAbs: return s.max_abs;
    case StatField::NanCount: return static_cast<double>(s.nan_count);
    case StatField::InfCount: return static_cast<double>(s.inf_count);
    case StatField::ZeroCount: return static_cast<double>(s.zero_count);
    case StatField::Count: return static_cast<double>(s.count);
    case StatField::FiniteMin: return s.finite_min;
    case StatField::FiniteMax: return s.finite_max;
    case StatField::FiniteMaxAbs: return s.finite_max_abs;
    case StatField::FiniteMean: return s.finite_mean;
    case StatField::FiniteAbsMean: return s.finite_abs_mean;
  }
  return 0;
}

inline bool compare(double a, CmpOp op, double b) {
  switch (op) {
    case CmpOp::Lt: return a < b;
    case CmpOp::Le: return a <= b;
    case CmpOp::Gt: return a > b;
    case CmpOp::Ge: return a >= b;
    case CmpOp::Eq: return a == b;
    case CmpOp::Ne: return a != b;
  }
  return false;
}

/// The statistics part of a breakpoint: false with zero clauses; otherwise all clauses hold
/// (any = 0) or at least one holds (any = 1). Unknown field/op codes never hold.
inline bool eval_predicate(const BreakpointArgs& a, const CaptureStats& s) {
  const std::uint32_t n = a.num_clauses > kMaxClauses ? kMaxClauses : a.num_clauses;
  if (n == 0) return false;
  bool all = true, some = false;
  for (std::uint32_t i = 0; i < n; ++i) {
    const auto& c = a.clauses[i];
    const bool ok = c.field <= static_cast<std::uint8_t>(StatField::FiniteAbsMean) &&
                    c.cmp <= static_cast<std::uint8_t>(CmpOp::Ne) &&
                    compare(stat_value(s, static_cast<StatField>(c.field)), static_cast<CmpOp>(c.cmp), c.value);
    all = all && ok;
    some = some || ok;
  }
  return a.any ? some : all;
}

}  // namespace probelab::spec
