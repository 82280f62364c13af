// Quantized Cube ops (quant_kernel.h).
#include "chip_model/kernels/quant_kernel.h"

#include <fmt/format.h>

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
};

std::string label(const KernelCall& c) { return fmt::format("{} '{}'", c.op.type, c.op.name); }

std::int64_t int_attr(const KernelCall& c, const char* key, std::int64_t dflt) {
  auto it = c.args.attrs.find(key);
  if (it == c.args.attrs.end()) return dflt;
  if (!std::holds_alternative<std::int64_t>(it->second))
    throw std::runtime_error(fmt::format("{}: attribute {} must be an integer", label(c), key));
  return std::get<std::int64_t>(it->second);
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

Tensor quantize_tensor(const Tensor& t, const OperandQuant& q, Channels ch, std::vector<num::QuantParams>& params,
                       num::QuantStats& stats) {
  std::vector<float> v = t.to_f32();
  if (q.fixed_scale > 0.0) {
    params.assign(1, num::params_with_scale(q.format, static_cast<float>(q.fixed_scale)));
    ch = {};
  } else {
    params = num::choose_params(v, q.format, q.symmetric, ch.count, ch.inner);
  }
  stats = num::quantize_span(v, params, ch.inner);
  return Tensor::from_f32(t.shape(), v, t.dtype());
}

}  // namespace

bool is_quantized(const spec::OpAttrs& attrs) {
  return attrs.count(spec::kQuantWeights) != 0 || attrs.count(spec::kQuantActivations) != 0;
}

Computed compute_quantized(const Kernel& k, const KernelCall& c, QuantRecord* record) {
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
  }
  const OperandQuant qw = operand_quant(c, spec::kQuantWeights, spec::kQuantWeightsSymmetric, spec::kQuantWeightsPerChannel);

  const Tensor& x = *c.inputs[0];
  const Tensor& w = *c.inputs[1];
  const graph::ops::AttrReader at(c.op);
  std::size_t w_axis = 0;
  if (type == "MatMul") w_axis = w.shape().empty() ? 0 : w.shape().size() - 1;
  if (type == "Gemm") w_axis = at.i("transB") != 0 ? 0 : 1;
  if (w.shape().empty()) throw std::runtime_error(fmt::format("{}: weights must have rank >= 1", label(c)));

  QuantRecord rec;
  std::vector<num::QuantParams> pa{num::QuantParams{}}, pw{num::QuantParams{}};
  Tensor xq, wq;
  const Tensor* xin = &x;
  const Tensor* win = &w;
  if (qa.on) {
    xq = quantize_tensor(x, qa, Channels{}, pa, rec.activations);
    xin = &xq;
    rec.activation_scale = pa[0].scale;
  }
  Channels wch = qw.per_channel ? channels_of(w.shape(), w_axis) : Channels{};
  if (qw.on) {
    wq = quantize_tensor(w, qw, wch, pw, rec.weights);
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

  std::vector<float>& y = out.values.at(0);
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
  if (record) *record = rec;
  return out;
}

}  // namespace probelab::chip::kernels
