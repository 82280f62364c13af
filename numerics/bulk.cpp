// Bulk conversions (bulk.h). Each 8-element block whose lanes are all "plain" (no NaN/Inf,
// no subnormal input or output, no overflow) is converted with F16C/AVX2, where the only possible
// flag is Inexact; any other block is handed to the scalar conversion, element by element, so the
// values and flags are those of the scalar path by construction.
#include <immintrin.h>

#include <bit>
#include <stdexcept>
#include <string>

#include "numerics/bulk.h"
#include "numerics/detail/bulk_internal.h"
#include "numerics/detail/ops.h"
#include "numerics/detail/simd.h"
#include "numerics/fp32.h"

namespace probelab::num {

void BulkReport::merge(const BulkReport& other, std::int64_t offset) noexcept {
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

// Runs `block(i, rep)` on every full block of 8 (it returns false to hand the block to the scalar
// conversion) and converts the tail with the scalar conversion.
template <class S, class D, class In, class Out, class Block>
BulkReport blocks(const char* what, std::span<const In> in, std::span<Out> out, const Mode& mode, Block&& block) {
  validate(mode);
  detail::require_same_size(what, in.size(), out.size(), "input", "output");
  BulkReport rep;
  const std::size_t n = in.size();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (!block(i, rep)) scalar_convert<S, D>(in.data(), out.data(), i, i + 8, mode, rep);
  }
  scalar_convert<S, D>(in.data(), out.data(), i, n, mode, rep);
  return rep;
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

BulkReport convert(std::span<const float> in, std::span<f16> out, const Mode& mode) {
  return blocks<detail::F32, detail::F16>("convert(f32->f16)", in, out, mode, [&](std::size_t i, BulkReport& rep) {
    const __m256 v = _mm256_loadu_ps(in.data() + i);
    const __m256 ok = _mm256_or_ps(detail::in_range(detail::abs_ps(v), 0x1p-14f, 65520.0f), detail::is_zero_ps(v));
    if (detail::mask8(ok) != 0xFF) return false;
    const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    store8(out.data() + i, h);
    if (rep.first_index(Flag::Inexact) < 0) {  // once the first inexact element is known, skip the check
      detail::raise_mask(rep, Flag::Inexact, detail::mask8(_mm256_cmp_ps(_mm256_cvtph_ps(h), v, _CMP_NEQ_OQ)),
                         static_cast<std::int64_t>(i));
    }
    return true;
  });
}

BulkReport convert(std::span<const f16> in, std::span<float> out, const Mode& mode) {
  return blocks<detail::F16, detail::F32>("convert(f16->f32)", in, out, mode, [&](std::size_t i, BulkReport&) {
    const __m128i h = load8(in.data() + i);
    if (detail::special16(h, 0x7C00) != 0) return false;
    _mm256_storeu_ps(out.data() + i, _mm256_cvtph_ps(h));
    return true;
  });
}

BulkReport convert(std::span<const float> in, std::span<bf16> out, const Mode& mode) {
  return blocks<detail::F32, detail::BF16>("convert(f32->bf16)", in, out, mode, [&](std::size_t i, BulkReport& rep) {
    const __m256 v = _mm256_loadu_ps(in.data() + i);
    const __m256 ok = _mm256_or_ps(detail::in_range(detail::abs_ps(v), 0x1p-126f, 0x1.ffp127f), detail::is_zero_ps(v));
    if (detail::mask8(ok) != 0xFF) return false;
    store8(out.data() + i, detail::ps_to_bf16(v));
    detail::raise_mask(rep, Flag::Inexact, detail::bf16_inexact(v), static_cast<std::int64_t>(i));
    return true;
  });
}

BulkReport convert(std::span<const bf16> in, std::span<float> out, const Mode& mode) {
  return blocks<detail::BF16, detail::F32>("convert(bf16->f32)", in, out, mode, [&](std::size_t i, BulkReport&) {
    const __m128i h = load8(in.data() + i);
    if (detail::special16(h, 0x7F80) != 0) return false;
    _mm256_storeu_ps(out.data() + i, detail::bf16_to_ps(h));
    return true;
  });
}

}  // namespace probelab::num
