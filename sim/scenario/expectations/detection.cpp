// detection: some anomaly of a kind at an op/tensor (globs), element, step and rank, within a
// latency bound in cycles, latched by a core of a kind (core_kind: ai_core | aic | aiv).
#include "sim/scenario/expectations/expect_util.h"

namespace probelab::sim::expect {
namespace {

struct Detection : ExpectationCheck {
  std::string kind;
  std::optional<std::string> op, tensor, core_kind;
  std::optional<std::int64_t> element, step, rank;
  std::optional<std::uint64_t> max_latency_cycles;

  void validate(const ExpectationScope& s, const YamlView& entry) const override {
    check_site(entry, "detection", "step", step, s.steps, "steps");
    check_site(entry, "detection", "rank", rank, s.ranks, "ranks");
  }

  json params() const override {
    json j = {{"kind", kind}};
    put(j, "op", op);
    put(j, "tensor", tensor);
    put(j, "element", element);
    put(j, "step", step);
    put(j, "rank", rank);
    put(j, "max_latency_cycles", max_latency_cycles);
    put(j, "core_kind", core_kind);
    return j;
  }

  ExpectationResult evaluate(const json& r) const override {
    ExpectationResult res;
    res.expected = fmt::format("detection of {}", kind);
    if (op) res.expected += " at op " + *op;
    if (tensor) res.expected += " on tensor " + *tensor;
    if (element) res.expected += fmt::format(" element {}", *element);
    if (step) res.expected += fmt::format(" step {}", *step);
    if (rank) res.expected += fmt::format(" rank {}", *rank);
    if (max_latency_cycles) res.expected += fmt::format(" within {} cycles", *max_latency_cycles);
    if (core_kind) res.expected += " latched by an " + *core_kind + " core";
    bool site_found = false;
    for (const auto& a : items(r, "anomalies")) {
      if (!kind_matches(kind, a) || !matches(op, field(a, "op")) || !matches(tensor, field(a, "tensor")) ||
          !matches_int(element, field(a, "element")) || !matches_int(step, field(a, "step")) ||
          !matches_int(rank, field(a, "rank")) || (core_kind && field(a, "core_kind") != json(*core_kind)))
        continue;
      site_found = true;
      if (max_latency_cycles) {
        const json& lat = field(a, "latency_cycles");
        if (!lat.is_number() || lat.get<double>() > static_cast<double>(*max_latency_cycles)) continue;
      }
      res.passed = true;
      res.actual = anomaly_str(a);
      return res;
    }
    res.actual = (site_found ? "matching anomaly too late: " : "anomalies: ") + list_str(field(r, "anomalies"), anomaly_str);
    return res;
  }
};

std::unique_ptr<ExpectationCheck> parse(const YamlView& body) {
  body.expect_keys({"kind", "op", "tensor", "element", "step", "rank", "max_latency_cycles", "core_kind"});
  auto d = std::make_unique<Detection>();
  d->kind = body["kind"].str_in(detection_kinds());
  d->op = opt_glob(body, "op");
  d->tensor = opt_glob(body, "tensor");
  d->element = opt_int(body, "element");
  d->step = opt_int(body, "step");
  d->rank = opt_int(body, "rank");
  if (auto v = body.get("max_latency_cycles")) d->max_latency_cycles = v->uinteger();
  if (auto v = body.get("core_kind")) d->core_kind = v->str_in({"ai_core", "aic", "aiv"});
  return d;
}

}  // namespace

void register_detection_expectation(ExpectationRegistry& r) {
  r.add({"detection", "an anomaly of a kind at op (glob), element, step, rank, within a latency bound in cycles, latched "
                         "by a core of a kind (core_kind: ai_core | aic | aiv)",
         parse});
}

}  // namespace probelab::sim::expect
