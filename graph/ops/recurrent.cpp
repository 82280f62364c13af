// RNN, GRU and LSTM (ONNX opset 14): attributes, shape inference and the CPU reference. The cell
// loop is shared with the chip kernel (graph/ops/recurrent.h). Inference only: autodiff names the
// op when a training graph reaches one.
#include "graph/ops/recurrent.h"

#include <algorithm>
#include <cctype>

#include <Eigen/Core>

#include "graph/ops/op_util.h"

namespace probelab::graph::ops {

CellKind cell_kind(const std::string& type) {
  if (type == "RNN") return CellKind::Rnn;
  if (type == "GRU") return CellKind::Gru;
  return CellKind::Lstm;
}

namespace {

// Defaults of the activations' alpha and beta when the attribute lists run out (ONNX's operators).
CellActivation activation(const Op& op, const std::string& name, std::vector<double>& alphas,
                          std::vector<double>& betas) {
  using K = CellActivation::Kind;
  static const std::vector<std::pair<std::string, K>> kKnown = {
      {"Relu", K::Relu},       {"Tanh", K::Tanh},         {"Sigmoid", K::Sigmoid},
      {"Affine", K::Affine},   {"LeakyRelu", K::LeakyRelu}, {"ThresholdedRelu", K::ThresholdedRelu},
      {"ScaledTanh", K::ScaledTanh}, {"HardSigmoid", K::HardSigmoid}, {"Elu", K::Elu},
      {"Softsign", K::Softsign}, {"Softplus", K::Softplus}};
  // Names match ONNX's case-insensitively (exporters write "Tanh" and "tanh").
  const auto same = [](const std::string& a, const std::string& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
             return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
  };
  auto it = std::find_if(kKnown.begin(), kKnown.end(), [&](const auto& k) { return same(k.first, name); });
  if (it == kKnown.end())
    fail(op, "activation '{}' is not one of Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, "
             "HardSigmoid, Elu, Softsign, Softplus", name);
  CellActivation a;
  a.kind = it->second;
  auto take = [](std::vector<double>& v, double def) {
    if (v.empty()) return def;
    const double x = v.front();
    v.erase(v.begin());
    return x;
  };
  switch (a.kind) {
    case K::Affine:
    case K::ScaledTanh: a.alpha = take(alphas, 1.0), a.beta = take(betas, 0.0); break;
    case K::LeakyRelu: a.alpha = take(alphas, 0.01); break;
    case K::ThresholdedRelu:
    case K::Elu: a.alpha = take(alphas, 1.0); break;
    case K::HardSigmoid: a.alpha = take(alphas, 0.2), a.beta = take(betas, 0.5); break;
    default: break;
  }
  return a;
}

}  // namespace

CellSpec cell_spec(const Op& op, const std::vector<Shape>& in) {
  CellSpec s;
  s.kind = cell_kind(op.type);
  s.gates = s.kind == CellKind::Lstm ? 4 : s.kind == CellKind::Gru ? 3 : 1;
  const AttrReader at(op);
  const std::string direction = at.s("direction");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    fail(op, "direction '{}' is not forward, reverse or bidirectional", direction);
  s.dirs = direction == "bidirectional" ? 2 : 1;
  s.reverse_only = direction == "reverse";
  const std::int64_t layout = at.i("layout");
  if (layout != 0 && layout != 1) fail(op, "layout {} is not 0 or 1", layout);
  s.batch_first = layout == 1;
  if (s.kind == CellKind::Lstm) s.input_forget = at.i("input_forget") != 0;
  if (s.kind == CellKind::Gru) s.linear_before_reset = at.i("linear_before_reset") != 0;
  if (op.has_attr("clip")) {
    s.has_clip = true;
    s.clip = op.attr_float("clip");
    if (!(s.clip > 0)) fail(op, "clip {} must be > 0", s.clip);
  }
  if (in.size() < 3) fail(op, "needs X, W and R");
  const Shape &x = in[0], &w = in[1], &r = in[2];
  if (x.size() != 3) fail(op, "X must be 3-D ([seq, batch, input], or [batch, seq, input] with layout 1), got {}", shape_str(x));
  if (w.size() != 3 || r.size() != 3) fail(op, "W and R must be 3-D ([directions, gates*hidden, input|hidden])");
  s.seq = s.batch_first ? x[1] : x[0];
  s.batch = s.batch_first ? x[0] : x[1];
  s.input = x[2];
  if (w[0] != s.dirs || r[0] != s.dirs)
    fail(op, "W and R have {} and {} directions, direction '{}' needs {}", w[0], r[0], direction, s.dirs);
  if (w[1] % s.gates != 0) fail(op, "W's second dimension {} is not {} gates times the hidden size", w[1], s.gates);
  s.hidden = w[1] / s.gates;
  if (op.has_attr("hidden_size") && op.attr_int("hidden_size") != s.hidden)
    fail(op, "hidden_size {} but W holds {} gates of {}", op.attr_int("hidden_size"), s.gates, s.hidden);
  if (w[2] != s.input) fail(op, "W reads {} inputs, X has {}", w[2], s.input);
  if (r[1] != w[1] || r[2] != s.hidden) fail(op, "R is {}, expected [{}, {}, {}]", shape_str(r), s.dirs, w[1], s.hidden);
  const auto expect = [&](std::size_t i, const Shape& want, const char* what) {
    if (i < in.size() && !in[i].empty() && in[i] != want)
      fail(op, "{} is {}, expected {}", what, shape_str(in[i]), shape_str(want));
  };
  const Shape state = s.batch_first ? Shape{s.batch, s.dirs, s.hidden} : Shape{s.dirs, s.batch, s.hidden};
  expect(3, {s.dirs, 2 * s.gate_width()}, "B");
  expect(4, {s.batch}, "sequence_lens");
  expect(5, state, "initial_h");
  if (s.kind == CellKind::Lstm) {
    expect(6, state, "initial_c");
    expect(7, {s.dirs, 3 * s.hidden}, "P");
  }
  // Activations: given per direction, or the defaults.
  std::vector<std::string> names = op.has_attr("activations") ? op.attr_strs("activations") : std::vector<std::string>{};
  const std::size_t per = s.kind == CellKind::Lstm ? 3 : s.kind == CellKind::Gru ? 2 : 1;
  if (names.empty()) {
    const std::vector<std::string> def = s.kind == CellKind::Lstm  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                         : s.kind == CellKind::Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                                   : std::vector<std::string>{"Tanh"};
    for (std::int64_t d = 0; d < s.dirs; ++d) names.insert(names.end(), def.begin(), def.end());
  }
  if (names.size() == per && s.dirs == 2) names.insert(names.end(), names.begin(), names.end());
  if (names.size() != per * static_cast<std::size_t>(s.dirs))
    fail(op, "activations lists {} functions, {} direction(s) need {}", names.size(), s.dirs, per * static_cast<std::size_t>(s.dirs));
  std::vector<double> alphas = op.has_attr("activation_alpha") ? op.attr_floats("activation_alpha") : std::vector<double>{};
  std::vector<double> betas = op.has_attr("activation_beta") ? op.attr_floats("activation_beta") : std::vector<double>{};
  for (const auto& n : names) s.acts.push_back(activation(op, n, alphas, betas));
  return s;
}

namespace {

std::vector<Shape> shapes_of(Descs in) {
  std::vector<Shape> s;
  for (const auto& d : in) s.push_back(d.shape);
  return s;
}

std::vector<TensorDesc> infer_cell(const Op& op, Descs in) {
  const CellKind kind = cell_kind(op.type);
  expect_inputs(op, in, 3, kind == CellKind::Lstm ? 8 : 6);
  expect_outputs(op, 1, kind == CellKind::Lstm ? 3 : 2);
  expect_float(op, in[0], "X");
  for (std::size_t i = 1; i < in.size(); ++i) {
    if (!has_input(op, i)) continue;
    if (i == 4) expect_int(op, in[i], "sequence_lens");
    else expect_same_dtype(op, in[0], in[i], "inputs");
  }
  std::vector<Shape> shapes = shapes_of(in);
  for (std::size_t i = 0; i < shapes.size(); ++i)
    if (!has_input(op, i)) shapes[i].clear();
  const CellSpec s = cell_spec(op, shapes);
  const Shape y = s.batch_first ? Shape{s.batch, s.seq, s.dirs, s.hidden} : Shape{s.seq, s.dirs, s.batch, s.hidden};
  const Shape st = s.batch_first ? Shape{s.batch, s.dirs, s.hidden} : Shape{s.dirs, s.batch, s.hidden};
  std::vector<TensorDesc> out;
  for (std::size_t o = 0; o < op.outputs.size(); ++o) out.push_back(TensorDesc{in[0].dtype, o == 0 ? y : st, Format::ND});
  return out;
}

template <class T>
std::vector<T> values_or_empty(const Tensor* t) {
  if (!t) return {};
  const std::vector<double> v = t->to_f64();
  return {v.begin(), v.end()};
}

/// The reference's products as Eigen GEMMs in T (the vectors outlive the products).
template <class T>
CellProducts<T> reference_products(const CellSpec& s, const std::vector<T>& x, const std::vector<T>& w,
                                   const std::vector<T>& r) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using CMap = Eigen::Map<const Mat>;
  using MMap = Eigen::Map<Mat>;
  CellProducts<T> p;
  const std::int64_t H = s.hidden, I = s.input, GH = s.gate_width(), B = s.batch, S = s.seq;
  const bool batch_first = s.batch_first;
  const T *xp = x.data(), *wp = w.data(), *rp = r.data();
  p.input_proj = [=](std::int64_t dir, std::vector<T>& xw) {
    const CMap wd(wp + dir * GH * I, GH, I);
    if (!batch_first) {
      MMap(xw.data(), S * B, GH).noalias() = CMap(xp, S * B, I) * wd.transpose();
      return;
    }
    for (std::int64_t b = 0; b < B; ++b)  // rows (b, t) of X; xw wants (t, b)
      for (std::int64_t t = 0; t < S; ++t)
        MMap(xw.data() + (t * B + b) * GH, 1, GH).noalias() = CMap(xp + (b * S + t) * I, 1, I) * wd.transpose();
  };
  p.hidden_proj = [=](std::int64_t dir, std::int64_t gate, std::int64_t count, const std::vector<T>& h,
                      std::vector<T>& out) {
    const CMap rd(rp + (dir * GH + gate * H) * H, count * H, H);
    MMap(out.data(), B, count * H).noalias() = CMap(h.data(), B, H) * rd.transpose();
  };
  return p;
}

template <class T>
void cell_ref(const Op& op, Ins in, Outs out) {
  std::vector<Shape> shapes;
  for (const Tensor* t : in) shapes.push_back(t ? t->shape() : Shape{});
  const CellSpec s = cell_spec(op, shapes);
  const std::vector<T> x = values_or_empty<T>(in[0]), w = values_or_empty<T>(in[1]), r = values_or_empty<T>(in[2]);
  const auto opt = [&](std::size_t i) { return i < in.size() ? in[i] : nullptr; };
  CellData<T> d;
  d.bias = values_or_empty<T>(opt(3));
  if (opt(4)) d.seq_lens = read_indices(*opt(4));
  d.initial_h = values_or_empty<T>(opt(5));
  if (s.kind == CellKind::Lstm) {
    d.initial_c = values_or_empty<T>(opt(6));
    d.peephole = values_or_empty<T>(opt(7));
  }
  run_cell(s, reference_products(s, x, w, r), d);
  const std::vector<T>* res[] = {&d.y, &d.y_h, &d.y_c};
  for (std::size_t o = 0; o < out.size(); ++o) {
    auto dst = mdata<T>(out[o]);
    std::copy(res[o]->begin(), res[o]->end(), dst.begin());
  }
}

OpDef cell_def(const std::string& type, const std::string& doc) {
  const CellKind kind = cell_kind(type);
  OpDef d;
  d.type = type;
  d.doc = doc;
  d.min_inputs = 3;
  d.max_inputs = kind == CellKind::Lstm ? 8 : 6;
  d.num_outputs = -1;
  d.min_outputs = 1;
  d.max_outputs = kind == CellKind::Lstm ? 3 : 2;
  d.input_names = {"X", "W", "R", "B?", "sequence_lens?", "initial_h?"};
  if (kind == CellKind::Lstm) d.input_names.insert(d.input_names.end(), {"initial_c?", "P?"});
  d.output_names = {"Y", "Y_h"};
  if (kind == CellKind::Lstm) d.output_names.push_back("Y_c");
  d.attrs = {attr_nodefault("activations", false, "activation functions f, g(, h) per direction (string list)"),
             attr_nodefault("activation_alpha", false, "alpha of the activations that take one, in order (float list)"),
             attr_nodefault("activation_beta", false, "beta of the activations that take one, in order (float list)"),
             attr_nodefault("clip", false, "clip the gates' pre-activations to [-clip, clip]"),
             attr_str("direction", "forward", "forward, reverse or bidirectional"),
             attr_nodefault("hidden_size", false, "hidden size (checked against W)"),
             attr_int("layout", 0, "0: X [seq, batch, input]; 1: batch first")};
  if (kind == CellKind::Lstm) d.attrs.push_back(attr_int("input_forget", 0, "1: couple the forget gate to the input gate (f = 1 - i)"));
  if (kind == CellKind::Gru)
    d.attrs.push_back(attr_int("linear_before_reset", 0, "1: apply the reset gate after the hidden state's product"));
  d.infer = infer_cell;
  d.reference = typed(cell_ref<float>, cell_ref<double>);
  return d;
}

}  // namespace

void register_recurrent_ops(OpRegistry& r) {
  r.add(cell_def("RNN", "Elman recurrent layer: H = f(X W^T + H R^T + Wb + Rb) over the sequence (ONNX RNN; inference only)"));
  r.add(cell_def("GRU", "gated recurrent unit, gates z, r, h (ONNX GRU, linear_before_reset; inference only)"));
  r.add(cell_def("LSTM", "long short-term memory, gates i, o, f, c with optional peepholes (ONNX LSTM; inference only)"));
}

}  // namespace probelab::graph::ops
