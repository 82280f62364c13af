#include "sim/run/perf_summary.h"

#include <algorithm>
#include <fstream>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "sim/scenario/scenario_error.h"

namespace probelab::sim {

namespace fs = std::filesystem;
using nlohmann::json;

json read_perf_report(const fs::path& run_dir) {
  const fs::path file = run_dir / "report.json";
  std::ifstream in(file);
  if (!in) throw ScenarioError(file.string(), 0, 0, "RUN", "an output directory of probelab run (report.json)");
  json r = json::parse(in, nullptr, false);
  if (r.is_discarded() || !r.is_object())
    throw ScenarioError(file.string(), 0, 0, "RUN", "a report.json in JSON", "malformed JSON");
  if (!r.contains("perf") || !r["perf"].is_object() || !r["perf"].contains("ops"))
    throw ScenarioError(file.string(), 0, 0, "perf", "a report with performance counters (a run of this probelab)",
                        "no perf section");
  return r;
}

json top_ops(const json& perf, int rank, std::size_t n) {
  std::vector<std::size_t> idx;
  const json& ops = perf.at("ops");
  for (std::size_t i = 0; i < ops.size(); ++i)
    if ((rank < 0 || ops[i].value("rank", 0) == rank) && ops[i].value("tasks", 0) > 0) idx.push_back(i);
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    return ops[a].value("cycles", std::uint64_t{0}) > ops[b].value("cycles", std::uint64_t{0});
  });
  json out = json::array();
  for (std::size_t i = 0; i < idx.size() && i < n; ++i) out.push_back(ops[idx[i]]);
  return out;
}

namespace {

double pct(double a, double b) { return b > 0 ? 100.0 * a / b : 0.0; }

std::string path_text(const json& path, std::uint64_t cycles) {
  std::string s;
  for (const char* k : {"compute", "memory", "communication", "capture", "launch"}) {
    const auto v = path.value(k, std::uint64_t{0});
    if (v == 0) continue;
    s += fmt::format("{}{} {:.0f}%", s.empty() ? "" : ", ", k, pct(static_cast<double>(v), static_cast<double>(cycles)));
  }
  return s.empty() ? "idle" : s;
}

}  // namespace

std::string perf_text(const json& r, const PerfTextOptions& opt) {
  const json& perf = r.at("perf");
  const json& sc = r.value("scenario", json::object());
  const json& chip = perf.at("chip");
  std::string out = fmt::format("{}: {} rank(s), {} step(s), {} cycles at {} MHz ({} cores, ridge {:.0f} FLOP/B)\n",
                                sc.value("name", "?"), sc.value("ranks", 1), sc.value("steps", 1),
                                r.value("cycles", json::object()).value("total", std::uint64_t{0}),
                                chip.value("clock_mhz", 0), chip.value("cores", 0), chip.value("ridge_flops_per_byte", 0.0));
  if (perf.contains("findings")) {
    if (perf["findings"].empty()) out += "findings: no slowed component (every HBM channel and link at its nominal rate, no straggler)\n";
    else out += "findings (best first):\n";
    for (const json& f : perf["findings"])
      out += fmt::format("  [{:.2f}] {}: {}\n", f.value("score", 0.0), f.value("cause", "?"), f.value("evidence", ""));
  }
  const int nranks = static_cast<int>(perf.at("ranks").size());
  for (int rank = 0; rank < nranks; ++rank) {
    if (opt.rank >= 0 && rank != opt.rank) continue;
    const json top = top_ops(perf, rank, opt.top);
    std::uint64_t total = 0;
    for (const json& o : perf.at("ops"))
      if (o.value("rank", 0) == rank) total += o.value("cycles", std::uint64_t{0});
    out += fmt::format("\nrank {}: top ops by time ({} cycles in ops)\n", rank, total);
    out += fmt::format("  {:>9} {:>5}  {:<13} {:<28} {:>7} {:>6} {:>6}  {}\n", "cycles", "%", "bound", "op", "GB/s",
                       "cube%", "mte%", "evidence");
    for (const json& o : top) {
      const json& u = o.at("utilization");
      out += fmt::format("  {:>9} {:>4.1f}%  {:<13} {:<28} {:>7.0f} {:>5.0f}% {:>5.0f}%  {}\n",
                         o.value("cycles", std::uint64_t{0}),
                         pct(o.value("cycles", 0.0), static_cast<double>(total)), o.value("bound", "?"),
                         o.value("op", "?"), o.value("hbm_gbps", 0.0), 100 * u.value("cube", 0.0),
                         100 * u.value("mte", 0.0), o.value("evidence", ""));
    }
    for (const json& st : perf.at("steps")) {
      if (st.value("rank", 0) != rank) continue;
      const auto cyc = st.value("cycles", std::uint64_t{0});
      out += fmt::format("  step {}: {} cycles, {}-bound ({}); collectives {} cycles, {} exposed\n",
                         st.value("step", 0), cyc, st.value("bound", "?"), path_text(st.at("critical_path"), cyc),
                         st.value("collective_cycles", std::uint64_t{0}),
                         st.value("exposed_collective_cycles", std::uint64_t{0}));
    }
    const json& rk = perf.at("ranks").at(static_cast<std::size_t>(rank));
    const json& d = rk.at("derived");
    out += fmt::format("  utilization over the run: cube {:.1f}%, vector {:.1f}%, mte {:.1f}%; cores' HBM {:.1f} GB/s\n",
                       100 * d.value("cube_utilization", 0.0), 100 * d.value("vector_utilization", 0.0),
                       100 * d.value("mte_utilization", 0.0), d.value("hbm_gbps", 0.0));
  }
  if (perf.contains("links") && !perf["links"].empty()) {
    out += "\nlinks (per direction):\n";
    for (const json& l : perf["links"]) {
      if (l.value("bytes", std::uint64_t{0}) == 0) continue;
      out += fmt::format("  {}: {} bytes in {} transfers, busy {:.1f}% of the run, {:.1f} GB/s while busy "
                         "(link {:.0f} GB/s), queued {} cycles\n",
                         l.value("link", ""), l.value("bytes", std::uint64_t{0}),
                         l.value("transfers", std::uint64_t{0}), 100 * l.value("utilization", 0.0),
                         l.value("achieved_gbps", 0.0), l.value("bandwidth_gbps", 0.0),
                         l.value("wait_cycles", std::uint64_t{0}));
    }
  }
  return out;
}

}  // namespace probelab::sim
