// Bulk conversions (bulk.h). Each 8-element block whose lanes are all "plain" (no NaN/Inf,
// no subnormal input or output, no overflow) is converted with F16C/AVX2, where the only possible
// flag is Inexact; any other block goes to a vector conversion of every case (FP16 <-> FP32, so
// that tensors full of NaN or Inf stay fast) or, for the other formats, to the scalar conversion
// element by element. tests/numerics/test_bulk.cpp checks both against the scalar path.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <stdexcept>
#include <type_traits>
#include <string>

#include "numerics/bulk.h"
#include "numerics/detail/bulk_internal.h"
#include "numerics/detail/ops.h"
#include "numerics/detail/simd.h"
#include "numerics/fp32.h"

namespace probelab::num {

void BulkReport::merge_indices(const BulkReport& other, std::int64_t offset) noexcept {
  flags |= other.flags;
  for (int k = 0; k < kFlagCount; ++k) {
    if (other.first[k] < 0) continue;
    const std::int64_t idx = other.first[k] + offset;
    if (first[k] < 0 || idx < first[k]) first[k] = idx;
  }
}

namespace detail {

void require_same_size(const char* what, std::size_t n, std::size_t m, const char* a, const char* b) {
  if (n != m) {
    throw std::invalid_argument(std::string("probelab::num::") + what + ": " + a + " has " + std::to_string(n) +
                                " elements, " + b + " has " + std::to_string(m));
  }
}

BulkReport deliver_inplace(std::span<float> x, const Mode& mode) {
  BulkReport rep;
  const std::size_t n = x.size();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (special32(_mm256_loadu_ps(x.data() + i)) == 0) continue;
    for (std::size_t j = i; j < i + 8; ++j) {
      const Result<float> r = deliver(x[j], mode);
      x[j] = r.value;
      if (r.flags.any()) rep.raise(r.flags, static_cast<std::int64_t>(j));
    }
  }
  for (; i < n; ++i) {
    const Result<float> r = deliver(x[i], mode);
    x[i] = r.value;
    if (r.flags.any()) rep.raise(r.flags, static_cast<std::int64_t>(i));
  }
  return rep;
}

}  // namespace detail

namespace {

template <class S, class D, class In, class Out>
void scalar_convert(const In* in, Out* out, std::size_t lo, std::size_t hi, const Mode& m, BulkReport& rep) {
  for (std::size_t j = lo; j < hi; ++j) {
    std::uint32_t b;
    if constexpr (std::is_same_v<In, float>) b = std::bit_cast<std::uint32_t>(in[j]);
    else b = in[j].bits;
    const detail::Rounded<D> r = detail::convert_op<S, D>(b, m);
    if constexpr (std::is_same_v<Out, float>) out[j] = std::bit_cast<float>(r.bits);
    else out[j].bits = static_cast<std::uint16_t>(r.bits);
    if (r.flags.any()) rep.raise(r.flags, static_cast<std::int64_t>(j));
  }
}

}  // namespace

namespace {

// Runs `block(in, out, i, rep)` (8 lanes from in + i to out + i; flags at element i on) on every
// block of 8, the last one partial: its lanes are copied into a block padded with zeros (plain in
// every format) and only its own lanes come out. A block that returns false goes to
// `special(in, out, i, rep)` (any 8 lanes), or by default to the scalar conversion.
template <class S, class D, class In, class Out, class Block, class Special = std::nullptr_t>
BulkReport blocks(const char* what, std::span<const In> in, std::span<Out> out, const Mode& mode, Block&& block,
                  Special&& special = nullptr) {
  validate(mode);
  detail::require_same_size(what, in.size(), out.size(), "input", "output");
  BulkReport rep;
  const std::size_t n = in.size();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (block(in.data() + i, out.data() + i, i, rep)) continue;
    if constexpr (std::is_same_v<std::decay_t<Special>, std::nullptr_t>) {
      scalar_convert<S, D>(in.data(), out.data(), i, i + 8, mode, rep);
    } else {
      special(in.data() + i, out.data() + i, i, rep);
    }
  }
  if (i == n) return rep;
  In tin[8]{};
  Out tout[8];
  std::copy(in.data() + i, in.data() + n, tin);
  if constexpr (std::is_same_v<std::decay_t<Special>, std::nullptr_t>) {
    if (!block(tin, tout, i, rep)) {
      scalar_convert<S, D>(in.data(), out.data(), i, n, mode, rep);
      return rep;
    }
  } else {
    if (!block(tin, tout, i, rep)) special(tin, tout, i, rep);
  }
  std::copy(tout, tout + (n - i), out.data() + i);
  return rep;
}

// Lanes of 8 32-bit patterns (as masks) by a predicate on their bits.
inline __m256i eq32(__m256i x, int v) noexcept { return _mm256_cmpeq_epi32(x, _mm256_set1_epi32(v)); }
inline __m256i bits_of(__m256 v) noexcept { return _mm256_castps_si256(v); }

// A block of 8 FP16 -> FP32 conversions (in, out: the block's first lane; i: its element index)
// with any patterns, lane by lane as convert_op: NaNs keep
// sign and payload, quieted (F16C does the same), signaling ones raise Invalid; subnormal inputs
// raise DenormalIn and read as zeros when flushing; saturation turns NaN into +0 and Inf into
// +-max.
void f16_to_f32_special(const f16* in, float* out, std::size_t i, const Mode& m, BulkReport& rep) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
  const __m256i w = _mm256_cvtepu16_epi32(h);
  const __m256i e = _mm256_and_si256(w, _mm256_set1_epi32(0x7C00)), f = _mm256_and_si256(w, _mm256_set1_epi32(0x3FF));
  const __m256i f0 = eq32(f, 0), top = eq32(e, 0x7C00);
  const __m256i nan = _mm256_andnot_si256(f0, top), inf = _mm256_and_si256(f0, top);
  const __m256i snan = _mm256_and_si256(nan, eq32(_mm256_and_si256(w, _mm256_set1_epi32(0x200)), 0));
  const __m256i sub = _mm256_andnot_si256(f0, eq32(e, 0));
  __m256 v = _mm256_cvtph_ps(h);
  const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
  if (m.denormal == DenormalMode::FlushToZero) v = _mm256_blendv_ps(v, sign, _mm256_castsi256_ps(sub));
  if (m.overflow == OverflowMode::Saturation) {
    v = _mm256_blendv_ps(v, _mm256_setzero_ps(), _mm256_castsi256_ps(nan));
    v = _mm256_blendv_ps(v, _mm256_or_ps(sign, _mm256_set1_ps(0x1.fffffep127f)), _mm256_castsi256_ps(inf));
  }
  _mm256_storeu_ps(out, v);
  const auto base = static_cast<std::int64_t>(i);
  detail::raise_mask(rep, Flag::Invalid, detail::mask8(_mm256_castsi256_ps(snan)), base);
  detail::raise_mask(rep, Flag::DenormalIn, detail::mask8(_mm256_castsi256_ps(sub)), base);
}

// A block of 8 FP32 -> FP16 conversions with any values, lane by lane as convert_op: F16C rounds
// (subnormal results to their quantum, overflow to Inf, NaNs quieted with their payload's top
// bits); the flags follow flags.h (tininess after rounding: below 2^-14 (1 - 2^-12)); then the
// Mode: flushed inputs and results, saturated infinities and NaNs.
void f32_to_f16_special(const float* in, f16* out, std::size_t i, const Mode& m, BulkReport& rep) {
  __m256 v = _mm256_loadu_ps(in);
  const __m256i b = bits_of(v);
  const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  const __m256 snan = _mm256_and_ps(nan, _mm256_castsi256_ps(eq32(_mm256_and_si256(b, _mm256_set1_epi32(0x400000)), 0)));
  const __m256i e = _mm256_and_si256(b, _mm256_set1_epi32(0x7F800000));
  const __m256i sub = _mm256_andnot_si256(eq32(_mm256_and_si256(b, _mm256_set1_epi32(0x7FFFFF)), 0), eq32(e, 0));
  if (m.denormal == DenormalMode::FlushToZero) v = _mm256_blendv_ps(v, sign, _mm256_castsi256_ps(sub));
  const __m256 a = detail::abs_ps(v);
  const __m256 finite = _mm256_cmp_ps(a, _mm256_set1_ps(__builtin_inff()), _CMP_LT_OQ);
  __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 r = _mm256_cvtph_ps(h);
  const __m256 inexact = _mm256_and_ps(finite, _mm256_cmp_ps(r, v, _CMP_NEQ_UQ));
  const __m256 ovf = _mm256_and_ps(finite, _mm256_cmp_ps(a, _mm256_set1_ps(65520.0f), _CMP_GE_OQ));
  const __m256 tiny = _mm256_cmp_ps(a, _mm256_set1_ps(0x1.ffep-15f), _CMP_LT_OQ);
  __m256 unf = _mm256_and_ps(inexact, tiny);
  __m256 inx = inexact;
  const __m256 ar = detail::abs_ps(r);
  const __m256 dno = _mm256_andnot_ps(detail::is_zero_ps(r), _mm256_cmp_ps(ar, _mm256_set1_ps(0x1p-14f), _CMP_LT_OQ));
  // back to 16-bit lanes: sign, flushed zero, saturated values
  const __m256i sign16 = _mm256_srli_epi32(bits_of(sign), 16);
  __m256i hw = _mm256_cvtepu16_epi32(h);
  if (m.denormal == DenormalMode::FlushToZero) {
    hw = _mm256_blendv_epi8(hw, sign16, _mm256_castps_si256(dno));
    unf = _mm256_or_ps(unf, dno);
    inx = _mm256_or_ps(inx, dno);
  }
  if (m.overflow == OverflowMode::Saturation) {
    hw = _mm256_blendv_epi8(hw, _mm256_setzero_si256(), _mm256_castps_si256(nan));
    const __m256 big = _mm256_or_ps(ovf, _mm256_cmp_ps(a, _mm256_set1_ps(__builtin_inff()), _CMP_EQ_OQ));
    hw = _mm256_blendv_epi8(hw, _mm256_or_si256(sign16, _mm256_set1_epi32(0x7BFF)), _mm256_castps_si256(big));
  }
  h = _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(hw, hw), 0x08));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), h);
  const auto base = static_cast<std::int64_t>(i);
  detail::raise_mask(rep, Flag::Invalid, detail::mask8(snan), base);
  detail::raise_mask(rep, Flag::DenormalIn, detail::mask8(_mm256_castsi256_ps(sub)), base);
  detail::raise_mask(rep, Flag::Overflow, detail::mask8(ovf), base);
  detail::raise_mask(rep, Flag::Underflow, detail::mask8(unf), base);
  detail::raise_mask(rep, Flag::Inexact, detail::mask8(inx), base);
  detail::raise_mask(rep, Flag::DenormalOut, detail::mask8(dno), base);
}

template <class T>
__m128i load8(const T* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
template <class T>
void store8(T* p, __m128i v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v);
}

}  // namespace

namespace {

// A block of 8 FP32 -> FP16 conversions whose lanes are all zero or of FP16-normal magnitude
// below 65520 (their results are zero or normal: finite, no flag but Inexact); false otherwise.
bool f32_to_f16_plain(const float* pi, f16* po, std::size_t i, BulkReport& rep) {
  const __m256 v = _mm256_loadu_ps(pi);
  const __m256 ok = _mm256_or_ps(detail::in_range(detail::abs_ps(v), 0x1p-14f, 65520.0f), detail::is_zero_ps(v));
  if (detail::mask8(ok) != 0xFF) return false;
  const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  store8(po, h);
  if (rep.first_index(Flag::Inexact) < 0) {  // once the first inexact element is known, skip the check
    detail::raise_mask(rep, Flag::Inexact, detail::mask8(_mm256_cmp_ps(_mm256_cvtph_ps(h), v, _CMP_NEQ_OQ)),
                       static_cast<std::int64_t>(i));
  }
  return true;
}

// Adds the scan `s` of a block starting at element `at` to `acc` (blocks come in ascending order).
void add_scan(ScanReport& acc, const ScanReport& s, std::int64_t at) {
  auto one = [at](std::int64_t& count, std::int64_t& first, std::int64_t c, std::int64_t f) {
    count += c;
    if (first < 0 && f >= 0) first = f + at;
  };
  one(acc.nan_count, acc.first_nan, s.nan_count, s.first_nan);
  one(acc.inf_count, acc.first_inf, s.inf_count, s.first_inf);
  one(acc.subnormal_count, acc.first_subnormal, s.subnormal_count, s.first_subnormal);
}

}  // namespace

BulkReport convert(std::span<const float> in, std::span<f16> out, const Mode& mode) {
  return blocks<detail::F32, detail::F16>("convert(f32->f16)", in, out, mode, f32_to_f16_plain,
                                          [&](const float* pi, f16* po, std::size_t i, BulkReport& rep) {
                                            f32_to_f16_special(pi, po, i, mode, rep);
                                          });
}

ConvertScan convert_scanned(std::span<const float> in, std::span<f16> out, const Mode& mode) {
  ConvertScan r;
  // The last block arrives padded with zeros, which no scan counts.
  r.flags = blocks<detail::F32, detail::F16>(
      "convert_scanned(f32->f16)", in, out, mode, f32_to_f16_plain,
      [&](const float* pi, f16* po, std::size_t i, BulkReport& rep) {
        f32_to_f16_special(pi, po, i, mode, rep);
        const auto at = static_cast<std::int64_t>(i);
        const LimitScan s = scan(std::span<const float>(pi, 8), 65520.0f);
        add_scan(r.in.scan, s.scan, at);
        add_scan(r.out, scan(std::span<const f16>(po, 8)), at);
        r.in.beyond_count += s.beyond_count;
        if (r.in.first_beyond < 0 && s.first_beyond >= 0) r.in.first_beyond = s.first_beyond + at;
      });
  return r;
}

BulkReport convert(std::span<const f16> in, std::span<float> out, const Mode& mode) {
  return blocks<detail::F16, detail::F32>("convert(f16->f32)", in, out, mode, [&](const f16* pi, float* po, std::size_t, BulkReport&) {
    const __m128i h = load8(pi);
    if (detail::special16(h, 0x7C00) != 0) return false;
    _mm256_storeu_ps(po, _mm256_cvtph_ps(h));
    return true;
  }, [&](const f16* pi, float* po, std::size_t i, BulkReport& rep) { f16_to_f32_special(pi, po, i, mode, rep); });
}

BulkReport convert(std::span<const float> in, std::span<bf16> out, const Mode& mode) {
  return blocks<detail::F32, detail::BF16>("convert(f32->bf16)", in, out, mode, [&](const float* pi, bf16* po, std::size_t i, BulkReport& rep) {
    const __m256 v = _mm256_loadu_ps(pi);
    const __m256 ok = _mm256_or_ps(detail::in_range(detail::abs_ps(v), 0x1p-126f, 0x1.ffp127f), detail::is_zero_ps(v));
    if (detail::mask8(ok) != 0xFF) return false;
    store8(po, detail::ps_to_bf16(v));
    detail::raise_mask(rep, Flag::Inexact, detail::bf16_inexact(v), static_cast<std::int64_t>(i));
    return true;
  });
}

BulkReport convert(std::span<const bf16> in, std::span<float> out, const Mode& mode) {
  return blocks<detail::BF16, detail::F32>("convert(bf16->f32)", in, out, mode, [&](const bf16* pi, float* po, std::size_t, BulkReport&) {
    const __m128i h = load8(pi);
    if (detail::special16(h, 0x7F80) != 0) return false;
    _mm256_storeu_ps(po, detail::bf16_to_ps(h));
    return true;
  });
}

}  // namespace probelab::num
