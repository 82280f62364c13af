// Bulk elementwise operations (bulk.h). Add/Sub/Mul/Div blocks of 8 plain lanes are computed in FP32
// with AVX2: the exact result is represented by its FP32 round-to-odd (TwoSum error for +/-, exact
// FP32 products of FP16 and BF16 inputs, exact FMA remainders for /), which then rounds correctly to
// FP16/BF16 (24 >= p + 2), exactly as the scalar path does from binary64. For FP32 the hardware
// result is already correctly rounded and the same error terms give Inexact. A block containing
// any lane outside the plain range (NaN/Inf/subnormal operands, zero divisors, tiny or overflowing
// results, operands where an error term could underflow) is computed by the scalar operation.
// Min/Max always use the scalar operation.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "numerics/bulk.h"
#include "numerics/detail/bulk_internal.h"
#include "numerics/detail/ops.h"
#include "numerics/detail/simd.h"

namespace probelab::num {
namespace {

using detail::BF16;
using detail::F16;
using detail::F32;

template <class F>
detail::Rounded<F> scalar_op(BinaryOp op, std::uint32_t a, std::uint32_t b, const Mode& m) noexcept {
  switch (op) {
    case BinaryOp::Add:
      return detail::add_op<F>(a, b, false, m);
    case BinaryOp::Sub:
      return detail::add_op<F>(a, b, true, m);
    case BinaryOp::Mul:
      return detail::mul_op<F>(a, b, m);
    case BinaryOp::Div:
      return detail::div_op<F>(a, b, m);
    case BinaryOp::Min:
      return detail::minmax_op<F>(a, b, false, false, m);
    case BinaryOp::Max:
      return detail::minmax_op<F>(a, b, true, false, m);
  }
  return {F::default_nan, Flags(Flag::Invalid)};
}

template <class F, class T>
std::uint32_t bits_of(T x) noexcept {
  if constexpr (std::is_same_v<T, float>)
    return std::bit_cast<std::uint32_t>(x);
  else
    return x.bits;
}
template <class T>
T from_bits(std::uint32_t b) noexcept {
  if constexpr (std::is_same_v<T, float>)
    return std::bit_cast<float>(b);
  else
    return T{static_cast<std::uint16_t>(b)};
}

template <class F, class T>
void scalar_range(BinaryOp op, const T* a, const T* b, T* out, std::size_t lo, std::size_t hi, const Mode& m,
                  BulkReport& rep) {
  for (std::size_t j = lo; j < hi; ++j) {
    const detail::Rounded<F> r = scalar_op<F>(op, bits_of<F>(a[j]), bits_of<F>(b[j]), m);
    out[j] = from_bits<T>(r.bits);
    if (r.flags.any()) rep.raise(r.flags, static_cast<std::int64_t>(j));
  }
}

// One block of 8 FP32 operand lanes. Returns false if a lane is not plain; otherwise sets `res`
// (FP32 result, round-to-odd when `odd` is set, correctly rounded otherwise) and `inexact`.
struct Block {
  __m256 res;
  __m256 inexact;
};

template <BinaryOp Op>
[[gnu::always_inline]] inline bool compute(__m256 a, __m256 b, bool odd, Block& out) noexcept {
  const __m256 zero = _mm256_setzero_ps();
  if constexpr (Op == BinaryOp::Add || Op == BinaryOp::Sub) {
    if constexpr (Op == BinaryOp::Sub) b = _mm256_xor_ps(b, _mm256_set1_ps(-0.0f));
    const __m256 s = _mm256_add_ps(a, b);
    const __m256 bv = _mm256_sub_ps(s, a);
    const __m256 err = _mm256_add_ps(_mm256_sub_ps(a, _mm256_sub_ps(s, bv)), _mm256_sub_ps(b, bv));
    out.inexact = _mm256_cmp_ps(err, zero, _CMP_NEQ_OQ);
    out.res = odd ? detail::to_odd_ps(s, out.inexact, detail::same_sign(err, s)) : s;
    // An exact zero sum is plain; otherwise the sum must be a finite normal.
    return detail::mask8(
               _mm256_or_ps(detail::in_range(detail::abs_ps(s), 0x1p-126f, INFINITY), detail::is_zero_ps(s))) == 0xFF;
  } else if constexpr (Op == BinaryOp::Mul) {
    const __m256 p = _mm256_mul_ps(a, b);
    const __m256 err = _mm256_fmsub_ps(a, b, p);
    out.inexact = _mm256_cmp_ps(err, zero, _CMP_NEQ_OQ);
    out.res = odd ? detail::to_odd_ps(p, out.inexact, detail::same_sign(err, p)) : p;
    const __m256 zero_in = _mm256_or_ps(detail::is_zero_ps(a), detail::is_zero_ps(b));
    return detail::mask8(_mm256_or_ps(detail::in_range(detail::abs_ps(p), 0x1p-100f, INFINITY), zero_in)) == 0xFF;
  } else if constexpr (Op == BinaryOp::Div) {
    const __m256 a_zero = detail::is_zero_ps(a);
    const __m256 a_ok = _mm256_or_ps(detail::in_range(detail::abs_ps(a), 0x1p-100f, INFINITY), a_zero);
    const __m256 b_ok = _mm256_cmp_ps(b, zero, _CMP_NEQ_OQ);
    const __m256 q = _mm256_div_ps(a, b);
    const __m256 r = _mm256_fnmadd_ps(q, b, a);  // exact: a/b = q + r/b
    out.inexact = _mm256_cmp_ps(r, zero, _CMP_NEQ_OQ);
    const __m256 away = detail::same_sign(_mm256_xor_ps(r, _mm256_and_ps(b, _mm256_set1_ps(-0.0f))), q);
    out.res = odd ? detail::to_odd_ps(q, out.inexact, away) : q;
    const __m256 q_ok = _mm256_or_ps(detail::in_range(detail::abs_ps(q), 0x1p-126f, INFINITY), a_zero);
    return detail::mask8(_mm256_and_ps(_mm256_and_ps(a_ok, b_ok), q_ok)) == 0xFF;
  } else {
    return false;  // Min/Max: scalar
  }
}

// Calls fn(std::integral_constant<BinaryOp, op>) so that the vector code is specialised per op.
template <class Fn>
BulkReport dispatch(BinaryOp op, Fn&& fn) {
  switch (op) {
    case BinaryOp::Add:
      return fn(std::integral_constant<BinaryOp, BinaryOp::Add>{});
    case BinaryOp::Sub:
      return fn(std::integral_constant<BinaryOp, BinaryOp::Sub>{});
    case BinaryOp::Mul:
      return fn(std::integral_constant<BinaryOp, BinaryOp::Mul>{});
    case BinaryOp::Div:
      return fn(std::integral_constant<BinaryOp, BinaryOp::Div>{});
    default:
      return fn(std::integral_constant<BinaryOp, BinaryOp::Min>{});  // scalar for Min/Max
  }
}

}  // namespace

const char* to_string(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add:
      return "add";
    case BinaryOp::Sub:
      return "sub";
    case BinaryOp::Mul:
      return "mul";
    case BinaryOp::Div:
      return "div";
    case BinaryOp::Min:
      return "min";
    case BinaryOp::Max:
      return "max";
  }
  return "invalid";
}

namespace {

void check_args(BinaryOp op, std::size_t na, std::size_t nb, std::size_t no, const Mode& mode) {
  validate(mode);
  if (static_cast<unsigned>(op) > static_cast<unsigned>(BinaryOp::Max)) {
    throw std::invalid_argument("probelab::num::elementwise: invalid BinaryOp value " +
                                std::to_string(static_cast<int>(op)));
  }
  detail::require_same_size("elementwise", na, nb, "a", "b");
  detail::require_same_size("elementwise", na, no, "a", "out");
}

bool vector_op(BinaryOp op) { return op != BinaryOp::Min && op != BinaryOp::Max; }

}  // namespace

namespace {

// The value 1 of an element type (the divisor in the padding lanes of a tail block).
template <class T>
T one() noexcept {
  if constexpr (std::is_same_v<T, float>)
    return 1.0f;
  else if constexpr (std::is_same_v<T, f16>)
    return T{0x3C00};
  else
    return T{0x3F80};
}

// Runs `block(a, b, out, i, rep)` (8 lanes from a + i, b + i to out + i; flags at element i on) on
// every block of 8 of a vectorised operation, the last one partial: its lanes are copied into a
// block padded with 0 op 1 (a plain, exact lane whatever the op), and only its own lanes come out.
// A block that returns false is handed to the scalar operation, and so is everything for Min/Max.
template <class F, class T, class Block>
BulkReport blocks(BinaryOp op, std::span<const T> a, std::span<const T> b, std::span<T> out, const Mode& mode,
                  Block&& block) {
  check_args(op, a.size(), b.size(), out.size(), mode);
  BulkReport rep;
  const std::size_t n = a.size();
  if (!vector_op(op)) {
    scalar_range<F>(op, a.data(), b.data(), out.data(), 0, n, mode, rep);
    return rep;
  }
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (!block(a.data() + i, b.data() + i, out.data() + i, i, rep))
      scalar_range<F>(op, a.data(), b.data(), out.data(), i, i + 8, mode, rep);
  }
  if (i == n) return rep;
  T ta[8], tb[8], to[8];
  for (std::size_t j = 0; j < 8; ++j) {
    ta[j] = i + j < n ? a[i + j] : T{};
    tb[j] = i + j < n ? b[i + j] : one<T>();
  }
  if (block(ta, tb, to, i, rep))
    std::copy(to, to + (n - i), out.data() + i);
  else
    scalar_range<F>(op, a.data(), b.data(), out.data(), i, n, mode, rep);
  return rep;
}

template <class T>
__m128i load8(const T* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// All lanes of the result r are zero or have a magnitude in [lo, hi).
bool plain_result(__m256 r, float lo, float hi) {
  return detail::mask8(_mm256_or_ps(detail::in_range(detail::abs_ps(r), lo, hi), detail::is_zero_ps(r))) == 0xFF;
}

}  // namespace

BulkReport elementwise(BinaryOp op, std::span<const f16> a, std::span<const f16> b, std::span<f16> out,
                       const Mode& mode) {
  return dispatch(op, [&](auto kind) {
    return blocks<F16>(op, a, b, out, mode, [&](const f16* pa, const f16* pb, f16* po, std::size_t i, BulkReport& rep) {
      const __m128i ha = load8(pa), hb = load8(pb);
      Block blk;
      if ((detail::special16(ha, 0x7C00) | detail::special16(hb, 0x7C00)) != 0 ||
          !compute<kind.value>(_mm256_cvtph_ps(ha), _mm256_cvtph_ps(hb), true, blk) ||
          !plain_result(blk.res, 0x1p-14f, 65520.0f)) {
        return false;
      }
      const __m128i h = _mm256_cvtps_ph(blk.res, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(po), h);
      const __m256 inexact = _mm256_or_ps(blk.inexact, _mm256_cmp_ps(_mm256_cvtph_ps(h), blk.res, _CMP_NEQ_OQ));
      detail::raise_mask(rep, Flag::Inexact, detail::mask8(inexact), static_cast<std::int64_t>(i));
      return true;
    });
  });
}

BulkReport elementwise(BinaryOp op, std::span<const bf16> a, std::span<const bf16> b, std::span<bf16> out,
                       const Mode& mode) {
  return dispatch(op, [&](auto kind) {
    return blocks<BF16>(op, a, b, out, mode, [&](const bf16* pa, const bf16* pb, bf16* po, std::size_t i, BulkReport& rep) {
      const __m128i ha = load8(pa), hb = load8(pb);
      Block blk;
      if ((detail::special16(ha, 0x7F80) | detail::special16(hb, 0x7F80)) != 0 ||
          !compute<kind.value>(detail::bf16_to_ps(ha), detail::bf16_to_ps(hb), true, blk) ||
          !plain_result(blk.res, 0x1p-126f, 0x1.ffp127f)) {
        return false;
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(po), detail::ps_to_bf16(blk.res));
      const int inexact = detail::mask8(blk.inexact) | detail::bf16_inexact(blk.res);
      detail::raise_mask(rep, Flag::Inexact, inexact, static_cast<std::int64_t>(i));
      return true;
    });
  });
}

BulkReport elementwise(BinaryOp op, std::span<const float> a, std::span<const float> b, std::span<float> out,
                       const Mode& mode) {
  return dispatch(op, [&](auto kind) {
    return blocks<F32>(op, a, b, out, mode, [&](const float* pa, const float* pb, float* po, std::size_t i, BulkReport& rep) {
      const __m256 va = _mm256_loadu_ps(pa), vb = _mm256_loadu_ps(pb);
      Block blk;
      if ((detail::special32(va) | detail::special32(vb)) != 0 || !compute<kind.value>(va, vb, false, blk))
        return false;
      _mm256_storeu_ps(po, blk.res);
      detail::raise_mask(rep, Flag::Inexact, detail::mask8(blk.inexact), static_cast<std::int64_t>(i));
      return true;
    });
  });
}

}  // namespace probelab::num
