// Unary math (ONNX Abs, Neg, Sqrt, Reciprocal, Exp, Log, Erf, the trigonometric and hyperbolic
// functions, Softsign, Softplus, Mish, Ceil, Floor, Round, Sign, IsNaN, IsInf, Not) as pointwise ops.
// Rounding ops, Sign and the tests are inference only.
#include <cmath>
#include <numbers>

#include "graph/ops/pointwise.h"
#include "numerics/elementary.h"

namespace probelab::graph::ops {
namespace {

// A unary functor from an expression of x (value) and of x and y (derivative).
#define PROBELAB_UNARY(Name, K, value, deriv)                                  \
  struct Name {                                                                \
    static constexpr Kind kind = K;                                            \
    explicit Name(const Op&) {}                                                \
    template <class T> T f(const T* in, int) const {                           \
      const T x = in[0];                                                       \
      return value;                                                            \
    }                                                                          \
    template <class T> T d(int, const T* in, int, T y) const {                 \
      const T x = in[0];                                                       \
      (void)x;                                                                 \
      (void)y;                                                                 \
      return deriv;                                                            \
    }                                                                          \
  };
#define PROBELAB_UNARY_NODIFF(Name, K, value)                                  \
  struct Name {                                                                \
    static constexpr Kind kind = K;                                            \
    explicit Name(const Op&) {}                                                \
    template <class T> auto f(const T* in, int) const {                        \
      const T x = in[0];                                                       \
      return value;                                                            \
    }                                                                          \
  };

template <class T> T sgn(T x) { return x > T(0) ? T(1) : x < T(0) ? T(-1) : T(0); }
template <class T> T softplus(T x) {
  return x > T(0) ? x + num::log1p(num::exp(-x)) : num::log1p(num::exp(x));
}
template <class T> T sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + num::exp(-x));
  const T e = num::exp(x);
  return e / (T(1) + e);
}
constexpr double kTwoOverSqrtPi = 2.0 * std::numbers::inv_sqrtpi;
// Mish (ONNX 18): x tanh(softplus(x)); its derivative tanh(sp) + x (1 - tanh(sp)^2) sigmoid(x).
template <class T> T mish_grad(T x) {
  const T t = num::tanh(softplus(x));
  return t + x * (T(1) - t * t) * sigmoid(x);
}

PROBELAB_UNARY(AbsF, Kind::Numeric, x < T(0) ? T(-x) : x, sgn(x))
PROBELAB_UNARY(NegF, Kind::Numeric, T(-x), T(-1))
PROBELAB_UNARY(SqrtF, Kind::Float, std::sqrt(x), T(0.5) / y)
PROBELAB_UNARY(ReciprocalF, Kind::Float, T(1) / x, -y * y)
PROBELAB_UNARY(ExpF, Kind::Float, num::exp(x), y)
PROBELAB_UNARY(LogF, Kind::Float, num::log(x), T(1) / x)
PROBELAB_UNARY(ErfF, Kind::Float, num::erf(x), T(kTwoOverSqrtPi) * num::exp(-x * x))
PROBELAB_UNARY(SinF, Kind::Float, num::sin(x), num::cos(x))
PROBELAB_UNARY(CosF, Kind::Float, num::cos(x), -num::sin(x))
PROBELAB_UNARY(TanF, Kind::Float, num::tan(x), T(1) + y * y)
PROBELAB_UNARY(AsinF, Kind::Float, num::asin(x), T(1) / std::sqrt(T(1) - x * x))
PROBELAB_UNARY(AcosF, Kind::Float, num::acos(x), T(-1) / std::sqrt(T(1) - x * x))
PROBELAB_UNARY(AtanF, Kind::Float, num::atan(x), T(1) / (T(1) + x * x))
PROBELAB_UNARY(SinhF, Kind::Float, num::sinh(x), num::cosh(x))
PROBELAB_UNARY(CoshF, Kind::Float, num::cosh(x), num::sinh(x))
PROBELAB_UNARY(AsinhF, Kind::Float, num::asinh(x), T(1) / std::sqrt(x * x + T(1)))
PROBELAB_UNARY(AcoshF, Kind::Float, num::acosh(x), T(1) / std::sqrt(x * x - T(1)))
PROBELAB_UNARY(AtanhF, Kind::Float, num::atanh(x), T(1) / (T(1) - x * x))
PROBELAB_UNARY(SoftsignF, Kind::Float, x / (T(1) + std::fabs(x)), T(1) / ((T(1) + std::fabs(x)) * (T(1) + std::fabs(x))))
PROBELAB_UNARY(SoftplusF, Kind::Float, softplus(x), sigmoid(x))
PROBELAB_UNARY(MishF, Kind::Float, x * num::tanh(softplus(x)), mish_grad(x))
PROBELAB_UNARY_NODIFF(CeilF, Kind::Float, std::ceil(x))
PROBELAB_UNARY_NODIFF(FloorF, Kind::Float, std::floor(x))
PROBELAB_UNARY_NODIFF(RoundF, Kind::Float, std::nearbyint(x))  // half to even (default rounding mode)
PROBELAB_UNARY_NODIFF(SignF, Kind::Numeric, sgn(x))
PROBELAB_UNARY_NODIFF(IsNaNF, Kind::FloatTest, std::uint8_t(std::isnan(x) ? 1 : 0))
PROBELAB_UNARY_NODIFF(NotF, Kind::Logic, std::uint8_t(x ? 0 : 1))

#undef PROBELAB_UNARY
#undef PROBELAB_UNARY_NODIFF

struct IsInfF {
  static constexpr Kind kind = Kind::FloatTest;
  bool neg, pos;
  explicit IsInfF(const Op& op)
      : neg(AttrReader(op).i("detect_negative") != 0), pos(AttrReader(op).i("detect_positive") != 0) {}
  template <class T> std::uint8_t f(const T* in, int) const {
    const T x = in[0];
    return std::isinf(x) && ((x > 0 && pos) || (x < 0 && neg)) ? 1 : 0;
  }
};

template <class P> OpDef unary(std::string type, std::string doc, std::vector<AttrSpec> attrs = {}) {
  return pointwise_def<P>(std::move(type), std::move(doc), {"X"}, 1, 1, std::move(attrs));
}

}  // namespace

void register_math_ops(OpRegistry& r) {
  r.add(unary<AbsF>("Abs", "Y = |X| (float or integer)"));
  r.add(unary<NegF>("Neg", "Y = -X (float or integer)"));
  r.add(unary<SqrtF>("Sqrt", "Y = sqrt(X)"));
  r.add(unary<ReciprocalF>("Reciprocal", "Y = 1 / X"));
  r.add(unary<ExpF>("Exp", "Y = exp(X)"));
  r.add(unary<LogF>("Log", "Y = ln(X)"));
  r.add(unary<ErfF>("Erf", "Y = erf(X)"));
  r.add(unary<SinF>("Sin", "Y = sin(X)"));
  r.add(unary<CosF>("Cos", "Y = cos(X)"));
  r.add(unary<TanF>("Tan", "Y = tan(X)"));
  r.add(unary<AsinF>("Asin", "Y = asin(X)"));
  r.add(unary<AcosF>("Acos", "Y = acos(X)"));
  r.add(unary<AtanF>("Atan", "Y = atan(X)"));
  r.add(unary<SinhF>("Sinh", "Y = sinh(X)"));
  r.add(unary<CoshF>("Cosh", "Y = cosh(X)"));
  r.add(unary<AsinhF>("Asinh", "Y = asinh(X)"));
  r.add(unary<AcoshF>("Acosh", "Y = acosh(X)"));
  r.add(unary<AtanhF>("Atanh", "Y = atanh(X)"));
  r.add(unary<SoftsignF>("Softsign", "Y = X / (1 + |X|)"));
  r.add(unary<SoftplusF>("Softplus", "Y = ln(1 + exp(X))"));
  r.add(unary<MishF>("Mish", "Y = X * tanh(ln(1 + exp(X))) (ONNX Mish, opset 18)"));
  for (OpDef d : {unary<CeilF>("Ceil", "Y = ceil(X) (inference only)"), unary<FloorF>("Floor", "Y = floor(X) (inference only)"),
                  unary<RoundF>("Round", "Y = X rounded to the nearest integer, halves to even (inference only)"),
                  unary<SignF>("Sign", "Y = -1, 0 or 1 by the sign of X (inference only)")}) {
    d.piecewise_constant = true;  // stop gradients
    r.add(std::move(d));
  }
  r.add(unary<IsNaNF>("IsNaN", "Y = X is NaN (bool)"));
  r.add(unary<IsInfF>("IsInf", "Y = X is +/-Inf (bool)",
                      {attr_int("detect_negative", 1, "1: -Inf counts"), attr_int("detect_positive", 1, "1: +Inf counts")}));
  r.add(unary<NotF>("Not", "Y = logical not X (bool)"));
}

}  // namespace probelab::graph::ops
