#include "sim/run/perf_compare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

namespace probelab::sim {

using nlohmann::json;

namespace {

constexpr double kOpShare = 0.02;    // an op got slower when it added > 2% of its time in A ...
constexpr double kOpMinCycles = 50;  // ... and more than this many cycles

double num(const json& j, const char* k) { return j.is_object() && j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0.0; }
double counter(const json& op, const char* k) { return op.contains("counters") ? num(op["counters"], k) : 0.0; }
double per_core(const json& op, const char* k) { return counter(op, k) / std::max(1.0, num(op, "cores")); }

/// What identifies a finding across runs: its cause, rank and component.
std::string finding_key(const json& f) {
  return fmt::format("{}|{}|{}|{}|{}", f.value("cause", ""), f.value("rank", 0), f.contains("channel") ? f["channel"].dump() : "",
                     f.value("link", ""), f.contains("core") ? f["core"].dump() : "");
}

json findings_not_in(const json& of, const json& in) {
  std::set<std::string> keys;
  for (const json& f : in) keys.insert(finding_key(f));
  json out = json::array();
  for (const json& f : of)
    if (!keys.count(finding_key(f))) out.push_back(f);
  return out;
}

const json* new_finding(const json& found, const std::string& cause, int rank = -1) {
  for (const json& f : found)
    if (f.value("cause", "") == cause && (rank < 0 || f.value("rank", -1) == rank)) return &f;
  return nullptr;
}

double link_wait(const json& perf) {
  double w = 0;
  if (perf.contains("links"))
    for (const json& l : perf["links"]) w += num(l, "wait_cycles");
  return w;
}

struct Cause {
  std::string cause, why;
};

/// Why a kernel's own cycles grew, from its counters in A and B.
Cause kernel_cause(const json& a, const json& b, const json& found, int rank) {
  if (num(a, "tasks") != num(b, "tasks") || num(a, "cores") != num(b, "cores"))
    return {"tiling", fmt::format("tiling changed: {} -> {} tasks, {} -> {} cores", num(a, "tasks"), num(b, "tasks"),
                                  num(a, "cores"), num(b, "cores"))};
  const double busy_a = per_core(a, "cube_busy_cycles") + per_core(a, "vector_busy_cycles");
  const double busy_b = per_core(b, "cube_busy_cycles") + per_core(b, "vector_busy_cycles");
  const double stall_a = per_core(a, "hbm_stall_cycles"), stall_b = per_core(b, "hbm_stall_cycles");
  const double grew = num(b, "cycles") - num(a, "cycles");
  const json* straggler = new_finding(found, "straggler", rank);
  if (straggler && !new_finding(found, "hbm_channel", rank))
    return {"compute", fmt::format("compute: rank {} is B's straggler (throttled cores: Cube, Vector and memory ports); "
                                   "Cube+Vector busy {:.0f} -> {:.0f} cycles per core, {:.1f} -> {:.1f} GB/s",
                                   rank, busy_a, busy_b, num(a, "hbm_gbps"), num(b, "hbm_gbps"))};
  if (busy_b - busy_a > 0.1 * grew && busy_b > 1.1 * busy_a) {
    return {"compute", fmt::format("compute: Cube+Vector busy {:.0f} -> {:.0f} cycles per core ({:.2f}x)", busy_a, busy_b,
                                   busy_a > 0 ? busy_b / busy_a : 0.0)};
  }
  std::string why = fmt::format("memory: HBM stall {:.0f} -> {:.0f} cycles per core, {:.1f} -> {:.1f} GB/s", stall_a, stall_b,
                                num(a, "hbm_gbps"), num(b, "hbm_gbps"));
  if (const json* ch = new_finding(found, "hbm_channel", rank))
    return {"hbm_channel", why + fmt::format("; rank {} HBM channel {} at {:.1f} GB/s (nominal {:.1f})", rank,
                                             ch->value("channel", 0), num(*ch, "gbps"), num(*ch, "nominal_gbps"))};
  // A throttled core: per-core averages barely move, but the op waits for that core's tiles.
  if (const json* core = new_finding(found, "core", rank))
    return {"core", fmt::format("core: rank {} AI core {} at {:.2f}x its ops' median core's time per tile, the op waits "
                                "for its tiles; Cube+Vector busy {:.0f} -> {:.0f}, HBM stall {:.0f} -> {:.0f} cycles per core",
                                rank, core->value("core", 0), num(*core, "pace"), busy_a, busy_b, stall_a, stall_b)};
  return {"memory", why};
}

/// Why a collective's cycles grew.
Cause collective_cause(const json& a, const json& b, const json& found, int rank, double wait_a, double wait_b) {
  const std::string base = fmt::format("collective {:.0f} -> {:.0f} cycles", num(a, "cycles"), num(b, "cycles"));
  if (const json* l = new_finding(found, "link"))
    return {"link", fmt::format("{}; link {} at {:.1f} GB/s (nominal {:.1f})", base, l->value("link", ""), num(*l, "gbps"),
                                num(*l, "nominal_gbps"))};
  for (const json& f : found)
    if (f.value("cause", "") == "straggler")
      return {"straggler", fmt::format("{}; {} rank {} (B's straggler: {:.0f} vs {:.0f} busy cycles)", base,
                                       f.value("rank", -1) == rank ? "the ranks are out of step behind" : "waiting for",
                                       f.value("rank", 0), num(f, "busy_cycles"), num(f, "others_median_busy_cycles"))};
  if (wait_b > 1.1 * wait_a + kOpMinCycles)
    return {"contention", fmt::format("{}; links queued {:.0f} -> {:.0f} cycles", base, wait_a, wait_b)};
  return {"communication", base + "; link counters unchanged"};
}

}  // namespace

const std::vector<std::string>& perf_findings_explaining(const std::string& cause) {
  static const std::map<std::string, std::vector<std::string>> kinds = {
      {"hbm_channel", {"hbm_channel"}},
      {"memory", {"hbm_channel", "core"}},
      {"core", {"core"}},
      {"compute", {"straggler", "core"}},
      {"straggler", {"straggler"}},
      {"link", {"link"}},
      {"contention", {"link"}},
      {"launch", {"launch"}},
  };
  static const std::vector<std::string> none;
  const auto it = kinds.find(cause);
  return it == kinds.end() ? none : it->second;
}

json compare_perf(const json& ra, const json& rb, double threshold_pct) {
  const json& pa = ra.at("perf");
  const json& pb = rb.at("perf");
  json c = {{"a", ra.value("scenario", json::object()).value("name", "?")},
            {"b", rb.value("scenario", json::object()).value("name", "?")},
            {"threshold_pct", threshold_pct}};
  const double ta = num(ra.value("cycles", json::object()), "total"), tb = num(rb.value("cycles", json::object()), "total");
  c["total"] = {{"a", ta}, {"b", tb}, {"delta", tb - ta}, {"pct", ta > 0 ? 100 * (tb - ta) / ta : 0.0}};
  std::map<int, double> rank_added;
  json ranks = json::array();
  for (const json& x : pa.at("ranks")) {
    const int r = x.value("rank", 0);
    for (const json& y : pb.at("ranks"))
      if (y.value("rank", -1) == r) {
        rank_added[r] = num(y, "cycles") - num(x, "cycles");
        ranks.push_back({{"rank", r}, {"a", num(x, "cycles")}, {"b", num(y, "cycles")}, {"delta", rank_added[r]}});
      }
  }
  c["ranks"] = ranks;
  json steps = json::array();
  for (const json& x : pa.at("steps"))
    for (const json& y : pb.at("steps"))
      if (y.value("rank", -1) == x.value("rank", -2) && y.value("step", -1) == x.value("step", -2))
        steps.push_back({{"rank", x.value("rank", 0)}, {"step", x.value("step", 0)}, {"a", num(x, "cycles")},
                         {"b", num(y, "cycles")}, {"delta", num(y, "cycles") - num(x, "cycles")},
                         {"a_bound", x.value("bound", "")}, {"b_bound", y.value("bound", "")}});
  c["steps"] = steps;
  const json found = findings_not_in(pb.value("findings", json::array()), pa.value("findings", json::array()));
  c["new_findings"] = found;
  c["gone_findings"] = findings_not_in(pa.value("findings", json::array()), pb.value("findings", json::array()));
  const double wait_a = link_wait(pa), wait_b = link_wait(pb);

  using Key = std::tuple<int, std::string>;
  std::map<Key, const json*> in_b;
  for (const json& o : pb.at("ops")) in_b[{o.value("rank", 0), o.value("op", "")}] = &o;
  std::set<Key> seen;
  json ops = json::array(), only_a = json::array(), only_b = json::array();
  std::map<std::string, double> by_cause;
  for (const json& a : pa.at("ops")) {
    const Key k{a.value("rank", 0), a.value("op", "")};
    auto it = in_b.find(k);
    if (it == in_b.end()) {
      only_a.push_back(fmt::format("rank {} {}", std::get<0>(k), std::get<1>(k)));
      continue;
    }
    seen.insert(k);
    const json& b = *it->second;
    const double d_cyc = num(b, "cycles") - num(a, "cycles"), d_launch = num(b, "launch_cycles") - num(a, "launch_cycles"),
                 d_probe = num(b, "probe_cycles") - num(a, "probe_cycles");
    const double added = d_cyc + d_launch + d_probe;
    const double time_a = num(a, "cycles") + num(a, "launch_cycles") + num(a, "probe_cycles");
    if (added <= std::max(kOpMinCycles, kOpShare * time_a)) continue;
    const int rank = std::get<0>(k);
    Cause why;
    if (d_launch >= d_cyc && d_launch >= d_probe)
      why = {"launch", fmt::format("launch: host submission and dispatch before its tasks {:.0f} -> {:.0f} cycles",
                                   num(a, "launch_cycles"), num(b, "launch_cycles"))};
    else if (d_probe >= d_cyc)
      why = {"capture", fmt::format("capture: probe tasks {:.0f} -> {:.0f} cycles", num(a, "probe_cycles"), num(b, "probe_cycles"))};
    else if (a.value("kind", "") == "collective")
      why = collective_cause(a, b, found, rank, wait_a, wait_b);
    else
      why = kernel_cause(a, b, found, rank);
    by_cause[why.cause] += added;
    const double ra_added = rank_added.count(rank) ? rank_added[rank] : 0.0;
    ops.push_back({{"rank", rank}, {"op", std::get<1>(k)}, {"kind", a.value("kind", "")}, {"a_cycles", num(a, "cycles")},
                   {"b_cycles", num(b, "cycles")}, {"a_launch", num(a, "launch_cycles")}, {"b_launch", num(b, "launch_cycles")},
                   {"a_probe", num(a, "probe_cycles")}, {"b_probe", num(b, "probe_cycles")}, {"added", added},
                   {"share", ra_added > 0 ? json(added / ra_added) : json(nullptr)}, {"cause", why.cause}, {"why", why.why}});
  }
  for (const auto& [k, o] : in_b)
    if (!seen.count(k) && !o->is_null()) only_b.push_back(fmt::format("rank {} {}", std::get<0>(k), std::get<1>(k)));
  std::vector<json> sorted(ops.begin(), ops.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const json& x, const json& y) { return num(x, "added") > num(y, "added"); });
  c["ops"] = sorted;
  c["only_a"] = only_a;
  c["only_b"] = only_b;
  const bool regression = tb - ta > threshold_pct / 100.0 * ta;
  c["regression"] = regression;
  json verdict = nullptr;
  if (regression && !by_cause.empty()) {
    // Causes that one new finding of B explains are summed under it (a straggler's own kernels,
    // cause compute, and the others' waits for it, cause straggler).
    // The finding (kind) a cause is summed under: the first of its kinds that B newly has.
    const auto finding_of = [&](const std::string& cause) -> const json* {
      for (const std::string& kind : perf_findings_explaining(cause))
        if (const json* f = new_finding(found, kind)) return f;
      return nullptr;
    };
    std::map<std::string, double> by_component;
    double sum = 0;
    for (const auto& [cause, v] : by_cause) {
      const json* f = finding_of(cause);
      by_component[f ? f->value("cause", cause) : cause] += v;
      sum += v;
    }
    auto best = std::max_element(by_component.begin(), by_component.end(),
                                 [](const auto& x, const auto& y) { return x.second < y.second; });
    const json* f = new_finding(found, best->first);
    verdict = {{"cause", best->first},
               {"added", best->second},
               {"share_of_added_op_cycles", sum > 0 ? best->second / sum : 0.0},
               {"component", f ? *f : json(nullptr)},
               {"evidence", f ? f->value("evidence", "") : std::string("no new finding in B names a component")}};
  }
  c["verdict"] = verdict;
  return c;
}

std::string compare_perf_text(const json& c, std::size_t max_ops) {
  const json& t = c.at("total");
  std::string out = fmt::format("perf: {} (A) -> {} (B): total {:.0f} -> {:.0f} cycles ({:+.0f}, {:+.1f}%)\n", c.value("a", "?"),
                                c.value("b", "?"), num(t, "a"), num(t, "b"), num(t, "delta"), num(t, "pct"));
  out += "\nsteps:\n  rank step          A          B      delta  bound A -> B\n";
  for (const json& s : c.at("steps"))
    out += fmt::format("  {:>4} {:>4} {:>10.0f} {:>10.0f} {:>+10.0f}  {} -> {}\n", s.value("rank", 0), s.value("step", 0),
                       num(s, "a"), num(s, "b"), num(s, "delta"), s.value("a_bound", ""), s.value("b_bound", ""));
  if (!c.at("new_findings").empty()) out += "\nnew findings in B:\n";
  for (const json& f : c.at("new_findings"))
    out += fmt::format("  [{:.2f}] {}: {}\n", num(f, "score"), f.value("cause", "?"), f.value("evidence", ""));
  for (const json& f : c.at("gone_findings"))
    out += fmt::format("  (only in A) {}: {}\n", f.value("cause", "?"), f.value("evidence", ""));
  const json& ops = c.at("ops");
  if (ops.empty()) {
    out += "\nno op got slower\n";
  } else {
    out += fmt::format("\nops that got slower ({}), most added cycles first:\n", ops.size());
    out += fmt::format("  {:>4} {:<36} {:>9} {:>9} {:>8} {:>6}  {:<13} {}\n", "rank", "op", "A", "B", "added", "share",
                       "cause", "why");
    std::size_t shown = 0;
    for (const json& o : ops) {
      if (shown++ >= max_ops) break;
      const std::string share = o["share"].is_number() ? fmt::format("{:.0f}%", 100 * o["share"].get<double>()) : "-";
      out += fmt::format("  {:>4} {:<36} {:>9.0f} {:>9.0f} {:>+8.0f} {:>6}  {:<13} {}\n", o.value("rank", 0), o.value("op", ""),
                         num(o, "a_cycles") + num(o, "a_launch") + num(o, "a_probe"),
                         num(o, "b_cycles") + num(o, "b_launch") + num(o, "b_probe"), num(o, "added"), share,
                         o.value("cause", ""), o.value("why", ""));
    }
    if (ops.size() > max_ops) out += fmt::format("  ... {} more (--max)\n", ops.size() - max_ops);
  }
  if (!c.at("only_a").empty() || !c.at("only_b").empty())
    out += fmt::format("ops only in A: {}, only in B: {}\n", c.at("only_a").size(), c.at("only_b").size());
  if (!c.value("regression", false)) {
    out += fmt::format("\nno regression (total within {:.1f}% of A)\n", num(c, "threshold_pct"));
  } else if (c.at("verdict").is_object()) {
    const json& v = c.at("verdict");
    out += fmt::format("\nregression: {} ({:.0f}% of the added op cycles); {}\n", v.value("cause", "?"),
                       100 * num(v, "share_of_added_op_cycles"), v.value("evidence", ""));
  } else {
    out += "\nregression: no op got slower (the time went between ops)\n";
  }
  return out;
}

}  // namespace probelab::sim
