// diagnosis: a root-cause candidate among the top `top` is op X (and/or concerns tensor T) with
// cause class C; `exclusive`: the diagnosis blames nothing else (every candidate is X). `step`, `rank`, `element` and `path`
// (globs matched in order against its propagation path) narrow the candidate further.
#include <fmt/ranges.h>

#include "sim/scenario/expectations/expect_util.h"

namespace probelab::sim::expect {
namespace {

struct Diagnosis : ExpectationCheck {
  std::string op = "*";
  std::optional<std::string> tensor;
  std::string cause;
  std::optional<std::int64_t> step, rank, element;
  std::vector<std::string> path;
  int top = 1;
  bool exclusive = false;

  void validate(const ExpectationScope& s, const YamlView& entry) const override {
    check_site(entry, "diagnosis", "step", step, s.steps, "steps");
    check_site(entry, "diagnosis", "rank", rank, s.ranks, "ranks");
  }

  json params() const override {
    json j = {{"op", op}, {"cause", cause}, {"top", top}, {"exclusive", exclusive}};
    put(j, "tensor", tensor);
    put(j, "step", step);
    put(j, "rank", rank);
    put(j, "element", element);
    if (!path.empty()) j["path"] = path;
    return j;
  }

  /// The globs of `path` match hops of the candidate's propagation path, in order.
  bool path_holds(const json& c) const {
    const json& p = field(c, "propagation_path");
    std::size_t i = 0;
    if (p.is_array())
      for (const auto& hop : p)
        if (i < path.size() && matches(path[i], hop)) ++i;
    return i == path.size();
  }

  ExpectationResult evaluate(const json& r) const override {
    ExpectationResult res;
    res.expected = fmt::format("diagnosis top-{} includes {}{} as {}", top, op,
                               tensor ? " (tensor " + *tensor + ")" : std::string(), cause);
    if (step) res.expected += fmt::format(" at step {}", *step);
    if (rank) res.expected += fmt::format(" on rank {}", *rank);
    if (element) res.expected += fmt::format(" element {}", *element);
    if (!path.empty()) res.expected += fmt::format(" via {}", fmt::join(path, " -> "));
    if (exclusive) res.expected += " (no other candidate)";
    const json& d = field(r, "diagnosis");
    auto cand_str = [](const json& c) {
      const std::string t = c.value("tensor", "");
      std::string s = fmt::format("{}{} ({}", c.value("op", "?"), t.empty() ? "" : " [" + t + "]", c.value("cause", "?"));
      for (const char* k : {"step", "rank", "element"})
        if (field(c, k).is_number()) s += fmt::format(" {} {}", k, field(c, k).dump());
      const json& p = field(c, "propagation_path");
      if (p.is_array() && !p.empty()) s += fmt::format(" via {}", fmt::join(p.get<std::vector<std::string>>(), " -> "));
      return s + ")";
    };
    res.actual = "candidates: " + list_str(d, cand_str, 5);
    if (!d.is_array()) return res;
    auto blamed = [this](const json& c) {
      return matches(op, field(c, "op")) && matches(tensor, field(c, "tensor"));
    };
    auto placed = [this](const json& c) {
      return matches_int(step, field(c, "step")) && matches_int(rank, field(c, "rank")) &&
             matches_int(element, field(c, "element")) && path_holds(c);
    };
    bool hit = false;
    for (std::size_t i = 0; i < d.size() && i < static_cast<std::size_t>(top); ++i)
      hit = hit || (blamed(d[i]) && placed(d[i]) && d[i].value("cause", "") == cause);
    if (hit && exclusive)
      for (const auto& c : d)
        if (!blamed(c)) hit = false;
    res.passed = hit;
    return res;
  }
};

std::unique_ptr<ExpectationCheck> parse(const YamlView& body) {
  body.expect_keys({"op", "tensor", "cause", "top", "exclusive", "step", "rank", "element", "path"});
  auto d = std::make_unique<Diagnosis>();
  if (!body.get("op") && !body.get("tensor")) body.fail("an op or a tensor glob (the blamed place)");
  if (body.get("op")) d->op = glob_checked(body["op"]);
  d->tensor = opt_glob(body, "tensor");
  d->cause = body["cause"].str();
  d->top = static_cast<int>(body.int_or("top", 1, 1, 10));
  d->exclusive = body.bool_or("exclusive", false);
  d->step = opt_int(body, "step");
  d->rank = opt_int(body, "rank");
  d->element = opt_int(body, "element");
  if (auto p = body.get("path")) {
    if (!p->is_seq() || p->size() == 0) p->fail("a non-empty list of hop globs (\"op@step\" or a tensor)", p->describe());
    for (const auto& h : p->items()) d->path.push_back(glob_checked(h));
  }
  return d;
}

}  // namespace

void register_diagnosis_expectation(ExpectationRegistry& r) {
  r.add({"diagnosis", "a top-k root-cause candidate is op X with cause class C (exclusive: only X)", parse});
}

}  // namespace probelab::sim::expect
