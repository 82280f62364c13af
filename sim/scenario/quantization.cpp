// The scenario's `quantization:` section (quantization.h).
#include "sim/scenario/quantization.h"

#include <fmt/format.h>

#include <stdexcept>

#include "chip_model/spec/quant_args.h"

namespace probelab::sim {
namespace {

const char* const kFormats[] = {"int8", "int4", "e4m3", "e5m2"};

OperandQuantSpec parse_operand(const YamlView& v, bool weights) {
  OperandQuantSpec o;
  if (v.is_scalar()) {
    o.format = num::parse_quant_format(v.str_in({kFormats[0], kFormats[1], kFormats[2], kFormats[3]}));
    return o;
  }
  if (weights) v.expect_keys({"format", "per_channel", "symmetric", "scaling", "amax_history", "algorithm", "margin"});
  else v.expect_keys({"format", "symmetric", "scale", "scaling", "amax_history", "algorithm", "margin"});
  o.format = num::parse_quant_format(v["format"].str_in({kFormats[0], kFormats[1], kFormats[2], kFormats[3]}));
  o.symmetric = v.bool_or("symmetric", true);
  if (weights) o.per_channel = v.bool_or("per_channel", false);
  if (!weights && v.get("scale")) {
    o.scale = v["scale"].number();
    if (!(o.scale > 0.0)) v["scale"].fail("a positive scale", v["scale"].describe());
  }
  if (!o.symmetric && num::is_fp8(o.format))
    v["symmetric"].fail(fmt::format("true ({} quantization is symmetric only)", num::quant_format_name(o.format)), "false");
  if (auto sc = v.get("scaling")) o.delayed = sc->str_in({"current", "delayed"}) == "delayed";
  for (const char* k : {"amax_history", "algorithm", "margin"})
    if (!o.delayed && v.get(k)) v[k].fail("scaling: delayed beside it (the key belongs to delayed scaling)", v[k].describe());
  if (o.delayed) {
    if (auto h = v.get("amax_history")) o.history = h->integer(1, 1 << 16);
    if (auto a = v.get("algorithm")) o.algorithm = num::parse_amax_algorithm(a->str_in({"max", "most_recent"}));
    if (auto m = v.get("margin")) o.margin = m->integer(0, 64);
    if (o.per_channel) v["per_channel"].fail("false (delayed scaling keeps one scale per tensor)", "true");
    if (!o.symmetric) v["symmetric"].fail("true (delayed scaling is symmetric)", "false");
    if (o.scale > 0.0) v["scale"].fail("no fixed scale beside scaling: delayed", v["scale"].describe());
  }
  return o;
}

std::vector<std::string> globs(const YamlView& v) {
  std::vector<std::string> out;
  for (const YamlView& g : v.items()) {
    out.push_back(g.str());
    try {
      (void)graph::glob_match(out.back(), "");
    } catch (const std::exception& e) {
      g.fail("a valid glob", fmt::format("'{}' ({})", out.back(), e.what()));
    }
  }
  if (out.empty()) v.fail("a non-empty list of op-name globs", v.describe());
  return out;
}

bool quantizable(const graph::Op& op) { return op.type == "MatMul" || op.type == "Gemm" || op.type == "Conv"; }

bool any_match(const std::vector<std::string>& gs, const std::string& name) {
  for (const auto& g : gs)
    if (graph::glob_match(g, name)) return true;
  return false;
}

template <class F>
void for_each_cube_op(const graph::Graph& g, F&& f) {
  for (const graph::Op& op : g.ops()) {
    if (quantizable(op)) f(op);
    for (const graph::Op& inner : op.fused_body)
      if (quantizable(inner)) f(inner);
  }
}

}  // namespace

QuantizationSpec parse_quantization(const YamlView& v) {
  v.expect_keys({"ops", "keep", "weights", "activations", "search"});
  QuantizationSpec q;
  q.source = v;
  q.ops = globs(v["ops"]);
  if (auto k = v.get("keep")) {
    if (k->size() > 0) q.keep = globs(*k);
  }
  if (auto w = v.get("weights")) q.weights = parse_operand(*w, true);
  if (auto a = v.get("activations")) q.activations = parse_operand(*a, false);
  if (auto s = v.get("search")) {
    s->expect_keys({"target", "expect_keep"});
    if (auto t = s->get("target")) q.search_target = t->str();
    if (auto k = s->get("expect_keep")) {
      q.expect_keep.emplace();
      for (const YamlView& e : k->items()) q.expect_keep->push_back(e.str());
    }
  }
  if (!q.weights && !q.activations) v.fail("at least one of weights, activations", v.describe());
  return q;
}

void add_quant_state(graph::Graph& g, std::map<std::string, spec::OpAttrs>& attrs) {
  for (auto& [op, a] : attrs)
    for (const char* operand : {"activations", "weights"}) {
      const std::string prefix = std::string("quant.") + operand;
      auto sc = a.find(prefix + spec::kQuantScalingSuffix);
      if (sc == a.end() || std::get<std::string>(sc->second) != "delayed") continue;
      const std::int64_t len = std::get<std::int64_t>(a.at(prefix + spec::kQuantHistorySuffix));
      std::vector<float> init(static_cast<std::size_t>(len) + 1, 0.0f);
      init[0] = 1.0f;  // the multiplier before any amax is known (Transformer Engine starts at 1)
      const std::string name = op + "/quant_state/" + operand;
      g.add_initializer(name, graph::Tensor::from_f32({len + 1}, init, graph::DType::F32), graph::TensorKind::Constant);
      a[prefix + spec::kQuantMetaSuffix] = name;
    }
}

std::vector<std::string> quantizable_ops(const QuantizationSpec& q, const graph::Graph& g) {
  std::vector<std::string> out;
  for_each_cube_op(g, [&](const graph::Op& op) {
    if (any_match(q.ops, op.name)) out.push_back(op.name);
  });
  return out;
}

std::map<std::string, spec::OpAttrs> quantization_attrs(const QuantizationSpec& q, const graph::Graph& g) {
  const YamlView& src = *q.source;
  for (std::size_t i = 0; i < q.ops.size(); ++i) {
    bool hit = false;
    for_each_cube_op(g, [&](const graph::Op& op) { hit = hit || graph::glob_match(q.ops[i], op.name); });
    if (!hit) src["ops"].at(i).fail("a glob matching a MatMul, Gemm or Conv op of the model", "'" + q.ops[i] + "'");
  }
  const std::vector<std::string> selected = quantizable_ops(q, g);
  for (std::size_t i = 0; i < q.keep.size(); ++i) {
    bool hit = false;
    for (const auto& n : selected) hit = hit || graph::glob_match(q.keep[i], n);
    if (!hit) src["keep"].at(i).fail("a glob matching an op that `ops` selects", "'" + q.keep[i] + "'");
  }
  std::map<std::string, spec::OpAttrs> out;
  for (const auto& name : selected) {
    if (any_match(q.keep, name)) continue;
    spec::OpAttrs a;
    if (q.weights) {
      a[spec::kQuantWeights] = std::string(num::quant_format_name(q.weights->format));
      a[spec::kQuantWeightsPerChannel] = std::int64_t{q.weights->per_channel ? 1 : 0};
      a[spec::kQuantWeightsSymmetric] = std::int64_t{q.weights->symmetric ? 1 : 0};
    }
    if (q.activations) {
      a[spec::kQuantActivations] = std::string(num::quant_format_name(q.activations->format));
      a[spec::kQuantActivationsSymmetric] = std::int64_t{q.activations->symmetric ? 1 : 0};
      if (q.activations->scale > 0.0) a[spec::kQuantActivationsScale] = q.activations->scale;
    }
    for (const auto& [prefix, o] : {std::pair{std::string(spec::kQuantWeights), q.weights},
                                    std::pair{std::string(spec::kQuantActivations), q.activations}}) {
      if (!o || !o->delayed) continue;
      a[prefix + spec::kQuantScalingSuffix] = std::string("delayed");
      a[prefix + spec::kQuantHistorySuffix] = o->history;
      a[prefix + spec::kQuantAlgorithmSuffix] = std::string(num::amax_algorithm_name(o->algorithm));
      a[prefix + spec::kQuantMarginSuffix] = o->margin;
    }
    out.emplace(name, std::move(a));
  }
  return out;
}

}  // namespace probelab::sim
