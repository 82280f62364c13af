// diagnosis: a root-cause candidate among the top `top` is op X (and/or concerns tensor T) with
// cause class C; `exclusive`: no other candidate has cause C.
#include "sim/scenario/expectations/expect_util.h"

namespace probelab::sim::expect {
namespace {

struct Diagnosis : ExpectationCheck {
  std::string op = "*";
  std::optional<std::string> tensor;
  std::string cause;
  int top = 1;
  bool exclusive = false;

  json params() const override {
    json j = {{"op", op}, {"cause", cause}, {"top", top}, {"exclusive", exclusive}};
    put(j, "tensor", tensor);
    return j;
  }

  ExpectationResult evaluate(const json& r) const override {
    ExpectationResult res;
    res.expected = fmt::format("diagnosis top-{} includes {}{} as {}", top, op,
                               tensor ? " (tensor " + *tensor + ")" : std::string(), cause);
    if (exclusive) res.expected += " (no other op blamed as " + cause + ")";
    const json& d = field(r, "diagnosis");
    auto cand_str = [](const json& c) {
      const std::string t = c.value("tensor", "");
      return fmt::format("{}{} ({})", c.value("op", "?"), t.empty() ? "" : " [" + t + "]", c.value("cause", "?"));
    };
    res.actual = "candidates: " + list_str(d, cand_str, 5);
    if (!d.is_array()) return res;
    auto blamed = [this](const json& c) {
      return matches(op, field(c, "op")) && matches(tensor, field(c, "tensor"));
    };
    bool hit = false;
    for (std::size_t i = 0; i < d.size() && i < static_cast<std::size_t>(top); ++i)
      hit = hit || (blamed(d[i]) && d[i].value("cause", "") == cause);
    if (hit && exclusive)
      for (const auto& c : d)
        if (c.value("cause", "") == cause && !blamed(c)) hit = false;
    res.passed = hit;
    return res;
  }
};

std::unique_ptr<ExpectationCheck> parse(const YamlView& body) {
  body.expect_keys({"op", "tensor", "cause", "top", "exclusive"});
  auto d = std::make_unique<Diagnosis>();
  if (!body.get("op") && !body.get("tensor")) body.fail("an op or a tensor glob (the blamed place)");
  if (body.get("op")) d->op = glob_checked(body["op"]);
  d->tensor = opt_glob(body, "tensor");
  d->cause = body["cause"].str();
  d->top = static_cast<int>(body.int_or("top", 1, 1, 10));
  d->exclusive = body.bool_or("exclusive", false);
  return d;
}

}  // namespace

void register_diagnosis_expectation(ExpectationRegistry& r) {
  r.add({"diagnosis", "a top-k root-cause candidate is op X with cause class C (exclusive: only X)", parse});
}

}  // namespace probelab::sim::expect
