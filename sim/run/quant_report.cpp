// report.json `quantization` (quant_report.h).
#include "sim/run/quant_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace probelab::sim {
using nlohmann::json;

namespace {

json operand_json(const chip::kernels::QuantOperandRecord& o, bool channels) {
  json j = {{"format", std::string(num::quant_format_name(o.format))},
            {"delayed", o.delayed},
            {"scale", o.scale},
            {"amax", o.stats.amax},
            {"elements", o.stats.elements},
            {"saturated", o.stats.saturated},
            {"underflow", o.stats.underflow},
            {"subnormal", o.stats.subnormal}};
  if (o.delayed) j["next_scale"] = o.next_scale;
  if (channels && !o.channel_amax.empty()) j["channel_amax"] = o.channel_amax;
  return j;
}

struct Range {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity(), last = 0;
  void add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    last = v;
  }
  json to_json() const { return {{"min", lo}, {"max", hi}, {"last", last}}; }
};

struct OperandAgg {
  std::string format;
  bool delayed = false;
  std::uint64_t elements = 0, saturated = 0, underflow = 0, subnormal = 0;
  Range amax, scale;
  json per_step = json::array();
  json channel_amax;
  void add(const json& o, std::uint32_t step) {
    format = o.at("format");
    delayed = o.at("delayed");
    elements += o.at("elements").get<std::uint64_t>();
    saturated += o.at("saturated").get<std::uint64_t>();
    underflow += o.at("underflow").get<std::uint64_t>();
    subnormal += o.at("subnormal").get<std::uint64_t>();
    amax.add(o.at("amax").get<double>());
    scale.add(o.at("scale").get<double>());
    json s = {{"step", step}, {"amax", o.at("amax")}, {"scale", o.at("scale")}, {"saturated", o.at("saturated")},
              {"underflow", o.at("underflow")}, {"subnormal", o.at("subnormal")}};
    if (o.contains("next_scale")) s["next_scale"] = o["next_scale"];
    per_step.push_back(std::move(s));
    if (o.contains("channel_amax")) channel_amax = o["channel_amax"];
  }
  json to_json() const {
    json j = {{"format", format},       {"scaling", delayed ? "delayed" : "current"},
              {"elements", elements},   {"saturated", saturated},
              {"underflow", underflow}, {"subnormal", subnormal},
              {"amax", amax.to_json()}, {"scale", scale.to_json()},
              {"per_step", per_step}};
    if (channel_amax.is_array() && !channel_amax.empty()) {
      double hi = 0, lo = std::numeric_limits<double>::infinity();
      for (const auto& v : channel_amax) {
        const double a = v.get<double>();
        hi = std::max(hi, a);
        if (a > 0) lo = std::min(lo, a);
      }
      // The per-channel scales a symmetric quantization in this format would use.
      json scales = json::array();
      const double qmax = num::quant_qmax(num::parse_quant_format(format));
      for (const auto& v : channel_amax) scales.push_back(static_cast<float>(v.get<double>() / qmax));
      j["channels"] = {{"axis_size", channel_amax.size()},
                       {"amax", channel_amax},
                       {"scale", scales},
                       {"spread", std::isfinite(lo) ? json(hi / lo) : json(nullptr)}};
    }
    return j;
  }
};

}  // namespace

json quant_executions(const PerfLedger& ledger, std::uint32_t rank) {
  json out = json::array();
  for (const PerfLedger::QuantExecution& r : ledger.quant())
    for (const auto& q : r.ops) {
      json e = {{"op", q.op}, {"rank", rank}, {"step", r.step}};
      if (q.activations.on) e["activations"] = operand_json(q.activations, true);
      if (q.weights.on) e["weights"] = operand_json(q.weights, false);
      out.push_back(std::move(e));
    }
  return out;
}

json quant_section(const std::vector<json>& executions) {
  struct Layer {
    std::string op;
    std::uint32_t rank = 0;
    std::uint64_t executions = 0;
    OperandAgg act, wt;
    bool has_act = false, has_wt = false;
  };
  std::vector<Layer> layers;
  std::map<std::pair<std::uint32_t, std::string>, std::size_t> index;
  std::uint64_t saturated = 0, underflow = 0;
  json first = nullptr;
  std::uint32_t first_step = 0;
  for (const json& list : executions)
    for (const json& e : list) {
      const std::uint32_t rank = e.at("rank"), step = e.at("step");
      const std::string op = e.at("op");
      auto [it, fresh] = index.emplace(std::make_pair(rank, op), layers.size());
      if (fresh) {
        layers.emplace_back();
        layers.back().op = op;
        layers.back().rank = rank;
      }
      Layer& l = layers[it->second];
      ++l.executions;
      for (const char* operand : {"activations", "weights"}) {
        if (!e.contains(operand)) continue;
        const json& o = e[operand];
        (std::string(operand) == "activations" ? l.has_act : l.has_wt) = true;
        (std::string(operand) == "activations" ? l.act : l.wt).add(o, step);
        const std::uint64_t sat = o.at("saturated");
        saturated += sat;
        underflow += o.at("underflow").get<std::uint64_t>();
        if (sat > 0 && (first.is_null() || step < first_step)) {
          first = {{"op", op}, {"rank", rank}, {"step", step}, {"operand", operand}, {"count", sat}};
          first_step = step;
        }
      }
    }
  if (layers.empty()) return nullptr;
  std::stable_sort(layers.begin(), layers.end(), [](const Layer& a, const Layer& b) { return a.rank < b.rank; });
  json ls = json::array();
  for (const Layer& l : layers) {
    json j = {{"op", l.op}, {"rank", l.rank}, {"executions", l.executions}};
    if (l.has_act) j["activations"] = l.act.to_json();
    if (l.has_wt) j["weights"] = l.wt.to_json();
    ls.push_back(std::move(j));
  }
  return {{"layers", ls}, {"saturated", saturated}, {"underflow", underflow}, {"first_saturation", first}};
}

std::string quant_summary(const json& q) {
  if (!q.is_object()) return {};
  std::string out = fmt::format("  quantization: {} layers, {} codes saturated, {} flushed to zero\n", q["layers"].size(),
                                q.value("saturated", std::uint64_t{0}), q.value("underflow", std::uint64_t{0}));
  if (q["first_saturation"].is_object()) {
    const json& f = q["first_saturation"];
    out += fmt::format("    first saturation: {} {} at step {} rank {} ({} codes)\n", f.value("op", "?"),
                       f.value("operand", "?"), f.value("step", 0), f.value("rank", 0), f.value("count", 0));
  }
  for (const json& l : q["layers"]) {
    for (const char* operand : {"activations", "weights"}) {
      if (!l.contains(operand)) continue;
      const json& o = l[operand];
      std::string ch;
      if (o.contains("channels") && o["channels"]["spread"].is_number())
        ch = fmt::format(", channel amax spread {:.3g}x", o["channels"]["spread"].get<double>());
      out += fmt::format("    {:<24} {:<11} {} {:<7} amax {:.4g}..{:.4g}, saturated {}, flushed {}{}\n", l.value("op", "?"),
                         operand, o.value("format", "?"), o.value("scaling", "?"), o["amax"]["min"].get<double>(),
                         o["amax"]["max"].get<double>(), o.value("saturated", std::uint64_t{0}),
                         o.value("underflow", std::uint64_t{0}), ch);
    }
  }
  return out;
}

}  // namespace probelab::sim
