#include "probes/value_bound.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/op_registry.h"

namespace probelab::probes {

namespace {

/// The captured minimum of input i when it is > 0 (an operand positive throughout), else nullopt.
std::optional<double> positive_min(std::span<const std::optional<Magnitude>> in, std::size_t i) {
  if (i >= in.size() || !in[i] || !(in[i]->min > 0)) return std::nullopt;
  return in[i]->min;
}

/// An optimizer's learning rate as the host may scale it at run time (a dynamic loss scaler
/// divides it by its scale): by at most lr_factor when known, else taken as at least 1.
double host_lr(double lr, double lr_factor) { return lr_factor > 0 ? lr * lr_factor : std::max(1.0, lr); }

/// max |dF/dX_wrt| of the forward pointwise op of a PointwiseGrad (attribute `of`), for the forward
/// ops where it does not grow with the inputs (Clip, the piecewise-linear and saturating
/// activations, selections and sums); PRelu from the magnitude of its other input. Its inputs are
/// dY, Y, X0, X1, ...
std::optional<double> pointwise_derivative_bound(const graph::Op& op, std::span<const std::optional<Magnitude>> in) {
  const std::string of = op.attr_str("of", "");
  const std::int64_t wrt = op.attr_int("wrt", 0);
  static const std::set<std::string> kUnit = {"Clip", "Celu",  "ThresholdedRelu", "Shrink",   "Max",  "Min",
                                              "Sum",  "Mean",  "Abs",             "Neg",      "Sin",  "Cos",
                                              "Atan", "Where", "Softsign",        "Softplus", "Tanh", "Sigmoid"};
  if (kUnit.count(of)) return 1.0;
  if (of == "Erf") return 1.1283791670955126;  // 2 / sqrt(pi)
  if (of == "HardSwish") return 1.5;           // x / 3 + 1/2 on [-3, 3]
  if (of == "HardSigmoid") return std::fabs(op.attr_float("alpha", 0.2));
  if (of == "LeakyRelu") return std::max(1.0, std::fabs(op.attr_float("alpha", 0.01)));
  if (of == "Elu") return std::max(1.0, std::fabs(op.attr_float("alpha", 1.0)));
  if (of == "Selu")
    return std::fabs(op.attr_float("gamma", 1.05070102214813232421875)) *
           std::max(1.0, std::fabs(op.attr_float("alpha", 1.67326319217681884765625)));
  // The decomposed normalizations' square roots and reciprocals, of operands whose captured
  // minimum is > 0 (var + eps, the root of it): inputs {dY, Y, x0}.
  if (of == "Sqrt") {  // 1 / (2 sqrt(x))
    const auto lo = positive_min(in, 2);
    if (!lo) return std::nullopt;
    return 0.5 / std::sqrt(*lo);
  }
  if (of == "Reciprocal" || of == "Log") {  // 1 / x^2, 1 / x
    const auto lo = positive_min(in, 2);
    if (!lo) return std::nullopt;
    return of == "Log" ? 1.0 / *lo : 1.0 / (*lo * *lo);
  }
  if (of == "PRelu") {  // dX = slope (x < 0) or 1; dSlope = x (x < 0)
    const std::size_t other = wrt == 0 ? 3 : 2;
    if (other >= in.size() || !in[other]) return std::nullopt;
    return wrt == 0 ? std::max(1.0, in[other]->max_abs) : in[other]->max_abs;
  }
  return std::nullopt;
}

// The products each output element of an Einsum sums: the sizes of the labels its output lacks
// (an implicit output holds the labels used once). nullopt for "..." (broadcast dimensions) or
// terms that do not fit the shapes.
std::optional<double> einsum_summed_terms(const std::string& equation, const std::vector<const graph::Shape*>& shapes) {
  if (equation.find("...") != std::string::npos) return std::nullopt;
  const auto arrow = equation.find("->");
  std::map<char, std::int64_t> size;
  std::map<char, int> uses;
  std::size_t term = 0, dim = 0;
  for (const char c : equation.substr(0, arrow)) {
    if (c == ',') {
      if (term >= shapes.size() || dim != shapes[term]->size()) return std::nullopt;
      ++term, dim = 0;
    } else if (std::isalpha(static_cast<unsigned char>(c))) {
      if (term >= shapes.size() || dim >= shapes[term]->size()) return std::nullopt;
      const std::int64_t s = (*shapes[term])[dim++];
      if (!size.emplace(c, s).second && size[c] != s) return std::nullopt;
      ++uses[c];
    }
  }
  if (term + 1 != shapes.size() || dim != shapes[term]->size()) return std::nullopt;
  std::string out;
  if (arrow != std::string::npos) {
    out = equation.substr(arrow + 2);
  } else {
    for (const auto& [c, n] : uses)
      if (n == 1) out += c;
  }
  double k = 1;
  for (const auto& [c, s] : size)
    if (out.find(c) == std::string::npos) k *= static_cast<double>(s);
  return k;
}

// The length of dimension `axis` of `shape` (negative: from the end); nullopt when out of range.
std::optional<double> axis_length(const graph::Shape& shape, std::int64_t axis) {
  const auto rank = static_cast<std::int64_t>(shape.size());
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  return static_cast<double>(shape[static_cast<std::size_t>(axis)]);
}

}  // namespace

std::optional<double> dot_length(const graph::Graph& g, const graph::Op& op) {
  auto shape = [&](std::size_t i) -> const graph::Shape* {
    if (i >= op.inputs.size() || op.inputs[i].empty()) return nullptr;
    const graph::TensorInfo* t = g.find_tensor(op.inputs[i]);
    return t ? &t->desc.shape : nullptr;
  };
  const graph::Shape* a = shape(0);
  const graph::Shape* w = shape(1);
  if (op.type == "Conv" && w && w->size() >= 3) {  // W [M, C / group, k...]
    double k = 1;
    for (std::size_t i = 1; i < w->size(); ++i) k *= static_cast<double>((*w)[i]);
    return k;
  }
  if (op.type == "Einsum") {  // the products each output element sums
    std::vector<const graph::Shape*> shapes;
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      shapes.push_back(shape(i));
      if (!shapes.back()) return std::nullopt;
    }
    return einsum_summed_terms(op.attr_str("equation"), shapes);
  }
  if (op.type == "GatherNDGrad" && w && !w->empty()) {  // index tuples per batch: each can add to one slice
    const auto batch = static_cast<std::size_t>(std::max<std::int64_t>(op.attr_int("batch_dims", 0), 0));
    double k = 1;
    for (std::size_t i = batch; i + 1 < w->size(); ++i) k *= static_cast<double>((*w)[i]);
    return k;
  }
  if (op.type == "GatherElementsGrad" && w) return axis_length(*w, op.attr_int("axis", 0));  // indices along the axis
  if (op.type == "SoftmaxGrad" && a) return axis_length(*a, op.attr_int("axis", -1));      // a row's length
  if (op.type == "MatMul" && a && !a->empty()) return static_cast<double>(a->back());
  if (op.type == "Gemm" && a && a->size() == 2) return static_cast<double>((*a)[op.attr_int("transA", 0) != 0 ? 0 : 1]);
  return std::nullopt;
}

std::optional<double> value_bound(const graph::Op& op, std::uint16_t slot, std::span<const std::optional<Magnitude>> in,
                                  std::optional<double> dot_len, double lr_factor) {
  const graph::OpDef* def = graph::OpRegistry::instance().find(op.type);
  const std::string& t = def ? def->type : op.type;  // canonical (BatchNorm -> BatchNormalization)
  auto mx = [&](std::size_t i) -> std::optional<double> {
    if (i >= in.size() || !in[i]) return std::nullopt;
    return in[i]->max_abs;
  };
  auto opt_mx = [&](std::size_t i) -> std::optional<double> {  // an optional input: 0 when omitted
    if (i >= op.inputs.size() || op.inputs[i].empty()) return 0.0;
    return mx(i);
  };
  auto all_mx = [&](double& sum, double& top) {
    sum = top = 0;
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      if (op.inputs[i].empty()) continue;
      const auto m = mx(i);
      if (!m) return false;
      sum += *m;
      top = std::max(top, *m);
    }
    return !op.inputs.empty();
  };
  static const std::set<std::string> kSelect = {
      "Relu", "Identity", "Reshape", "Flatten", "Transpose", "Expand", "Squeeze", "Unsqueeze", "Concat",
      "Slice", "Split", "MaxPool", "AveragePool", "GlobalAveragePool", "ReduceMax", "ReduceMin", "ReduceMean",
      "Neg", "Abs", "Max", "Min", "Mean", "Tanh", "Gelu", "Cast"};
  double sum = 0, top = 0;
  if (kSelect.count(t)) {
    if (!all_mx(sum, top)) return std::nullopt;
    return top;
  }
  if (t == "Softmax" || t == "Sigmoid" || t == "HardSigmoid" || t == "Erf" || t == "Sin" || t == "Cos" ||
      t == "Softsign")
    return 1.0;
  if (t == "Clip") {
    // the input, or a bound it was clamped to (an input, or an attribute before opset 11)
    double hi = 0;
    for (std::size_t i = 0; i < 3; ++i) {
      const auto m = i == 0 ? mx(0) : opt_mx(i);
      if (!m) return std::nullopt;
      hi = std::max(hi, *m);
    }
    for (const char* a : {"min", "max"})
      if (const double v = std::fabs(op.attr_float(a, 0.0)); std::isfinite(v)) hi = std::max(hi, v);
    return hi;
  }
  if (t == "HardSwish" || t == "ThresholdedRelu" || t == "Shrink") {  // |x| times a factor in [0, 1]; Shrink - bias
    const auto x = mx(0);
    if (!x) return std::nullopt;
    return *x + (t == "Shrink" ? std::fabs(op.attr_float("bias", 0.0)) : 0.0);
  }
  if (t == "Elu" || t == "Celu" || t == "Selu") {  // x, or alpha (e^x - 1) in (-alpha, 0]; Selu times gamma
    const auto x = mx(0);
    if (!x) return std::nullopt;
    const double alpha = std::fabs(op.attr_float("alpha", t == "Selu" ? 1.67326319217681884765625 : 1.0));
    return std::max(*x, alpha) * (t == "Selu" ? std::fabs(op.attr_float("gamma", 1.05070102214813232421875)) : 1.0);
  }
  if (t == "PRelu") {
    const auto x = mx(0), slope = mx(1);
    if (!x || !slope) return std::nullopt;
    return *x * std::max(1.0, *slope);
  }
  // Decomposed normalizations and activations as exporters write them (LayerNorm: Pow, ReduceMean,
  // Sqrt, Div; tanh-GELU: Pow 3): powers with non-negative exponents, roots, and quotients and
  // logarithms of operands that are positive throughout (their captured minimum > 0).
  if (t == "Pow") {  // exponents in (0, p]: |x|^e <= max(1, |x|)^p (an unknown minimum reads 0: no bound)
    const auto x = mx(0);
    if (!x || !positive_min(in, 1)) return std::nullopt;
    return std::pow(std::max(1.0, *x), in[1]->max_abs);
  }
  if (t == "Sqrt") {
    const auto x = mx(0);
    if (!x) return std::nullopt;
    return std::sqrt(*x);
  }
  if (t == "Exp") {
    const auto x = mx(0);
    if (!x) return std::nullopt;
    return std::exp(*x);
  }
  if (t == "Div" || t == "Reciprocal") {
    const auto a = t == "Div" ? mx(0) : std::optional<double>(1.0);
    const auto b = positive_min(in, t == "Div" ? 1 : 0);
    if (!a || !b) return std::nullopt;
    return *a / *b;
  }
  if (t == "Log") {
    const auto lo = positive_min(in, 0), x = mx(0);
    if (!lo || !x) return std::nullopt;
    return std::max(std::fabs(std::log(*lo)), std::fabs(std::log(*x)));
  }
  if (t == "SliceGrad") {  // dY scattered into zeros: each element of dX receives at most one of dY
    const auto dy = mx(0);
    if (!dy) return std::nullopt;
    return *dy;
  }
  if (t == "Where") {  // selects X or Y
    const auto a = mx(1), b = mx(2);
    if (!a || !b) return std::nullopt;
    return std::max(*a, *b);
  }
  if (t == "PointwiseGrad") {
    // dY times the forward op's derivative, where that is bounded whatever the inputs
    const auto dy = mx(0), factor = pointwise_derivative_bound(op, in);
    if (!dy || !factor) return std::nullopt;
    return *dy * *factor;
  }
  if (t == "Gather" || t == "GatherElements") return mx(0);  // data; the indices select
  if (t == "ReluGrad" || t == "MaxPoolGrad" || t == "GeluGrad") {
    const auto dy = mx(0);
    if (!dy) return std::nullopt;
    if (t == "GeluGrad") return 1.13 * *dy;  // max Gelu'(x) = 1.129
    if (t == "MaxPoolGrad") return std::nullopt;  // overlapping windows add up
    return *dy;
  }
  if (t == "TanhGrad" || t == "SigmoidGrad") {  // dY (1 - Y^2), dY Y (1 - Y): Y in [-1, 1] or [0, 1] unless corrupted
    const auto dy = mx(0), y = mx(1);
    if (!dy || !y) return std::nullopt;
    return *dy * (t == "TanhGrad" ? std::max(1.0, *y * *y) : std::max(0.25, *y * (1 + *y)));
  }
  if (t == "LeakyRelu") {
    const auto x = mx(0);
    if (!x) return std::nullopt;
    return *x * std::max(1.0, std::fabs(op.attr_float("alpha", 0.01)));
  }
  if (t == "Add" || t == "Sub" || t == "Sum") {
    if (!all_mx(sum, top)) return std::nullopt;
    return sum;
  }
  if (t == "Scale") {
    const auto x = mx(0);
    if (!x) return std::nullopt;
    return std::fabs(op.attr_float("alpha", 1.0)) * *x;
  }
  if (t == "Mul") {
    const auto a = mx(0), b = mx(1);
    if (!a || !b) return std::nullopt;
    return *a * *b;
  }
  static const std::set<std::string> kDot = {"MatMul",        "Gemm",        "Conv",        "ConvTranspose",
                                             "ConvGradInput", "ConvGradWeight", "MatMulGradA", "MatMulGradB",
                                             "FusedMatMulBiasGelu"};
  if (kDot.count(t)) {
    // every result element is (a sum of) dot products of parts of the two operands:
    // |sum a_k b_k| <= l2(a) l2(b) (Cauchy-Schwarz), plus the bias
    if (in.size() < 2 || !in[0] || !in[1]) return std::nullopt;
    double alpha = 1, beta = 1;
    if (t == "Gemm") {
      alpha = std::fabs(op.attr_float("alpha", 1.0));
      beta = std::fabs(op.attr_float("beta", 1.0));
    }
    const auto bias = opt_mx(2);
    if (!bias) return std::nullopt;
    double dot = in[0]->l2 * in[1]->l2;
    if (dot_len && (t == "Conv" || t == "MatMul" || t == "Gemm")) {
      // a dot product of k terms, each operand's part within its l2 and every term within
      // max|a| max|b|: |sum a_i b_i| <= max|a| l1(b part) <= max|a| sqrt(k) l2(b), and the same
      // with a and b exchanged; partial sums too
      const double k = *dot_len, rk = std::sqrt(k);
      dot = std::min({dot, k * in[0]->max_abs * in[1]->max_abs, rk * in[0]->max_abs * in[1]->l2,
                      rk * in[1]->max_abs * in[0]->l2});
    }
    return alpha * dot + beta * *bias;
  }
  if (t == "SoftmaxGrad" && slot == 0 && in.size() > 1 && in[0] && in[1]) {
    // over a row of n: dX = Y (dY - sum dY Y), |sum dY Y| <= min(n max|dY| max|Y|, l2(dY) l2(Y)),
    // whatever Y holds (LogSoftmaxGrad's exp(Y) would need Y's maximum, not its magnitude)
    const double dy = in[0]->max_abs, y = in[1]->max_abs;
    const double dot = dot_len ? std::min(*dot_len * dy * y, in[0]->l2 * in[1]->l2) : in[0]->l2 * in[1]->l2;
    return y * (dy + dot);
  }
  if ((t == "GatherNDGrad" || t == "GatherElementsGrad") && slot == 0 && dot_len) {
    // a scatter-add: an element of dData sums at most dot_len values of dY (one per index)
    const auto dy = mx(0);
    if (!dy) return std::nullopt;
    return *dot_len * *dy;
  }
  if (t == "Einsum" && dot_len) {
    // each output element sums dot_len products of one element of every operand
    double product = *dot_len;
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      const auto m = mx(i);
      if (!m) return std::nullopt;
      product *= *m;
    }
    return op.inputs.empty() ? std::nullopt : std::optional<double>(product);
  }
  if (t == "SumToShape") {  // a sum of at most count elements: <= sqrt(count) l2
    if (in.empty() || !in[0]) return std::nullopt;
    return std::sqrt(static_cast<double>(in[0]->count)) * in[0]->l2;
  }
  const bool batch_stats = op.attr_int("training_mode", 0) == 1;
  if (t == "BatchNormalization" && !batch_stats) {
    // running statistics: |(x - mean) / sqrt(var + eps)| <= (|x| + |mean|) / sqrt(min var + eps),
    // the captured minimum as it is: a variance written below zero makes rstd larger than
    // 1 / sqrt(eps), and at or below -eps unbounded (no bound)
    const auto x = mx(0), scale = mx(1), bias = mx(2), mean = mx(3);
    if (slot != 0 || !x || !scale || !bias || !mean || in.size() < 5 || !in[4]) return std::nullopt;
    const double floor = in[4]->min + std::fabs(op.attr_float("epsilon", 1e-5));
    if (!(floor > 0)) return std::nullopt;
    return *scale * (*x + *mean) / std::sqrt(floor) + *bias;
  }
  const bool ln_grad = t == "LayerNormalizationGrad";  // a row's own statistics, as batch ones
  if ((t == "BatchNormalizationGrad" || ln_grad) && slot == 0) {
    // dX = scale rstd (dY - mean(dY) - xhat mean(dY xhat)) with batch statistics (a channel's
    // xhat^2 sum to at most its count n, so |xhat mean(dY xhat)| <= l2(dY)), scale rstd dY with
    // running ones; rstd = 1 / sqrt(var + epsilon) <= 1 / sqrt(epsilon) for batch variances
    // (>= 0), 1 / sqrt(min input_var + epsilon) for running ones whose captured minimum is > 0
    // (an unknown minimum reads 0: no bound). LayerNormalizationGrad: the same over each row of
    // the normalised dims, with (dY scale) for dY
    const auto dy = mx(0), scale = mx(2);
    if (!dy || !scale) return std::nullopt;
    const bool batch = ln_grad || op.attr_int("training_mode", 0) != 0;  // as the kernel reads it
    double floor = std::fabs(op.attr_float("epsilon", 1e-5));
    if (!batch) {
      if (in.size() < 5 || !in[4] || !(in[4]->min > 0)) return std::nullopt;
      floor += in[4]->min;
    }
    if (!(floor > 0)) return std::nullopt;
    return *scale / std::sqrt(floor) * (batch ? 2 * *dy + in[0]->l2 : *dy);
  }
  if ((t == "BatchNormalizationGrad" || ln_grad) && slot > 0 && in.size() > 1 && in[0] && in[1]) {
    // dB sums dY over a channel: <= sqrt(n) l2(dY), n = X's count. dScale sums dY xhat: with batch
    // statistics |xhat| <= sqrt(n), so <= l2(dY) sqrt(n) (LayerNormalizationGrad: over the rows,
    // the xhat^2 of all rows summing to at most n); with running ones |xhat| <= (max|x| +
    // max|mean|) / sqrt(min input_var + epsilon) for a captured minimum > 0, so <= sqrt(n) l2(dY)
    // max|xhat|
    const double sums = std::sqrt(static_cast<double>(in[1]->count)) * in[0]->l2;
    if (ln_grad || batch_stats || slot == 2) return sums;
    const auto mean = mx(3);
    if (!mean || in.size() < 5 || !in[4] || !(in[4]->min > 0)) return std::nullopt;
    return sums * (in[1]->max_abs + *mean) / std::sqrt(std::fabs(op.attr_float("epsilon", 1e-5)) + in[4]->min);
  }
  if ((t == "BatchNormalization" && batch_stats) || t == "LayerNormalization" || t == "InstanceNormalization") {
    // batch statistics: |(x - mean) / std| <= sqrt(n - 1) over the n normalised values
    if (slot != 0 || in.empty() || !in[0]) return std::nullopt;
    const auto scale = mx(1);
    const auto bias = opt_mx(2);
    if (!scale || !bias) return std::nullopt;
    return *scale * std::sqrt(static_cast<double>(in[0]->count)) + *bias;
  }
  if (t == "SoftmaxCrossEntropyLoss" && (op.inputs.size() < 3 || op.inputs[2].empty())) {
    // -log_softmax(x)[label] = logsumexp(x) - x[label] in [0, 2 max |x| + log C], C <= count;
    // log_prob likewise; the mean of such terms too, their sum at most count of them (unweighted)
    if (in.empty() || !in[0] || in[0]->count == 0) return std::nullopt;
    const double n = static_cast<double>(in[0]->count);
    const double term = 2 * in[0]->max_abs + std::log(n);
    return slot == 0 && op.attr_str("reduction", "mean") == "sum" ? n * term : term;
  }
  if (t == "SoftmaxCrossEntropyLossGrad" || t == "MSELossGrad") {
    // upstream * weight * (softmax - onehot), |softmax - onehot| <= 1; 2 (p - t) * upstream. The
    // upstream is dLoss, divided by the weight sum (mean with class weights: unknown, no bound)
    // or the count (mean, at least 1)
    const bool mean_weighted = op.attr_str("reduction", "mean") == "mean" && op.inputs.size() > 3 &&
                               !op.inputs[3].empty();
    const auto dl = mx(0);
    if (slot != 0 || !dl || mean_weighted) return std::nullopt;
    if (t == "MSELossGrad") {
      const auto p = mx(1), target = mx(2);
      if (!p || !target) return std::nullopt;
      return 2 * (*p + *target) * *dl;
    }
    const auto w = opt_mx(3);
    if (!w) return std::nullopt;
    return *dl * (op.inputs.size() > 3 && !op.inputs[3].empty() ? *w : 1.0);
  }
  if (t == "SgdUpdate") {
    // v' = momentum v + grad + wd p; p' = p - lr v'
    const auto p = mx(0), g = mx(1), v = opt_mx(2);
    if (!p || !g || !v) return std::nullopt;
    const double lr = std::fabs(op.attr_float("lr", 0.01)), mom = std::fabs(op.attr_float("momentum", 0.0)),
                 wd = std::fabs(op.attr_float("weight_decay", 0.0));
    const double step = mom * *v + *g + wd * *p;
    return *p + host_lr(lr, lr_factor) * step;
  }
  if (t == "AdamUpdate") {
    // g' = g + wd p; m' = b1 m + (1 - b1) g'; v' = b2 v + (1 - b2) g'^2; p' = p - lr (m' / c1) /
    // (sqrt(v' / c2) + eps) with c1 = 1 - b1^step >= 1 - b1: the denominator is at least eps
    // whatever v holds, so |p'| <= |p| + lr |m'| / ((1 - b1) eps) - weak (1e4 for a gradient of
    // 0.1 at lr 1e-3), but it holds for any state read, and a corrupted master weight written
    // as 1e38 is far beyond it. The learning rate as for SgdUpdate.
    const auto p = mx(0), g = mx(1), m = mx(2), v = mx(3);
    const double b1 = op.attr_float("beta1", 0.9), b2 = op.attr_float("beta2", 0.999),
                 eps = op.attr_float("eps", 1e-8), wd = std::fabs(op.attr_float("weight_decay", 0.0)),
                 lr = std::fabs(op.attr_float("lr", 1e-3));
    if (!p || !g || !(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1) || !(eps > 0)) return std::nullopt;
    const double gw = *g + wd * *p;
    if (slot == 2) {
      if (!v) return std::nullopt;
      return b2 * *v + (1 - b2) * gw * gw;
    }
    if (!m) return std::nullopt;
    const double m1 = b1 * *m + (1 - b1) * gw;
    if (slot == 1) return m1;
    return *p + host_lr(lr, lr_factor) * m1 / ((1 - b1) * eps);
  }
  return std::nullopt;
}

}  // namespace probelab::probes
