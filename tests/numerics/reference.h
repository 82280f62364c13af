// Exact reference arithmetic for the numerics tests, independent of the library's implementation:
// values are exact rationals num/den * 2^exp (or sqrt of a dyadic) held in Boost cpp_int, and
// rounding to a format is done with integer floor/remainder arithmetic at the format's quantum.
// The special-value rules are written from the documentation in arith.h / flags.h / mode.h.
#pragma once

#include <boost/multiprecision/cpp_int.hpp>
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "numerics/flags.h"
#include "numerics/mode.h"

namespace probelab::num::ref {

// Two integer types: Big (fixed 1024-bit, checked: an overflow throws instead of giving a wrong
// reference; covers every exact FP32/BF16 fma and quotient shift) and Fast (__int128, enough for
// every FP16 operation: all FP16 values and products are multiples of 2^-48 below 2^33).
using BigInt = boost::multiprecision::number<boost::multiprecision::cpp_int_backend<
    1024, 1024, boost::multiprecision::signed_magnitude, boost::multiprecision::checked, void>>;
__extension__ typedef __int128 FastInt;

inline int msb(const BigInt& x) { return static_cast<int>(boost::multiprecision::msb(x)); }
inline BigInt isqrt(const BigInt& x) { return boost::multiprecision::sqrt(x); }
inline int msb(FastInt x) {
  const auto hi = static_cast<std::uint64_t>(x >> 64);
  return hi ? 127 - __builtin_clzll(hi) : 63 - __builtin_clzll(static_cast<std::uint64_t>(x));
}
inline FastInt isqrt(FastInt x) {  // floor(sqrt(x)), x >= 0, by bisection on the bit pattern
  FastInt r = 0;
  for (int b = msb(x) / 2 + 1; b >= 0; --b) {
    const FastInt c = r | (FastInt(1) << b);
    if (c * c <= x) r = c;
  }
  return r;
}

struct Fmt {
  int p;       // precision incl. hidden bit
  int ebits;
  bool ieee;   // has Inf, NaN = all-ones exponent; false: E4M3 (NaN = S.1111.111, no Inf)
  int bias() const { return (1 << (ebits - 1)) - 1; }
  int emin() const { return 1 - bias(); }
  int emax() const { return ieee ? bias() : bias() + 1; }
  int fbits() const { return p - 1; }
  std::uint32_t sign() const { return 1u << (ebits + p - 1); }
  std::uint32_t max_frac() const { return ieee ? (1u << fbits()) - 1 : (1u << fbits()) - 2; }
  std::uint32_t max_bits() const { return (std::uint32_t(emax() + bias()) << fbits()) | max_frac(); }
  std::uint32_t inf_bits() const { return std::uint32_t((1 << ebits) - 1) << fbits(); }
  std::uint32_t qnan() const { return ieee ? inf_bits() | (1u << (fbits() - 1)) : inf_bits() | ((1u << fbits()) - 1); }
};
inline constexpr Fmt kF16{11, 5, true};
inline constexpr Fmt kBF16{8, 8, true};
inline constexpr Fmt kF32{24, 8, true};
inline constexpr Fmt kE5M2{3, 5, true};
inline constexpr Fmt kE4M3{4, 4, false};

struct Out {
  std::uint32_t bits;
  Flags flags;
};

template <class Int>
struct Exact {
// A decoded value: NaN, Inf, or finite num/den * 2^exp (num >= 0, den > 0), or (is_sqrt) the
// square root of num * 2^exp.
struct Val {
  bool nan = false, snan = false, inf = false, neg = false, is_sqrt = false;
  Int num = 0, den = 1;
  int exp = 0;
  bool zero() const { return !nan && !inf && num == 0; }
};

static Val decode(const Fmt& f, std::uint32_t b, const Mode& m, Flags& fl) {
  Val v;
  v.neg = (b & f.sign()) != 0;
  const std::uint32_t e = (b >> f.fbits()) & ((1u << f.ebits) - 1);
  const std::uint32_t frac = b & ((1u << f.fbits()) - 1);
  const bool top = e == (1u << f.ebits) - 1;
  if (f.ieee && top) {
    if (frac == 0) v.inf = true;
    else { v.nan = true; v.snan = (frac >> (f.fbits() - 1)) == 0; }
  } else if (!f.ieee && top && frac == (1u << f.fbits()) - 1) {
    v.nan = true;
  } else if (e == 0) {
    v.num = frac;
    v.exp = f.emin() - f.fbits();
    if (frac != 0) {
      fl.set(Flag::DenormalIn);
      if (m.denormal == DenormalMode::FlushToZero) v.num = 0;
    }
  } else {
    v.num = Int(frac) + (Int(1) << f.fbits());
    v.exp = int(e) - f.bias() - f.fbits();
  }
  if (v.snan) fl.set(Flag::Invalid);
  return v;
}

// floor(|v| / 2^q) and the remainder's relation to half a quantum: -1 below, 0 equal, 1 above,
// with `exact` = remainder zero.
static Int floor_q(const Val& v, int q, int& half, bool& exact) {
  if (!v.is_sqrt && v.den == 1) {  // dyadic: shifts only
    const int s = v.exp - q;
    if constexpr (std::is_same_v<Int, FastInt>) {
      if (s > 0 && v.num != 0 && msb(v.num) + s > 125) throw std::overflow_error("reference: __int128 too narrow");
    }
    if (s >= 0) {
      exact = true;
      half = -1;
      return v.num << s;
    }
    const unsigned k = static_cast<unsigned>(-s);
    const Int t = v.num >> k;
    const Int r = v.num - (t << k);
    exact = r == 0;
    const Int halfq = Int(1) << (k - 1);
    half = r < halfq ? -1 : (r == halfq ? 0 : 1);
    return t;
  }
  if (!v.is_sqrt) {
    Int n = v.num, d = v.den;
    const int s = v.exp - q;
    if (s >= 0) n <<= s; else d <<= -s;
    Int t = n / d;
    const Int r = n - t * d;
    exact = r == 0;
    const Int r2 = r * 2;
    half = r2 < d ? -1 : (r2 == d ? 0 : 1);
    return t;
  }
  // sqrt(num * 2^exp) / 2^q = sqrt(num * 2^(exp - 2q))
  Int n = v.num;
  int s = v.exp - 2 * q;
  if (s >= 0) {
    n <<= s;
    Int t = isqrt(n);
    exact = t * t == n;
    const Int lhs = n * 4, rhs = (2 * t + 1) * (2 * t + 1);
    half = lhs < rhs ? -1 : (lhs == rhs ? 0 : 1);
    return t;
  }
  if ((-s) % 2 != 0) { n <<= 1; s -= 1; }
  const int j = -s / 2;  // sqrt(n) / 2^j
  const Int root = isqrt(n);
  Int t = root >> j;
  const Int tj = t << j;
  exact = tj * tj == n;
  const Int lhs = n * 4, mid = ((2 * t + 1) << j), rhs = mid * mid;
  half = lhs < rhs ? -1 : (lhs == rhs ? 0 : 1);
  return t;
}

static std::uint32_t inf_out(const Fmt& f, bool neg, const Mode& m) {
  const std::uint32_t s = neg ? f.sign() : 0;
  if (m.overflow == OverflowMode::Saturation) return s | f.max_bits();
  return f.ieee ? (s | f.inf_bits()) : (s | f.qnan());
}
static Out nan_out(const Fmt& f, Flags fl, const Mode& m) {
  return {m.overflow == OverflowMode::Saturation ? 0u : f.qnan(), fl};
}

// Rounds an exact finite non-zero or zero value (or Inf) to f with RNE and the Mode.
static Out round(const Fmt& f, const Val& v, const Mode& m, Flags fl) {
  const std::uint32_t s = v.neg ? f.sign() : 0;
  if (v.inf) return {inf_out(f, v.neg, m), fl};
  if (v.num == 0) return {s, fl};
  const int qmin = f.emin() - f.p + 1;
  int half = 0;
  bool exact = false;
  const Int hidden = Int(1) << (f.p - 1);
  const bool dyadic = !v.is_sqrt && v.den == 1;
  const int lead = dyadic ? msb(v.num) + v.exp : 0;  // floor(log2 |v|)
  int q = qmin;
  Int t;
  if (dyadic) {
    q = std::max(lead, f.emin()) - f.p + 1;
    t = floor_q(v, q, half, exact);
  } else {
    t = floor_q(v, qmin, half, exact);
    if (t >= hidden) {
      q = qmin + int(msb(t)) - (f.p - 1);
      t = floor_q(v, q, half, exact);
    }
  }
  // tiny: |v| < (2^(p+1) - 1) * 2^(emin - p - 1)
  int h2 = 0;
  bool e2 = false;
  const bool tiny = (dyadic && lead >= f.emin()) ? false
                                                 : floor_q(v, f.emin() - f.p - 1, h2, e2) < (Int(1) << (f.p + 1)) - 1;
  if (half > 0 || (half == 0 && (t & 1) != 0)) t += 1;  // nearest, ties to even
  if (t == 2 * hidden) { t = hidden; ++q; }
  if (!exact) fl.set(Flag::Inexact);
  if (t >= hidden) {
    const int E = q + f.p - 1;
    const auto frac = static_cast<std::uint32_t>(t - hidden);
    if (E > f.emax() || (E == f.emax() && frac > f.max_frac())) {
      fl.set(Flag::Overflow).set(Flag::Inexact);
      return {inf_out(f, v.neg, m), fl};
    }
    if (tiny && !exact) fl.set(Flag::Underflow);
    return {s | (std::uint32_t(E + f.bias()) << f.fbits()) | frac, fl};
  }
  if (tiny && !exact) fl.set(Flag::Underflow);
  if (t == 0) return {s, fl};
  fl.set(Flag::DenormalOut);
  if (m.denormal == DenormalMode::FlushToZero) {
    fl.set(Flag::Underflow).set(Flag::Inexact);
    return {s, fl};
  }
  return {s | static_cast<std::uint32_t>(t), fl};
}

// Exact a + b of finite dyadic values.
static Val exact_add(const Val& a, const Val& b) {
  Val r;
  const int e = std::min(a.exp, b.exp);
  const Int x = a.num << (a.exp - e), y = b.num << (b.exp - e);
  r.exp = e;
  if (a.neg == b.neg) { r.num = x + y; r.neg = a.neg; }
  else if (x >= y) { r.num = x - y; r.neg = a.neg; }
  else { r.num = y - x; r.neg = b.neg; }
  if (r.num == 0) r.neg = a.neg && b.neg && a.num == 0 && b.num == 0;
  return r;
}
static Val exact_mul(const Val& a, const Val& b) {
  Val r;
  r.num = a.num * b.num;
  r.exp = a.exp + b.exp;
  r.neg = a.neg != b.neg;
  return r;
}

static Out add(const Fmt& f, std::uint32_t ab, std::uint32_t bb, const Mode& m, bool negate_b = false) {
  Flags fl;
  Val a = decode(f, ab, m, fl), b = decode(f, bb, m, fl);
  if (a.nan || b.nan) return nan_out(f, fl, m);
  if (negate_b) b.neg = !b.neg;
  if (a.inf && b.inf) {
    if (a.neg != b.neg) return nan_out(f, fl | Flag::Invalid, m);
    return round(f, a, m, fl);
  }
  if (a.inf) return round(f, a, m, fl);
  if (b.inf) return round(f, b, m, fl);
  return round(f, exact_add(a, b), m, fl);
}

static Out mul(const Fmt& f, std::uint32_t ab, std::uint32_t bb, const Mode& m) {
  Flags fl;
  const Val a = decode(f, ab, m, fl), b = decode(f, bb, m, fl);
  if (a.nan || b.nan) return nan_out(f, fl, m);
  if ((a.inf && b.zero()) || (b.inf && a.zero())) return nan_out(f, fl | Flag::Invalid, m);
  if (a.inf || b.inf) {
    Val r;
    r.inf = true;
    r.neg = a.neg != b.neg;
    return round(f, r, m, fl);
  }
  return round(f, exact_mul(a, b), m, fl);
}

static Out div(const Fmt& f, std::uint32_t ab, std::uint32_t bb, const Mode& m) {
  Flags fl;
  const Val a = decode(f, ab, m, fl), b = decode(f, bb, m, fl);
  if (a.nan || b.nan) return nan_out(f, fl, m);
  if ((a.inf && b.inf) || (a.zero() && b.zero())) return nan_out(f, fl | Flag::Invalid, m);
  Val r;
  r.neg = a.neg != b.neg;
  if (a.inf || b.zero()) {
    if (!a.inf) fl.set(Flag::DivByZero);
    r.inf = true;
    return round(f, r, m, fl);
  }
  if (b.inf || a.zero()) return round(f, r, m, fl);  // signed zero
  r.num = a.num;
  r.den = b.num;
  r.exp = a.exp - b.exp;
  return round(f, r, m, fl);
}

static Out sqrt(const Fmt& f, std::uint32_t ab, const Mode& m) {
  Flags fl;
  Val a = decode(f, ab, m, fl);
  if (a.nan) return nan_out(f, fl, m);
  if (a.neg && !a.zero()) return nan_out(f, fl | Flag::Invalid, m);
  if (a.inf || a.zero()) return round(f, a, m, fl);
  a.is_sqrt = true;
  return round(f, a, m, fl);
}

static Out fma(const Fmt& f, std::uint32_t ab, std::uint32_t bb, std::uint32_t cb, const Mode& m) {
  Flags fl;
  const Val a = decode(f, ab, m, fl), b = decode(f, bb, m, fl), c = decode(f, cb, m, fl);
  if ((a.inf && !b.nan && b.zero()) || (b.inf && !a.nan && a.zero())) return nan_out(f, fl | Flag::Invalid, m);
  if (a.nan || b.nan || c.nan) return nan_out(f, fl, m);
  const bool p_inf = a.inf || b.inf;
  const bool p_neg = a.neg != b.neg;
  if (p_inf && c.inf && p_neg != c.neg) return nan_out(f, fl | Flag::Invalid, m);
  if (p_inf || c.inf) {
    Val r;
    r.inf = true;
    r.neg = p_inf ? p_neg : c.neg;
    return round(f, r, m, fl);
  }
  return round(f, exact_add(exact_mul(a, b), c), m, fl);
}

// Rounds an exact dyadic value sign * num * 2^exp (used by GEMM references).
static Out round_dyadic(const Fmt& f, bool neg, const Int& num, int exp, const Mode& m) {
  Val v;
  v.neg = neg;
  v.num = num;
  v.exp = exp;
  return round(f, v, m, {});
}

};

using Big = Exact<BigInt>;
using Fast = Exact<FastInt>;

}  // namespace probelab::num::ref
