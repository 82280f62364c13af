// Activations with parameters, as pointwise ops (ONNX semantics): Clip (min/max inputs; ReLU6 is
// Clip(0, 6)), HardSigmoid, HardSwish, LeakyRelu, PRelu (slope broadcast against X), Elu, Selu,
// Celu, ThresholdedRelu, Shrink. All differentiable except Shrink's bias term (its gradient is 1
// outside [-lambd, lambd]).
#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/ops/pointwise.h"
#include "numerics/elementary.h"

namespace probelab::graph::ops {
namespace {

// Clip(X, min?, max?). Opset < 11 gives min/max as attributes; they apply when the inputs are absent.
struct ClipF {
  static constexpr Kind kind = Kind::Numeric;
  double lo, hi;
  explicit ClipF(const Op& op)
      : lo(op.attr_float("min", -std::numeric_limits<double>::infinity())),
        hi(op.attr_float("max", std::numeric_limits<double>::infinity())) {}
  template <class T> static T absent(int i) {
    if constexpr (std::numeric_limits<T>::has_infinity)
      return i == 1 ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    else
      return i == 1 ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  }
  template <class T> T bound(T v, double attr, bool lower) const {
    // An absent input reads +/-inf (or the integer extreme); the attribute then applies.
    const T inf = absent<T>(lower ? 1 : 2);
    if (v == inf && std::isfinite(attr)) return static_cast<T>(attr);
    return v;
  }
  template <class T> T f(const T* x, int n) const { return unary<T>(x, n)(x[0]); }
  template <class T> auto unary(const T* x, int n) const {
    const T mn = bound(n > 1 ? x[1] : absent<T>(1), lo, true), mx = bound(n > 2 ? x[2] : absent<T>(2), hi, false);
    // std::max(v, mn) is (v < mn ? mn : v) and std::min(., mx) is (mx < . ? mx : .): a NaN v compares
    // false both times and comes through unchanged, with no branch (vectorisable as max/min).
    return [mn, mx](T v) { return std::min(std::max(v, mn), mx); };
  }
  template <class T> T d(int i, const T* x, int n, T) const {
    const T mn = bound(n > 1 ? x[1] : absent<T>(1), lo, true), mx = bound(n > 2 ? x[2] : absent<T>(2), hi, false);
    if (i == 0) return x[0] >= mn && x[0] <= mx ? T(1) : T(0);
    if (i == 1) return x[0] < mn ? T(1) : T(0);
    return x[0] > mx && x[0] >= mn ? T(1) : T(0);
  }
};

struct HardSigmoidF {
  static constexpr Kind kind = Kind::Float;
  double alpha, beta;
  explicit HardSigmoidF(const Op& op) : alpha(AttrReader(op).f("alpha")), beta(AttrReader(op).f("beta")) {}
  template <class T> T f(const T* x, int) const {
    return std::max(T(0), std::min(T(1), T(alpha) * x[0] + T(beta)));
  }
  template <class T> T d(int, const T* x, int, T) const {
    const T v = T(alpha) * x[0] + T(beta);
    return v > T(0) && v < T(1) ? T(alpha) : T(0);
  }
};

struct HardSwishF {
  static constexpr Kind kind = Kind::Float;
  explicit HardSwishF(const Op&) {}
  template <class T> T f(const T* x, int) const {
    return x[0] * std::max(T(0), std::min(T(1), x[0] / T(6) + T(0.5)));
  }
  template <class T> T d(int, const T* x, int, T) const {
    if (x[0] < T(-3)) return T(0);
    if (x[0] > T(3)) return T(1);
    return x[0] / T(3) + T(0.5);
  }
};

struct LeakyReluF {
  static constexpr Kind kind = Kind::Float;
  double alpha;
  explicit LeakyReluF(const Op& op) : alpha(AttrReader(op).f("alpha")) {}
  template <class T> T f(const T* x, int) const { return x[0] < T(0) ? T(alpha) * x[0] : x[0]; }
  template <class T> T d(int, const T* x, int, T) const { return x[0] < T(0) ? T(alpha) : T(1); }
};

struct PReluF {
  static constexpr Kind kind = Kind::Numeric;
  explicit PReluF(const Op&) {}
  template <class T> T f(const T* x, int) const { return x[0] < T(0) ? T(x[1] * x[0]) : x[0]; }
  template <class T> T d(int i, const T* x, int, T) const {
    if (i == 0) return x[0] < T(0) ? x[1] : T(1);
    return x[0] < T(0) ? x[0] : T(0);
  }
};

struct EluF {
  static constexpr Kind kind = Kind::Float;
  double alpha;
  explicit EluF(const Op& op) : alpha(AttrReader(op).f("alpha")) {}
  template <class T> T f(const T* x, int) const { return x[0] > T(0) ? x[0] : T(alpha) * num::expm1(x[0]); }
  template <class T> T d(int, const T* x, int, T y) const { return x[0] > T(0) ? T(1) : y + T(alpha); }
};

struct SeluF {
  static constexpr Kind kind = Kind::Float;
  double alpha, gamma;
  explicit SeluF(const Op& op) : alpha(AttrReader(op).f("alpha")), gamma(AttrReader(op).f("gamma")) {}
  template <class T> T f(const T* x, int) const {
    return x[0] > T(0) ? T(gamma) * x[0] : T(gamma) * (T(alpha) * num::exp(x[0]) - T(alpha));
  }
  template <class T> T d(int, const T* x, int, T y) const {
    return x[0] > T(0) ? T(gamma) : y + T(gamma * alpha);
  }
};

struct CeluF {
  static constexpr Kind kind = Kind::Float;
  double alpha;
  explicit CeluF(const Op& op) : alpha(AttrReader(op).f("alpha")) {}
  template <class T> T f(const T* x, int) const {
    return std::max(T(0), x[0]) + std::min(T(0), T(alpha) * num::expm1(x[0] / T(alpha)));
  }
  template <class T> T d(int, const T* x, int, T) const {
    return x[0] > T(0) ? T(1) : num::exp(x[0] / T(alpha));
  }
};

struct ThresholdedReluF {
  static constexpr Kind kind = Kind::Float;
  double alpha;
  explicit ThresholdedReluF(const Op& op) : alpha(AttrReader(op).f("alpha")) {}
  template <class T> T f(const T* x, int) const { return x[0] > T(alpha) ? x[0] : T(0); }
  template <class T> T d(int, const T* x, int, T) const { return x[0] > T(alpha) ? T(1) : T(0); }
};

struct ShrinkF {
  static constexpr Kind kind = Kind::Numeric;
  double bias, lambd;
  explicit ShrinkF(const Op& op) : bias(AttrReader(op).f("bias")), lambd(AttrReader(op).f("lambd")) {}
  template <class T> T f(const T* x, int) const {
    const double v = static_cast<double>(x[0]);
    if (v < -lambd) return static_cast<T>(v + bias);
    if (v > lambd) return static_cast<T>(v - bias);
    return T(0);
  }
  template <class T> T d(int, const T* x, int, T) const {
    return std::fabs(static_cast<double>(x[0])) > lambd ? T(1) : T(0);
  }
};

AttrSpec alpha(double def, const char* doc) { return attr_float("alpha", def, doc); }

}  // namespace

void register_activation_param_ops(OpRegistry& r) {
  OpDef clip = pointwise_def<ClipF>("Clip", "Y = min(max(X, min), max) (ONNX Clip; ReLU6 = Clip(X, 0, 6))",
                                    {"input", "min?", "max?"}, 1, 3,
                                    {attr_nodefault("min", false, "lower bound (opset < 11; later an input)"),
                                     attr_nodefault("max", false, "upper bound (opset < 11; later an input)")});
  r.add(std::move(clip));
  r.add(pointwise_def<HardSigmoidF>("HardSigmoid", "Y = max(0, min(1, alpha * X + beta))", {"X"}, 1, 1,
                                    {alpha(0.2, "slope"), attr_float("beta", 0.5, "offset")}));
  r.add(pointwise_def<HardSwishF>("HardSwish", "Y = X * HardSigmoid(X; alpha = 1/6, beta = 0.5)", {"X"}, 1, 1));
  r.add(pointwise_def<LeakyReluF>("LeakyRelu", "Y = X < 0 ? alpha * X : X", {"X"}, 1, 1,
                                  {alpha(0.01, "slope for X < 0")}));
  r.add(pointwise_def<PReluF>("PRelu", "Y = X < 0 ? slope * X : X, slope broadcast against X", {"X", "slope"}, 2, 2));
  r.add(pointwise_def<EluF>("Elu", "Y = X > 0 ? X : alpha * (exp(X) - 1)", {"X"}, 1, 1, {alpha(1.0, "scale for X <= 0")}));
  r.add(pointwise_def<SeluF>("Selu", "Y = gamma * (X > 0 ? X : alpha * (exp(X) - 1))", {"X"}, 1, 1,
                             {alpha(1.67326319217681884765625, "scale for X <= 0"),
                              attr_float("gamma", 1.05070102214813232421875, "output scale")}));
  r.add(pointwise_def<CeluF>("Celu", "Y = max(0, X) + min(0, alpha * (exp(X / alpha) - 1))", {"X"}, 1, 1,
                             {alpha(1.0, "scale")}));
  r.add(pointwise_def<ThresholdedReluF>("ThresholdedRelu", "Y = X > alpha ? X : 0", {"X"}, 1, 1,
                                        {alpha(1.0, "threshold")}));
  r.add(pointwise_def<ShrinkF>("Shrink", "Y = X < -lambd ? X + bias : X > lambd ? X - bias : 0", {"input"}, 1, 1,
                               {attr_float("bias", 0.0, "shift"), attr_float("lambd", 0.5, "threshold")}));
}

}  // namespace probelab::graph::ops
