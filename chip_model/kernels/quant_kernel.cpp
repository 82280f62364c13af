// Quantized Cube ops (quant_kernel.h).
#include "chip_model/kernels/quant_kernel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <variant>
#include <vector>

#include "chip_model/spec/quant_args.h"
#include "graph/ops/op_util.h"

namespace probelab::chip::kernels {
namespace {

using graph::Shape;
using graph::Tensor;

struct OperandQuant {
  bool on = false;
  num::QuantFormat format = num::QuantFormat::Int8;
  bool per_channel = false, symmetric = true;
  double fixed_scale = 0.0;
  bool delayed = false;
  std::int64_t history = 0;
  num::AmaxAlgorithm algorithm = num::AmaxAlgorithm::Max;
  std::int64_t margin = 0;
  std::uint64_t meta = 0;
};

std::string label(const KernelCall& c) { return fmt::format("{} '{}'", c.op.type, c.op.name); }

std::int64_t int_attr(const KernelCall& c, const char* key, std::int64_t dflt) {
  auto it = c.args.attrs.find(key);
  if (it == c.args.attrs.end()) return dflt;
  if (!std::holds_alternative<std::int64_t>(it->second))
    throw std::runtime_error(fmt::format("{}: attribute {} must be an integer", label(c), key));
  return std::get<std::int64_t>(it->second);
}

std::string str_attr(const KernelCall& c, const char* key, const char* dflt) {
  auto it = c.args.attrs.find(key);
  if (it == c.args.attrs.end()) return dflt;
  if (!std::holds_alternative<std::string>(it->second))
    throw std::runtime_error(fmt::format("{}: attribute {} must be a string", label(c), key));
  return std::get<std::string>(it->second);
}

OperandQuant operand_quant(const KernelCall& c, const char* fmt_key, const char* sym_key, const char* pc_key) {
  OperandQuant q;
  auto it = c.args.attrs.find(fmt_key);
  if (it == c.args.attrs.end()) return q;
  if (!std::holds_alternative<std::string>(it->second))
    throw std::runtime_error(fmt::format("{}: attribute {} must be a string", label(c), fmt_key));
  try {
    q.format = num::parse_quant_format(std::get<std::string>(it->second));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(fmt::format("{}: {}: {}", label(c), fmt_key, e.what()));
  }
  q.on = true;
  q.symmetric = int_attr(c, sym_key, 1) != 0;
  q.per_channel = pc_key && int_attr(c, pc_key, 0) != 0;
  if (!q.symmetric && num::is_fp8(q.format))
    throw std::runtime_error(fmt::format("{}: {} quantization is symmetric only", label(c), num::quant_format_name(q.format)));
  const std::string p = fmt_key;
  const std::string scaling = str_attr(c, (p + spec::kQuantScalingSuffix).c_str(), "current");
  if (scaling != "current" && scaling != "delayed")
    throw std::runtime_error(fmt::format("{}: {}{} must be current or delayed, not '{}'", label(c), p,
                                         spec::kQuantScalingSuffix, scaling));
  if (scaling == "delayed") {
    q.delayed = true;
    q.history = int_attr(c, (p + spec::kQuantHistorySuffix).c_str(), 0);
    q.margin = int_attr(c, (p + spec::kQuantMarginSuffix).c_str(), 0);
    q.meta = static_cast<std::uint64_t>(int_attr(c, (p + spec::kQuantMetaSuffix).c_str(), 0));
    try {
      q.algorithm = num::parse_amax_algorithm(str_attr(c, (p + spec::kQuantAlgorithmSuffix).c_str(), "max"));
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(fmt::format("{}: {}: {}", label(c), p + spec::kQuantAlgorithmSuffix, e.what()));
    }
    if (q.history < 1 || q.margin < 0 || q.margin > 64 || q.meta == 0)
      throw std::runtime_error(fmt::format("{}: delayed scaling of {} needs amax_history >= 1, margin in [0, 64] and "
                                           "its state buffer ({}{})",
                                           label(c), p, p, spec::kQuantMetaSuffix));
    if (q.per_channel || !q.symmetric)
      throw std::runtime_error(fmt::format("{}: delayed scaling of {} is per tensor and symmetric", label(c), p));
  }
  return q;
}

// Channel layout of a row-major tensor along `axis`: channels = dim, inner = product after it.
struct Channels {
  std::int64_t count = 1, inner = 1;
};
Channels channels_of(const Shape& s, std::size_t axis) {
  Channels ch;
  ch.count = s.at(axis);
  ch.inner = graph::ops::prod(s, axis + 1, s.size());
  return ch;
}

// The delayed-scaling state of an operand from the op's quantization context.
std::vector<float>& delayed_state(const KernelCall& c, const OperandQuant& q) {
  if (!c.quant || !c.quant->meta.count(q.meta))
    throw std::runtime_error(fmt::format("{}: delayed scaling state at 0x{:x} was not loaded", label(c), q.meta));
  std::vector<float>& m = c.quant->meta.at(q.meta);
  if (m.size() != static_cast<std::size_t>(q.history) + 1)
    throw std::runtime_error(fmt::format("{}: delayed scaling state holds {} values, amax_history {} needs {}", label(c),
                                         m.size(), q.history, q.history + 1));
  return m;
}

Tensor quantize_tensor(const KernelCall& c, const Tensor& t, const OperandQuant& q, Channels ch,
                       std::vector<num::QuantParams>& params, QuantOperandRecord& rec) {
  std::vector<float> v = t.to_f32();
  rec.on = true;
  rec.format = q.format;
  rec.delayed = q.delayed;
  num::QuantStats& stats = rec.stats;
  if (q.delayed) {
    std::vector<float>& m = delayed_state(c, q);
    num::DelayedScalingState st{m[0], std::vector<float>(m.begin() + 1, m.end())};
    params.assign(1, num::delayed_params(q.format, st));
    stats = num::quantize_span(v, params, 1);
    num::delayed_update(q.format, st, static_cast<float>(stats.amax), q.algorithm, static_cast<int>(q.margin));
    m[0] = st.multiplier;
    std::copy(st.history.begin(), st.history.end(), m.begin() + 1);
    rec.scale = params[0].scale;
    rec.next_scale = num::delayed_params(q.format, st).scale;
    return Tensor::from_f32(t.shape(), v, t.dtype());
  }
  if (q.fixed_scale > 0.0) {
    params.assign(1, num::params_with_scale(q.format, static_cast<float>(q.fixed_scale)));
    ch = {};
  } else {
    params = num::choose_params(v, q.format, q.symmetric, ch.count, ch.inner);
  }
  stats = num::quantize_span(v, params, ch.inner);
  for (const auto& p : params) rec.scale = std::max(rec.scale, p.scale);
  return Tensor::from_f32(t.shape(), v, t.dtype());
}

// amax of each channel of a row-major tensor (channel of element i: (i / inner) % count).
std::vector<float> channel_amax(const Tensor& t, Channels ch) {
  std::vector<float> out(static_cast<std::size_t>(ch.count), 0.0f);
  const std::vector<float> v = t.to_f32();
  for (std::size_t i = 0; i < v.size(); ++i)
    if (std::isfinite(v[i])) {
      float& a = out[static_cast<std::size_t>((static_cast<std::int64_t>(i) / ch.inner) % ch.count)];
      a = std::max(a, std::fabs(v[i]));
    }
  return out;
}

}  // namespace

bool is_quantized(const spec::OpAttrs& attrs) {
  return attrs.count(spec::kQuantWeights) != 0 || attrs.count(spec::kQuantActivations) != 0;
}

Computed compute_quantized(const Kernel& k, const KernelCall& c, QuantOpRecord* record) {
  const std::string& type = c.op.type;
  if (type != "Conv" && type != "MatMul" && type != "Gemm")
    throw std::runtime_error(fmt::format("{}: quantization applies to MatMul, Gemm and Conv only", label(c)));
  if (c.inputs.size() < 2 || !c.inputs[0] || !c.inputs[1])
    throw std::runtime_error(fmt::format("{}: a quantized op needs both operands", label(c)));
  OperandQuant qa = operand_quant(c, spec::kQuantActivations, spec::kQuantActivationsSymmetric, nullptr);
  if (auto it = c.args.attrs.find(spec::kQuantActivationsScale); it != c.args.attrs.end()) {
    if (!std::holds_alternative<double>(it->second) || !(std::get<double>(it->second) > 0.0))
      throw std::runtime_error(fmt::format("{}: {} must be a positive number", label(c), spec::kQuantActivationsScale));
    qa.fixed_scale = std::get<double>(it->second);
    if (qa.delayed)
      throw std::runtime_error(fmt::format("{}: a fixed activation scale and delayed scaling exclude each other", label(c)));
  }
  const OperandQuant qw = operand_quant(c, spec::kQuantWeights, spec::kQuantWeightsSymmetric, spec::kQuantWeightsPerChannel);

  const Tensor& x = *c.inputs[0];
  const Tensor& w = *c.inputs[1];
  const graph::ops::AttrReader at(c.op);
  std::size_t w_axis = 0;
  if (type == "MatMul") w_axis = w.shape().empty() ? 0 : w.shape().size() - 1;
  if (type == "Gemm") w_axis = at.i("transB") != 0 ? 0 : 1;
  if (w.shape().empty()) throw std::runtime_error(fmt::format("{}: weights must have rank >= 1", label(c)));

  QuantOpRecord rec;
  rec.op = c.args.op_name;
  rec.activations.slot = 0;
  rec.weights.slot = 1;
  std::vector<num::QuantParams> pa{num::QuantParams{}}, pw{num::QuantParams{}};
  Tensor xq, wq;
  const Tensor* xin = &x;
  const Tensor* win = &w;
  if (qa.on) {
    // Input channels of the activations: Conv X[N, C, ...] axis 1; MatMul the last axis (K);
    // Gemm A[M, K] axis 1, axis 0 with transA.
    std::size_t x_axis = x.shape().empty() ? 0 : x.shape().size() - 1;
    if (type == "Conv") x_axis = 1;
    if (type == "Gemm") x_axis = at.i("transA") != 0 ? 0 : 1;
    if (x_axis < x.shape().size()) rec.activations.channel_amax = channel_amax(x, channels_of(x.shape(), x_axis));
    xq = quantize_tensor(c, x, qa, Channels{}, pa, rec.activations);
    xin = &xq;
  }
  Channels wch = qw.per_channel ? channels_of(w.shape(), w_axis) : Channels{};
  if (qw.on) {
    wq = quantize_tensor(c, w, qw, wch, pw, rec.weights);
    win = &wq;
  }
  if (!qw.on || pw.size() == 1) wch = Channels{};

  // The Cube runs on the offsets without the bias; the bias joins after dequantization.
  std::vector<const Tensor*> ins(c.inputs.begin(), c.inputs.end());
  ins[0] = xin;
  ins[1] = win;
  const Tensor* bias = ins.size() > 2 ? ins[2] : nullptr;
  if (ins.size() > 2) ins[2] = nullptr;
  const KernelCall qc{c.args, c.op, ins, c.outputs, c.mode, c.accum, c.hooks, c.site};
  Computed out = k.compute(qc);

  FloatBuffer& y = out.values.at(0);
  const Shape& ys = c.outputs[0].shape;
  // Output channel of element i: Conv Y[N, M, H, W] axis 1; MatMul / Gemm the last axis.
  Channels ych;
  if (wch.count > 1) ych = type == "Conv" ? channels_of(ys, 1) : channels_of(ys, ys.size() - 1);
  std::vector<float> s(pw.size());
  for (std::size_t j = 0; j < pw.size(); ++j) s[j] = static_cast<float>(static_cast<double>(pa[0].scale) * pw[j].scale);
  for (std::size_t i = 0; i < y.size(); ++i) {
    const std::size_t j = ych.count > 1 ? static_cast<std::size_t>((static_cast<std::int64_t>(i) / ych.inner) % ych.count) : 0;
    y[i] = static_cast<float>(static_cast<double>(y[i]) * s[j]);
  }
  if (bias) {
    const std::vector<float> b = bias->to_f32();
    if (type == "Conv") {
      const Channels m = channels_of(ys, 1);
      for (std::size_t i = 0; i < y.size(); ++i)
        y[i] += b[static_cast<std::size_t>((static_cast<std::int64_t>(i) / m.inner) % m.count)];
    } else {
      const auto beta = static_cast<float>(at.f("beta"));
      graph::ops::for_each_broadcast(ys, bias->shape(), ys,
                                     [&](std::int64_t ib, std::int64_t, std::int64_t o) { y[o] += beta * b[ib]; });
    }
  }
  if (c.quant) c.quant->records.push_back(rec);
  if (record) *record = std::move(rec);
  return out;
}

}  // namespace probelab::chip::kernels
