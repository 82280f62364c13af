// Internal: the scalar operations, generic over the format. The Mode is assumed validated.
// Each takes and returns raw bit patterns of F; see arith.h for the semantics.
#pragma once

#include <cmath>
#include <cstdint>

#include "numerics/detail/format.h"
#include "numerics/types.h"

namespace probelab::num::detail {

// An operand read through the Mode.
struct Operand {
  double v = 0;       // exact value (after flushing); meaningless when nan
  bool nan = false;
  bool snan = false;
  bool inf = false;
};

template <class F>
inline Operand read(std::uint32_t b, const Mode& m, std::uint8_t& fl) noexcept {
  Operand o;
  if (is_nan_bits<F>(b)) {
    o.nan = true;
    o.snan = is_snan_bits<F>(b);
    if (o.snan) fl |= fbit(Flag::Invalid);
    return o;
  }
  if (is_inf_bits<F>(b)) {
    o.inf = true;
    o.v = (b & F::sign_mask) ? -INFINITY : INFINITY;
    return o;
  }
  if (is_sub_bits<F>(b)) {
    fl |= fbit(Flag::DenormalIn);
    if (m.denormal == DenormalMode::FlushToZero) {
      o.v = (b & F::sign_mask) ? -0.0 : 0.0;
      return o;
    }
  }
  o.v = decode_finite<F>(b);
  return o;
}

template <class F>
inline Rounded<F> nan_out(std::uint8_t fl, const Mode& m) noexcept {
  return {nan_result(F::default_nan, m), Flags(fl)};
}
template <class F>
inline Rounded<F> invalid_out(std::uint8_t fl, const Mode& m) noexcept {
  return nan_out<F>(static_cast<std::uint8_t>(fl | fbit(Flag::Invalid)), m);
}
template <class F>
inline Rounded<F> finish(double ro, std::uint8_t fl, const Mode& m) noexcept {
  Rounded<F> r = round_to<F>(ro, m);
  r.flags |= Flags(fl);
  return r;
}

template <class F>
Rounded<F> add_op(std::uint32_t ab, std::uint32_t bb, bool negate_b, const Mode& m) noexcept {
  std::uint8_t fl = 0;
  const Operand a = read<F>(ab, m, fl);
  Operand b = read<F>(bb, m, fl);
  if (a.nan || b.nan) return nan_out<F>(fl, m);
  if (negate_b) b.v = -b.v;
  if (a.inf && b.inf && (a.v != b.v)) return invalid_out<F>(fl, m);
  const double s = a.v + b.v;
  if (a.inf || b.inf) return finish<F>(s, fl, m);
  const double bv = s - a.v;
  const double err = (a.v - (s - bv)) + (b.v - bv);
  return finish<F>(to_odd(s, err), fl, m);
}

template <class F>
Rounded<F> mul_op(std::uint32_t ab, std::uint32_t bb, const Mode& m) noexcept {
  std::uint8_t fl = 0;
  const Operand a = read<F>(ab, m, fl);
  const Operand b = read<F>(bb, m, fl);
  if (a.nan || b.nan) return nan_out<F>(fl, m);
  if ((a.inf && b.v == 0) || (b.inf && a.v == 0)) return invalid_out<F>(fl, m);
  return finish<F>(a.v * b.v, fl, m);  // exact in binary64: at most 2 x 24 significant bits
}

template <class F>
Rounded<F> div_op(std::uint32_t ab, std::uint32_t bb, const Mode& m) noexcept {
  std::uint8_t fl = 0;
  const Operand a = read<F>(ab, m, fl);
  const Operand b = read<F>(bb, m, fl);
  if (a.nan || b.nan) return nan_out<F>(fl, m);
  if ((a.inf && b.inf) || (a.v == 0 && b.v == 0)) return invalid_out<F>(fl, m);
  if (b.v == 0 && !a.inf) fl |= fbit(Flag::DivByZero);
  if (a.inf || b.inf || a.v == 0 || b.v == 0) return finish<F>(a.v / b.v, fl, m);
  const double q = a.v / b.v;
  const double r = std::fma(-q, b.v, a.v);  // exact remainder: a/b = q + r/b
  return finish<F>(to_odd(q, r * b.v), fl, m);
}

template <class F>
Rounded<F> sqrt_op(std::uint32_t ab, const Mode& m) noexcept {
  std::uint8_t fl = 0;
  const Operand a = read<F>(ab, m, fl);
  if (a.nan) return nan_out<F>(fl, m);
  if (a.v < 0) return invalid_out<F>(fl, m);
  if (a.inf || a.v == 0) return finish<F>(a.v, fl, m);
  const double s = std::sqrt(a.v);
  const double r = std::fma(-s, s, a.v);  // exact: sqrt(a) > s iff r > 0
  return finish<F>(to_odd(s, r), fl, m);
}

// a*b + c rounded once to F; the operands are already read (they may come from other formats, as
// in GEMM accumulation steps); `fl` holds the flags raised while reading them.
template <class F>
Rounded<F> fma_core(const Operand& a, const Operand& b, const Operand& c, std::uint8_t fl, const Mode& m) noexcept {
  if ((a.inf && !b.nan && b.v == 0) || (b.inf && !a.nan && a.v == 0)) return invalid_out<F>(fl, m);
  if (a.nan || b.nan || c.nan) return nan_out<F>(fl, m);
  const double p = a.v * b.v;  // exact (or an exact infinity)
  if ((a.inf || b.inf) && c.inf && (p != c.v)) return invalid_out<F>(fl, m);
  const double s = p + c.v;
  if (a.inf || b.inf || c.inf) return finish<F>(s, fl, m);
  const double pv = s - p;
  const double err = (p - (s - pv)) + (c.v - pv);
  return finish<F>(to_odd(s, err), fl, m);
}

template <class F>
Rounded<F> fma_op(std::uint32_t ab, std::uint32_t bb, std::uint32_t cb, const Mode& m) noexcept {
  std::uint8_t fl = 0;
  const Operand a = read<F>(ab, m, fl);
  const Operand b = read<F>(bb, m, fl);
  const Operand c = read<F>(cb, m, fl);
  return fma_core<F>(a, b, c, fl, m);
}

// IEEE 754-2019 minimum/maximum (number_pref == false) or minimumNumber/maximumNumber.
template <class F>
Rounded<F> minmax_op(std::uint32_t ab, std::uint32_t bb, bool want_max, bool number_pref, const Mode& m) noexcept {
  std::uint8_t fl = 0;
  const Operand a = read<F>(ab, m, fl);
  const Operand b = read<F>(bb, m, fl);
  auto flushed = [&](std::uint32_t bits, const Operand& o) -> std::uint32_t {
    return (o.v == 0 && !o.nan) ? (bits & F::sign_mask) : bits;
  };
  if (a.nan || b.nan) {
    if (number_pref && !(a.nan && b.nan)) {
      const std::uint32_t keep = a.nan ? flushed(bb, b) : flushed(ab, a);
      return {is_inf_bits<F>(keep) ? inf_result<F>((keep & F::sign_mask) != 0, m) : keep, Flags(fl)};
    }
    return nan_out<F>(fl, m);
  }
  bool pick_a;
  if (a.v == b.v) {
    const bool a_neg = (ab & F::sign_mask) != 0;  // only zeros of different signs differ here
    pick_a = want_max ? !a_neg : a_neg;
  } else {
    pick_a = want_max ? (a.v > b.v) : (a.v < b.v);
  }
  const std::uint32_t keep = pick_a ? flushed(ab, a) : flushed(bb, b);
  return {is_inf_bits<F>(keep) ? inf_result<F>((keep & F::sign_mask) != 0, m) : keep, Flags(fl)};
}

template <class F>
Result<Cmp> compare_op(std::uint32_t ab, std::uint32_t bb, bool signaling, const Mode& m) noexcept {
  std::uint8_t fl = 0;
  const Operand a = read<F>(ab, m, fl);
  const Operand b = read<F>(bb, m, fl);
  if (a.nan || b.nan) {
    if (signaling) fl |= fbit(Flag::Invalid);
    return {Cmp::Unordered, Flags(fl)};
  }
  const Cmp c = a.v < b.v ? Cmp::Less : (a.v > b.v ? Cmp::Greater : Cmp::Equal);
  return {c, Flags(fl)};
}

}  // namespace probelab::num::detail

namespace probelab::num::detail {

// Conversion of a pattern of S to D (NaN payloads kept as in fp16.h).
template <class S, class D>
Rounded<D> convert_op(std::uint32_t sbits, const Mode& m) noexcept {
  std::uint8_t fl = 0;
  if (is_nan_bits<S>(sbits)) {
    if (is_snan_bits<S>(sbits)) fl |= fbit(Flag::Invalid);
    return {nan_result(nan_from_double<D>(nan_to_double<S>(sbits)), m), Flags(fl)};
  }
  const Operand o = read<S>(sbits, m, fl);
  if (o.inf && !D::has_inf) fl |= fbit(Flag::Overflow);
  return finish<D>(o.v, fl, m);
}

// Conversion of a binary64 value to D.
template <class D>
Rounded<D> convert_double(double x, const Mode& m) noexcept {
  const std::uint64_t u = std::bit_cast<std::uint64_t>(x);
  std::uint8_t fl = 0;
  if (x != x) {
    if ((u & (1ull << 51)) == 0) fl |= fbit(Flag::Invalid);
    return {nan_result(nan_from_double<D>(x), m), Flags(fl)};
  }
  if ((u & 0x7FF0000000000000ull) == 0 && (u & 0xFFFFFFFFFFFFFull) != 0) {
    fl |= fbit(Flag::DenormalIn);
    if (m.denormal == DenormalMode::FlushToZero) x = std::signbit(x) ? -0.0 : 0.0;
  }
  if (std::isinf(x) && !D::has_inf) fl |= fbit(Flag::Overflow);
  return finish<D>(x, fl, m);
}

}  // namespace probelab::num::detail
