#include "sim/run/perf_what_if.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/run/perf_summary.h"

namespace probelab::sim {

using nlohmann::json;

namespace {

double num(const json& j, const char* k) { return j.is_object() && j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0.0; }

/// A chip parameter of report.json `chip.params` (written as text) as a number.
std::optional<double> param(const json& report, const char* key) {
  const json& p = report.value("chip", json::object()).value("params", json::object());
  if (!p.contains(key)) return std::nullopt;
  if (p[key].is_number()) return p[key].get<double>();
  if (!p[key].is_string()) return std::nullopt;
  try {
    return std::stod(p[key].get<std::string>());
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

/// Per-rank savings spread over the rank's steps by `weight(step)`; the total is the slowest rank.
json estimate(const json& report, std::map<int, double> saved, const auto& weight) {
  const json& perf = report.at("perf");
  json ranks = json::array(), steps = json::array();
  double total = 0, est_total = 0;
  for (const json& rk : perf.at("ranks")) {
    const int r = rk.value("rank", 0);
    const double c = num(rk, "cycles"), s = std::min(saved[r], c);
    ranks.push_back({{"rank", r}, {"cycles", c}, {"estimate", c - s}});
    total = std::max(total, c);
    est_total = std::max(est_total, c - s);
    double wsum = 0;
    for (const json& st : perf.at("steps"))
      if (st.value("rank", -1) == r) wsum += weight(st);
    for (const json& st : perf.at("steps"))
      if (st.value("rank", -1) == r)
        steps.push_back({{"rank", r}, {"step", st.value("step", 0)}, {"cycles", num(st, "cycles")},
                         {"estimate", num(st, "cycles") - (wsum > 0 ? s * weight(st) / wsum : 0.0)}});
  }
  const double run_total = num(report.value("cycles", json::object()), "total");
  if (run_total > 0) {  // the run's total may include what follows the ranks' programs
    est_total += run_total - total;
    total = run_total;
  }
  return {{"saved", total - est_total}, {"total", {{"cycles", total}, {"estimate", est_total}}}, {"ranks", ranks}, {"steps", steps}};
}

double path_of(const json& st, const char* k) { return num(st.value("critical_path", json::object()), k); }

}  // namespace

json perf_what_if(const json& report, std::size_t n_ops) {
  const json& perf = report.at("perf");
  const auto hbm = param(report, "hbm_bandwidth_gbps"), clock = param(report, "clock_mhz"),
             port = param(report, "mte_bytes_per_cycle"), link = param(report, "link_bandwidth_gbps");
  if (!hbm || !clock || !port || *clock <= 0) return nullptr;
  json out = json::object();
  {  // HBM x2
    // Transfers are striped over the channels, so a slow channel holds every transfer: the HBM
    // serves at channels x its slowest channel's rate (bytes per cycle).
    std::map<int, double> hbm_pc;
    for (const json& rk : perf.at("ranks")) {
      double slowest = 0, n = 0;
      for (const json& ch : rk.value("hbm_channels", json::array()))
        if (num(ch, "bytes") > 0 && num(ch, "gbps") > 0) {
          slowest = n == 0 ? num(ch, "gbps") : std::min(slowest, num(ch, "gbps"));
          ++n;
        }
      const double nominal = *hbm * 1000.0 / *clock;
      hbm_pc[rk.value("rank", 0)] = n > 0 ? std::min(nominal, n * slowest * 1000.0 / *clock) : nominal;
    }
    std::map<int, double> saved;
    for (const json& o : perf.at("ops")) {
      if (o.value("kind", "") != "kernel" || !hbm_pc.count(o.value("rank", 0))) continue;
      const double cores = std::max(1.0, num(o, "cores")), t = num(o, "cycles"), h = hbm_pc.at(o.value("rank", 0));
      const double bw = std::min(h, *port * cores), bw2 = std::min(2 * h, *port * cores);
      const double m = (num(o.at("counters"), "hbm_read_bytes") + num(o.at("counters"), "hbm_write_bytes")) / bw;
      if (t <= 0 || m <= 0) continue;
      saved[o.value("rank", 0)] += (m - m * bw / bw2) * std::min(1.0, m / t);
    }
    json e = estimate(report, saved, [](const json& st) { return path_of(st, "memory") + path_of(st, "compute"); });
    e["what"] = "HBM bandwidth x2";
    e["override"] = {{"hbm_bandwidth_gbps", 2 * *hbm}};
    e["check"] = fmt::format("chip.overrides: {{hbm_bandwidth_gbps: {}}}", 2 * *hbm);
    out["hbm_x2"] = e;
  }
  if (perf.at("ranks").size() > 1 && link && perf.contains("links")) {  // link bandwidth x2
    double busiest = 0;
    for (const json& l : perf["links"])
      if (num(l, "bandwidth_gbps") == *link) busiest = std::max(busiest, num(l, "busy_cycles"));
    std::map<int, double> saved, coll, exposed;
    for (const json& st : perf.at("steps")) {
      coll[st.value("rank", 0)] += num(st, "collective_cycles");
      exposed[st.value("rank", 0)] += num(st, "exposed_collective_cycles");
    }
    for (const auto& [r, c] : coll) saved[r] = c > 0 ? busiest / 2 * exposed[r] / c : 0.0;
    json e = estimate(report, saved, [](const json& st) { return num(st, "exposed_collective_cycles"); });
    e["what"] = "link bandwidth x2";
    e["override"] = {{"link_bandwidth_gbps", 2 * *link}};
    e["check"] = fmt::format("chip.overrides: {{link_bandwidth_gbps: {}}}", 2 * *link);
    out["link_x2"] = e;
  }
  // The slowest kernels by name; the op at full rate on every rank that runs it (data-parallel
  // ranks wait for each other, so one rank alone would not shorten the step).
  json ops = json::array();
  std::vector<std::string> names;
  for (const json& o : top_ops(perf, -1, perf.at("ops").size()))
    if (o.value("kind", "") == "kernel" && names.size() < n_ops &&
        std::find(names.begin(), names.end(), o.value("op", "")) == names.end())
      names.push_back(o.value("op", ""));
  for (const std::string& name : names) {
    std::map<int, double> saved;
    double cycles = 0, bound = 0;
    for (const json& o : perf.at("ops"))
      if (o.value("op", "") == name) {
        const double b = num(o.value("roofline", json::object()), "bound_cycles");
        saved[o.value("rank", 0)] += std::max(0.0, num(o, "cycles") - b);
        cycles += num(o, "cycles");
        bound += b;
      }
    // Spread over the steps by kernel time (the op runs in every step).
    json e = estimate(report, saved, [](const json& st) { return num(st, "kernel_cycles"); });
    e["what"] = fmt::format("{} at full Cube rate (its roofline bound, every rank)", name);
    e["op"] = name;
    e["cycles"] = cycles;
    e["bound_cycles"] = bound;
    e["override"] = nullptr;
    e["check"] = "none: an upper bound (no chip override runs one op at its roofline)";
    ops.push_back(e);
  }
  out["full_cube_rate"] = ops;
  return out;
}

std::string perf_what_if_text(const json& w) {
  if (!w.is_object()) return "\nwhat-if: no estimate (the report has no chip parameters)\n";
  std::string out = "\nwhat-if (estimated from the counters):\n";
  auto line = [&](const json& e) {
    const json& t = e.at("total");
    out += fmt::format("  {}: total {:.0f} -> {:.0f} cycles ({:.1f}% faster); check: {}\n", e.value("what", ""), num(t, "cycles"),
                       num(t, "estimate"), num(t, "cycles") > 0 ? 100 * (1 - num(t, "estimate") / num(t, "cycles")) : 0.0,
                       e.value("check", ""));
  };
  for (const char* k : {"hbm_x2", "link_x2"})
    if (w.contains(k)) line(w[k]);
  for (const json& e : w.value("full_cube_rate", json::array())) line(e);
  return out;
}

}  // namespace probelab::sim
