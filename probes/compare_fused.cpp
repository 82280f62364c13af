// Fused-op decomposition (the article's 融合算子逆向工程): golden FP64 chain over Op::fused_body,
// per inner op a comparison against partial dumps or a device-precision emulation.
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "graph/op_registry.h"
#include "probes/anomaly.h"
#include "probes/compare.h"

namespace probelab::probes {

namespace {

graph::Tensor round_to(const graph::Tensor& t, graph::DType dtype) {
  auto v = t.to_f64();
  return graph::Tensor::from_f64(t.shape(), v, dtype);
}

std::vector<const graph::Tensor*> gather(const graph::Op& inner, const std::map<std::string, graph::Tensor>& env) {
  std::vector<const graph::Tensor*> ins;
  for (const auto& name : inner.inputs) {
    if (name.empty()) {
      ins.push_back(nullptr);
      continue;
    }
    auto it = env.find(name);
    if (it == env.end()) throw std::runtime_error(fmt::format("inner op '{}' reads '{}', which is not available", inner.name, name));
    ins.push_back(&it->second);
  }
  return ins;
}

}  // namespace

void decompose_fused(const graph::Op& op, std::span<const graph::Tensor* const> inputs, const graph::Tensor& device_output,
                     const CompareCriteria& c, OpComparison& out, const std::map<std::string, graph::Tensor>* partial) {
  const graph::DType dt = device_output.dtype();
  std::map<std::string, graph::Tensor> golden, device;  // FP64 chain; device-side chain (partials/emulated)
  std::set<std::string> real;  // device-side tensors that hold real device values (not emulated)
  for (std::size_t i = 0; i < op.inputs.size() && i < inputs.size(); ++i) {
    if (op.inputs[i].empty() || !inputs[i]) continue;
    golden[op.inputs[i]] = *inputs[i];
    device[op.inputs[i]] = *inputs[i];
    real.insert(op.inputs[i]);
  }
  out.inner.clear();
  double prev_err = 0;
  double worst_growth = -1;
  std::string worst_growth_op;
  for (const graph::Op& inner : op.fused_body) {
    auto g_ins = gather(inner, golden);
    auto g_out = graph::run_reference(inner, g_ins, graph::RefPrecision::F64);
    auto d_ins = gather(inner, device);
    InnerComparison ic;
    ic.op = inner.name;
    ic.type = inner.type;
    ic.tensor = inner.outputs.empty() ? "" : inner.outputs[0];
    const graph::Tensor* part = nullptr;
    if (partial)
      if (auto it = partial->find(ic.tensor); it != partial->end()) part = &it->second;
    bool inputs_real = true;
    for (const auto& n : inner.inputs)
      if (!n.empty() && !real.count(n)) inputs_real = false;
    // the fused output is the last partial, usable when the last op's inputs are real values
    if (!part && ic.tensor == op.outputs[0] && inputs_real) part = &device_output;
    std::vector<graph::Tensor> d_out;
    if (part) {
      // error this inner op adds: replay it in FP64 on the device's own inputs
      auto local = graph::run_reference(inner, d_ins, graph::RefPrecision::F64);
      ic.basis = ic.tensor == op.outputs[0] && !(partial && partial->count(ic.tensor)) ? "device_output" : "partial_dump";
      ic.metrics = compute_metrics(*part, local[0], dt);
      d_out.push_back(*part);
      real.insert(ic.tensor);
      for (std::size_t k = 1; k < local.size(); ++k) d_out.push_back(round_to(local[k], dt));
    } else {
      // device precision emulation: inputs as the device holds them, FP32 kernel, output rounded
      auto emu = graph::run_reference(inner, d_ins, graph::RefPrecision::F32);
      for (auto& t : emu) d_out.push_back(round_to(t, dt));
      ic.basis = fmt::format("emulated_{}", graph::dtype_name(dt));
      ic.metrics = compute_metrics(d_out[0], g_out[0], dt);
    }
    Verdict v = judge(ic.metrics, dt, c, rounding_noise_floor(d_ins, g_out[0], dt));
    ic.pass = v.pass;
    ic.reasons = v.reasons;
    // growth of the error against the golden chain (for the fallback attribution)
    Metrics vs_golden = compute_metrics(d_out[0], g_out[0], dt);
    double err = vs_golden.max_abs_err;
    double growth = std::isfinite(err) ? err - prev_err : std::numeric_limits<double>::max();
    if (growth > worst_growth) {
      worst_growth = growth;
      worst_growth_op = inner.name;
    }
    prev_err = std::isfinite(err) ? err : prev_err;
    for (std::size_t k = 0; k < inner.outputs.size() && k < g_out.size(); ++k) {
      golden[inner.outputs[k]] = std::move(g_out[k]);
      if (k < d_out.size()) device[inner.outputs[k]] = std::move(d_out[k]);
    }
    if (!ic.pass && out.culprit_inner_op.empty()) {
      out.culprit_inner_op = inner.name;
      out.culprit_basis = ic.basis;
    }
    out.inner.push_back(std::move(ic));
  }
  if (out.culprit_inner_op.empty() && !out.pass && !worst_growth_op.empty()) {
    out.culprit_inner_op = worst_growth_op;
    out.culprit_basis = "largest_error_growth";
  }
}

nlohmann::json to_json(const Metrics& m) {
  auto num = [](double v) { return json_number(v); };
  return {{"count", m.count},
          {"cosine", num(m.cosine)},
          {"max_abs_err", num(m.max_abs_err)},
          {"max_rel_err", num(m.max_rel_err)},
          {"mean_rel_err", num(m.mean_rel_err)},
          {"rmse", num(m.rmse)},
          {"max_ulp", m.max_ulp},
          {"mean_ulp", num(m.mean_ulp)},
          {"within_0_1pct", num(m.within_0_1pct)},
          {"within_0_5pct", num(m.within_0_5pct)},
          {"nonfinite_mismatch", m.nonfinite_mismatch},
          {"worst_element", m.worst_element}};
}

nlohmann::json to_json(const OpComparison& c) {
  nlohmann::json j = {{"op", c.op},          {"op_id", c.op_id},        {"op_type", c.op_type},
                      {"step", c.step},      {"rank", c.rank},          {"output_index", c.output_index},
                      {"tensor", c.tensor},  {"dtype", graph::dtype_name(c.device_dtype)},
                      {"pass", c.pass},      {"reasons", c.reasons},    {"metrics", to_json(c.metrics)}};
  if (!c.skipped.empty()) j["skipped"] = c.skipped;
  if (!c.inner.empty() || !c.culprit_inner_op.empty()) {
    nlohmann::json inner = nlohmann::json::array();
    for (const auto& i : c.inner)
      inner.push_back({{"op", i.op}, {"type", i.type}, {"tensor", i.tensor}, {"basis", i.basis},
                       {"pass", i.pass}, {"reasons", i.reasons}, {"metrics", to_json(i.metrics)}});
    j["inner"] = inner;
    j["culprit_inner_op"] = c.culprit_inner_op;
    j["culprit_basis"] = c.culprit_basis;
  }
  return j;
}

}  // namespace probelab::probes
