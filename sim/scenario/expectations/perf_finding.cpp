// perf_finding: report.json perf.findings (sim/run/perf_findings.h) holds a finding of `cause`
// (hbm_channel | link | straggler | core | launch) at the given rank / channel / core / link (src, dst, or its
// name: `link: "r1 nic.tx"`, a glob), naming the ops
// given (globs, each must match one of the finding's ops); `top: true` (default) asks that it be
// the first finding. `only: true` asks that no finding of another cause be present.
#include <algorithm>

#include "sim/scenario/expectations/expect_util.h"

namespace probelab::sim::expect {
namespace {

struct PerfFinding : ExpectationCheck {
  std::string cause;
  std::optional<std::int64_t> rank, channel, core, src, dst;
  std::optional<std::string> link;
  std::vector<std::string> ops;
  bool top = true, only = false;

  void validate(const ExpectationScope& s, const YamlView& entry) const override {
    check_site(entry, "perf_finding", "rank", rank, s.ranks, "ranks");
    check_site(entry, "perf_finding", "src", src, s.ranks, "ranks");
    check_site(entry, "perf_finding", "dst", dst, s.ranks, "ranks");
  }

  json params() const override {
    json j = {{"cause", cause}, {"top", top}, {"only", only}};
    put(j, "rank", rank);
    put(j, "channel", channel);
    put(j, "core", core);
    put(j, "src", src);
    put(j, "dst", dst);
    if (link) j["link"] = *link;
    if (!ops.empty()) j["ops"] = ops;
    return j;
  }

  // `links`: report perf.links. A NIC carries a chip's traffic to every other server: src -> dst
  // names it when src has no HCCS link to dst (the first link of that route is src's NIC).
  bool holds(const json& f, const json& links) const {
    if (f.value("cause", "") != cause) return false;
    bool dst_ok = matches_int(dst, field(f, "dst"));
    if (!dst_ok && src && dst && f.value("kind", "") == "nic" && !f.contains("dst")) {
      dst_ok = true;
      for (const json& l : links)
        if (l.value("kind", "") == "hccs" && l.value("src", -1) == *src && l.value("dst", -1) == *dst) dst_ok = false;
    }
    if (!matches_int(rank, field(f, "rank")) || !matches_int(channel, field(f, "channel")) || !matches_int(core, field(f, "core")) ||
        !matches_int(src, field(f, "src")) || !dst_ok)
      return false;
    if (link && !matches(*link, field(f, "link"))) return false;
    for (const std::string& g : ops) {
      bool any = false;
      for (const json& o : items(f, "ops")) any = any || matches(g, o);
      if (!any) return false;
    }
    return true;
  }

  ExpectationResult evaluate(const json& r) const override {
    ExpectationResult res;
    std::string exp = "perf finding " + cause;
    if (rank) exp += fmt::format(" rank {}", *rank);
    if (channel) exp += fmt::format(" channel {}", *channel);
    if (core) exp += fmt::format(" core {}", *core);
    if (src || dst) exp += fmt::format(" link r{} -> r{}", src ? fmt::format("{}", *src) : "*", dst ? fmt::format("{}", *dst) : "*");
    if (link) exp += fmt::format(" link {}", *link);
    if (!ops.empty()) exp += fmt::format(" naming {}", fmt::join(ops, ", "));
    if (top) exp += " (first)";
    if (only) exp += " (only cause)";
    res.expected = exp;
    const json& findings = items(field(r, "perf"), "findings");
    res.actual = list_str(findings, [](const json& f) {
      std::string s = f.value("cause", "?") + fmt::format(" rank {}", f.value("rank", 0));
      if (f.contains("channel")) s += fmt::format(" channel {}", f.value("channel", 0));
      if (f.contains("core")) s += fmt::format(" core {}", f.value("core", 0));
      if (f.contains("link")) s += fmt::format(" link {}", f.value("link", ""));
      return s + fmt::format(" score {:.2f}", f.value("score", 0.0));
    });
    bool ok = false;
    for (std::size_t i = 0; i < findings.size(); ++i)
      if (holds(findings[i], items(field(r, "perf"), "links")) && (!top || i == 0)) ok = true;
    if (ok && only)
      for (const json& f : findings) ok = ok && f.value("cause", "") == cause;
    res.passed = ok;
    return res;
  }
};

std::unique_ptr<ExpectationCheck> parse(const YamlView& body) {
  body.expect_keys({"cause", "rank", "channel", "core", "src", "dst", "link", "ops", "top", "only"});
  auto c = std::make_unique<PerfFinding>();
  c->cause = body["cause"].str_in({"hbm_channel", "link", "straggler", "core", "launch"});
  c->rank = opt_int(body, "rank");
  c->channel = opt_int(body, "channel");
  c->core = opt_int(body, "core");
  c->src = opt_int(body, "src");
  c->dst = opt_int(body, "dst");
  if (auto l = body.get("link")) c->link = glob_checked(*l);
  if (auto o = body.get("ops")) {
    if (o->is_seq())
      for (const auto& item : o->items()) c->ops.push_back(glob_checked(item));
    else
      c->ops.push_back(glob_checked(*o));
  }
  c->top = body.bool_or("top", true);
  c->only = body.bool_or("only", false);
  if (c->channel && c->cause != "hbm_channel") body["channel"].fail("channel only with cause: hbm_channel", body["channel"].describe());
  if (c->core && c->cause != "core") body["core"].fail("core only with cause: core", body["core"].describe());
  if ((c->src || c->dst || c->link) && c->cause != "link") body.fail("src/dst/link only with cause: link");
  return c;
}

}  // namespace

void register_perf_finding_expectation(ExpectationRegistry& r) {
  r.add({"perf_finding",
         "a performance finding (hbm_channel | link | straggler | core | launch) at a rank / channel / link naming ops, "
         "first (top) and/or the only cause",
         parse});
}

}  // namespace probelab::sim::expect
