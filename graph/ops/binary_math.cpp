// Broadcasting elementwise ops of several inputs (ONNX semantics): Pow, Max, Min, Sum, Mean, Mod,
// the comparisons Equal, Greater, GreaterOrEqual, Less, LessOrEqual (bool result), the logic ops
// And, Or, Xor, and Where (select by a bool condition; any dtype).
#include <cmath>
#include <cstring>

#include "graph/ops/pointwise.h"
#include "numerics/elementary.h"

namespace probelab::graph::ops {
namespace {

struct PowF {
  static constexpr Kind kind = Kind::Numeric;
  explicit PowF(const Op&) {}
  template <class T> T f(const T* x, int) const {
    if constexpr (std::is_integral_v<T>) {
      if (x[1] < 0) return x[0] == 1 ? T(1) : T(0);
      T r = 1;
      for (T e = 0; e < x[1]; ++e) r = static_cast<T>(r * x[0]);
      return r;
    } else {
      return num::pow(x[0], x[1]);
    }
  }
  template <class T> T d(int i, const T* x, int, T y) const {
    if (i == 0) return x[1] == T(0) ? T(0) : x[1] * num::pow(x[0], x[1] - T(1));
    return x[0] > T(0) ? y * num::log(x[0]) : T(0);
  }
};

// d(Max or Min)/d(input i): the inputs equal to the result share the gradient evenly (as
// PyTorch's maximum/minimum and amax/amin do), so that Max(w, w) has the derivative 1 of w itself.
template <class T> T tied_share(int i, const T* x, int n, T y) {
  if (!(x[i] == y)) return T(0);
  int ties = 0;
  for (int j = 0; j < n; ++j) ties += x[j] == y ? 1 : 0;
  return T(1) / static_cast<T>(ties);
}

struct MaxF {
  static constexpr Kind kind = Kind::Numeric;
  explicit MaxF(const Op&) {}
  template <class T> T f(const T* x, int n) const {
    T m = x[0];
    for (int i = 1; i < n; ++i)
      if (x[i] > m || std::isnan(static_cast<double>(x[i]))) m = x[i];
    return m;
  }
  template <class T> T d(int i, const T* x, int n, T y) const { return tied_share(i, x, n, y); }
};

struct MinF {
  static constexpr Kind kind = Kind::Numeric;
  explicit MinF(const Op&) {}
  template <class T> T f(const T* x, int n) const {
    T m = x[0];
    for (int i = 1; i < n; ++i)
      if (x[i] < m || std::isnan(static_cast<double>(x[i]))) m = x[i];
    return m;
  }
  template <class T> T d(int i, const T* x, int n, T y) const { return tied_share(i, x, n, y); }
};

struct SumF {
  static constexpr Kind kind = Kind::Numeric;
  explicit SumF(const Op&) {}
  template <class T> T f(const T* x, int n) const {
    T s = x[0];
    for (int i = 1; i < n; ++i) s = static_cast<T>(s + x[i]);
    return s;
  }
  template <class T> T d(int, const T*, int, T) const { return T(1); }
};

struct MeanF {
  static constexpr Kind kind = Kind::Float;
  explicit MeanF(const Op&) {}
  template <class T> T f(const T* x, int n) const {
    T s = x[0];
    for (int i = 1; i < n; ++i) s += x[i];
    return s / static_cast<T>(n);
  }
  template <class T> T d(int, const T*, int n, T) const { return T(1) / static_cast<T>(n); }
};

// fmod = 0: the sign follows the divisor (Python %, integers only); 1: C fmod.
struct ModF {
  static constexpr Kind kind = Kind::Numeric;
  bool c_fmod;
  explicit ModF(const Op& op) : c_fmod(AttrReader(op).i("fmod") != 0) {}
  template <class T> T f(const T* x, int) const {
    if constexpr (std::is_integral_v<T>) {
      if (x[1] == 0) return T(0);
      T r = static_cast<T>(x[0] % x[1]);
      if (!c_fmod && r != 0 && ((r < 0) != (x[1] < 0))) r = static_cast<T>(r + x[1]);
      return r;
    } else {
      T r = std::fmod(x[0], x[1]);
      if (!c_fmod && r != T(0) && ((r < T(0)) != (x[1] < T(0)))) r += x[1];
      return r;
    }
  }
};

#define PROBELAB_COMPARE(Name, K, expr)                                        \
  struct Name {                                                                \
    static constexpr Kind kind = K;                                            \
    explicit Name(const Op&) {}                                                \
    template <class T> std::uint8_t f(const T* x, int) const { return (expr) ? 1 : 0; } \
  };
PROBELAB_COMPARE(EqualF, Kind::Compare, x[0] == x[1])
PROBELAB_COMPARE(GreaterF, Kind::Compare, x[0] > x[1])
PROBELAB_COMPARE(GreaterOrEqualF, Kind::Compare, x[0] >= x[1])
PROBELAB_COMPARE(LessF, Kind::Compare, x[0] < x[1])
PROBELAB_COMPARE(LessOrEqualF, Kind::Compare, x[0] <= x[1])
PROBELAB_COMPARE(AndF, Kind::Logic, x[0] && x[1])
PROBELAB_COMPARE(OrF, Kind::Logic, x[0] || x[1])
PROBELAB_COMPARE(XorF, Kind::Logic, (x[0] != 0) != (x[1] != 0))
#undef PROBELAB_COMPARE

template <class P> OpDef binary(std::string type, std::string doc, std::vector<AttrSpec> attrs = {}) {
  return pointwise_def<P>(std::move(type), std::move(doc), {"A", "B"}, 2, 2, std::move(attrs));
}
template <class P> OpDef variadic(std::string type, std::string doc) {
  return pointwise_def<P>(std::move(type), std::move(doc), {"data..."}, 1, -1);
}

// --- Where ---------------------------------------------------------------------------------------

std::vector<TensorDesc> infer_where(const Op& op, Descs in) {
  expect_inputs(op, in, 3, 3);
  if (in[0].dtype != DType::Bool) fail(op, "condition must be a bool tensor, got {}", dtype_name(in[0].dtype));
  expect_same_dtype(op, in[1], in[2], "inputs X and Y");
  return {TensorDesc{in[1].dtype, broadcast_all(op, in), Format::ND}};
}

void where_ref(const Op&, Ins in, Outs out, RefPrecision) {
  const std::size_t es = dtype_size(out[0].dtype());
  auto c = in[0]->data<std::uint8_t>();
  const std::byte* x = in[1]->bytes().data();
  const std::byte* y = in[2]->bytes().data();
  std::byte* dst = out[0].bytes().data();
  for_each_broadcast_n(out[0].shape(), {in[0]->shape(), in[1]->shape(), in[2]->shape()},
                       [&](const std::int64_t* off, std::int64_t k) {
                         const std::byte* src = c[static_cast<std::size_t>(off[0])] ? x + off[1] * es : y + off[2] * es;
                         std::memcpy(dst + k * static_cast<std::int64_t>(es), src, es);
                       });
}

// dX = Where(cond, dY, 0) and dY = Where(cond, 0, dY) through PointwiseGrad of WhereF.
struct WhereF {
  static constexpr Kind kind = Kind::Float;
  explicit WhereF(const Op&) {}
  template <class T> T f(const T* x, int) const { return x[0] ? x[1] : x[2]; }
  template <class T> T d(int i, const T* x, int, T) const {
    if (i == 1) return x[0] ? T(1) : T(0);
    return x[0] ? T(0) : T(1);
  }
};

}  // namespace

void register_binary_math_ops(OpRegistry& r) {
  r.add(binary<PowF>("Pow", "Z = X ^ Y with broadcasting (the exponent may have another numeric dtype)"));
  r.add(variadic<MaxF>("Max", "elementwise maximum of the inputs, broadcast (NaN propagates; equal maxima share the gradient evenly)"));
  r.add(variadic<MinF>("Min", "elementwise minimum of the inputs, broadcast (NaN propagates; equal minima share the gradient evenly)"));
  r.add(variadic<SumF>("Sum", "elementwise sum of the inputs, broadcast"));
  r.add(variadic<MeanF>("Mean", "elementwise mean of the inputs, broadcast"));
  r.add(binary<ModF>("Mod", "remainder; fmod = 0 takes the divisor's sign (integers), 1 is C fmod (inference only)",
                     {attr_int("fmod", 0, "0: sign of the divisor, 1: sign of the dividend")}));
  r.add(binary<EqualF>("Equal", "C = A == B (bool), broadcast"));
  r.add(binary<GreaterF>("Greater", "C = A > B (bool), broadcast"));
  r.add(binary<GreaterOrEqualF>("GreaterOrEqual", "C = A >= B (bool), broadcast"));
  r.add(binary<LessF>("Less", "C = A < B (bool), broadcast"));
  r.add(binary<LessOrEqualF>("LessOrEqual", "C = A <= B (bool), broadcast"));
  r.add(binary<AndF>("And", "C = A and B (bool), broadcast"));
  r.add(binary<OrF>("Or", "C = A or B (bool), broadcast"));
  r.add(binary<XorF>("Xor", "C = A xor B (bool), broadcast"));

  OpDef where;
  where.type = "Where";
  where.moves_elements = true;
  where.doc = "Y = condition ? X : Y elementwise with broadcasting (any dtype)";
  where.min_inputs = where.max_inputs = 3;
  where.input_names = {"condition", "X", "Y"};
  where.output_names = {"output"};
  where.infer = infer_where;
  where.reference = where_ref;
  where.gradient = detail::pointwise_gradient;
  detail::add_pointwise_grad_kernel("Where", &detail::grad_entry<WhereF>);
  r.add(std::move(where));
}

}  // namespace probelab::graph::ops
