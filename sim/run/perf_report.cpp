#include "sim/run/perf_report.h"

#include <algorithm>
#include <array>
#include <map>
#include <span>

#include <fmt/format.h>

#include "chip_model/clock.h"
#include "probes/insertion_pass.h"
#include "sim/run/json_members.h"
#include "sim/run/perf_findings.h"

namespace probelab::sim {

using nlohmann::json;

namespace {

struct ChipRates {
  double mhz = 1;
  std::uint32_t cores = 1;
  double macs_per_core = 1;    // Cube MACs per cycle per core
  double hbm_per_cycle = 1;    // HBM bytes per cycle, all channels
  double mte_per_core = 1;     // MTE port bytes per cycle
  double peak(std::uint32_t c) const { return 2.0 * macs_per_core * c; }
  double bandwidth(std::uint32_t c) const { return std::min(hbm_per_cycle, mte_per_core * c); }
};

ChipRates rates_of(const chip::ChipConfig& cfg) {
  ChipRates r;
  r.mhz = cfg.clock_mhz;
  r.cores = cfg.num_cores;
  r.macs_per_core = static_cast<double>(cfg.cube_m) * cfg.cube_n * cfg.cube_k;
  r.hbm_per_cycle = cfg.hbm_bandwidth_gbps * 1e3 / cfg.clock_mhz;
  r.mte_per_core = cfg.mte_bytes_per_cycle;
  return r;
}

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }
/// GB/s of `bytes` moved in `cycles` at `mhz`.
double gbps(double bytes, double cycles, double mhz) { return cycles > 0 ? bytes * mhz / (cycles * 1e3) : 0.0; }

using OpAcc = PerfLedger::OpTotals;

struct Interval {
  std::uint64_t b, e;
  int cat;  // 0 compute kernel, 1 memory kernel, 2 collective, 3 capture
};

constexpr std::array<const char*, 5> kPathNames = {"compute", "memory", "communication", "capture", "launch"};
/// kPathNames indices in the order of their names (the order of a JSON object's members).
constexpr std::array<std::size_t, 5> kPathKeyOrder = {3, 2, 0, 4, 1};

json counters_json(const chip::PerfMonitor::Counters& c) {
  probes::PmuSnapshot s;
  s.counters = c;
  return probes::pmu_json(s);
}

/// Utilization, bandwidth and intensity of a counter set over its own kPmuCycle.
json derived(const chip::PerfMonitor::Counters& c, const ChipRates& r) {
  const double cyc = static_cast<double>(c[spec::kPmuCycle]);
  const double slots = cyc * r.cores;
  const double bytes = static_cast<double>(c[spec::kPmuHbmReadBytes] + c[spec::kPmuHbmWriteBytes]);
  JsonMembers m;  // made per step and per rank
  m.put("cube_utilization", ratio(static_cast<double>(c[spec::kPmuCubeBusy]), slots))
      .put("hbm_gbps", gbps(bytes, cyc, r.mhz))
      .put("intensity", ratio(static_cast<double>(c[spec::kPmuCubeFlops]), bytes))
      .put("mte_utilization", ratio(static_cast<double>(c[spec::kPmuMteBusy]), slots))
      .put("vector_utilization", ratio(static_cast<double>(c[spec::kPmuVectorBusy]), slots));
  return m.done();
}

// Why a memory-bound op (MTE busy longer than Cube and Vector) is memory-bound, against the
// roofline: below the ridge its HBM bytes alone say so; at or above it, the MTE also moved the
// L2 hits of its tiles (operands re-read by every core, which the HBM intensity does not count)
// and waited on HBM (the stall cycles above).
std::string memory_intensity_text(const OpAcc& a, double intensity, double ridge) {
  if (intensity < ridge) return fmt::format("intensity {:.1f} FLOP/B < ridge {:.0f}", intensity, ridge);
  const double hbm = static_cast<double>(a.rd + a.wr), l2 = static_cast<double>(a.l2);
  std::string why = fmt::format("intensity {:.1f} FLOP/B of HBM traffic >= ridge {:.0f}, yet the MTE time exceeds the "
                                "compute time: ", intensity, ridge);
  if (a.l2 > 0)
    return why + fmt::format("its tiles also read {} bytes from L2 ({:.1f}x its HBM bytes), {:.1f} FLOP per byte the MTE "
                             "moved", a.l2, ratio(l2, hbm), ratio(static_cast<double>(a.flops), hbm + l2));
  return why + fmt::format("beyond its bytes' port time the MTE waited {} cycles on HBM", a.stall);
}

json op_entry(const graph::Op& op, std::uint32_t rank, const OpAcc& a, const ChipRates& r, std::string& bound) {
  const bool collective = a.collective > 0;
  const std::uint64_t cycles = a.cycles + a.collective;
  const std::uint32_t cores = std::max<std::uint32_t>(a.cores, 1);
  const double bytes = static_cast<double>(a.rd + a.wr);
  const double cyc = static_cast<double>(cycles);
  const double per_core[3] = {static_cast<double>(a.cube) / cores, static_cast<double>(a.vec) / cores,
                              static_cast<double>(a.mte) / cores};
  const double compute_cycles = ratio(static_cast<double>(a.flops), r.peak(cores));
  const double memory_cycles = ratio(bytes, r.bandwidth(cores));
  const double roof = std::max(compute_cycles, memory_cycles);
  std::string evidence;
  if (a.tasks == 0) {
    bound = "none";
    evidence = "not executed";
  } else if (a.launch > cycles) {
    bound = "launch";
    evidence = fmt::format("{} cycles of host submission and dispatch before its tasks vs {} cycles of work", a.launch,
                           cycles);
  } else if (a.probe > cycles) {
    bound = "capture";
    evidence = fmt::format("{} cycles of probe tasks vs {} cycles of work", a.probe, cycles);
  } else if (collective) {
    bound = "communication";
    evidence = fmt::format("collective: {} cycles on the links (waiting for peers included)", a.collective);
  } else {
    const bool mem = per_core[2] >= std::max(per_core[0], per_core[1]);
    bound = mem ? "memory" : "compute";
    const double ridge = ratio(r.peak(cores), r.bandwidth(cores));
    const double intensity = ratio(static_cast<double>(a.flops), bytes);
    if (mem)
      evidence = fmt::format("MTE busy {:.0f}% of the op's time per core vs Cube {:.0f}%, Vector {:.0f}%; HBM {:.0f} GB/s "
                             "(peak {:.0f}); {} of its MTE cycles stalled on HBM; {}",
                             100 * ratio(per_core[2], cyc), 100 * ratio(per_core[0], cyc), 100 * ratio(per_core[1], cyc),
                             gbps(bytes, cyc, r.mhz), r.bandwidth(cores) * r.mhz / 1e3, a.stall,
                             memory_intensity_text(a, intensity, ridge));
    else
      evidence = fmt::format("{} busy {:.0f}% of the op's time per core vs MTE {:.0f}%; intensity {:.1f} FLOP/B "
                             "(ridge {:.0f}); {:.0f}% of the roofline",
                             per_core[0] >= per_core[1] ? "Cube" : "Vector",
                             100 * ratio(std::max(per_core[0], per_core[1]), cyc), 100 * ratio(per_core[2], cyc),
                             intensity, ridge, 100 * ratio(roof, cyc));
  }
  JsonMembers counters;
  counters.put("cube_busy_cycles", a.cube)
      .put("flops", a.flops)
      .put("hbm_read_bytes", a.rd)
      .put("hbm_stall_cycles", a.stall)
      .put("hbm_write_bytes", a.wr)
      .put("l2_read_bytes", a.l2)
      .put("mte_busy_cycles", a.mte)
      .put("vector_busy_cycles", a.vec);
  JsonMembers roofline;
  roofline.put("bound_cycles", roof)
      .put("compute_cycles", compute_cycles)
      .put("efficiency", ratio(roof, cyc))
      .put("memory_cycles", memory_cycles);
  JsonMembers utilization;
  utilization.put("cube", ratio(per_core[0], cyc)).put("mte", ratio(per_core[2], cyc)).put("vector", ratio(per_core[1], cyc));
  JsonMembers e;
  e.put("bound", bound)
      .put("cores", a.cores)
      .put("counters", counters.done())
      .put("cycles", cycles)
      .put("evidence", std::move(evidence))
      .put("hbm_gbps", gbps(bytes, cyc, r.mhz))
      .put("intensity", ratio(static_cast<double>(a.flops), bytes))
      .put("kind", collective ? "collective" : "kernel")
      .put("launch_cycles", a.launch)
      .put("op", op.name)
      .put("probe_cycles", a.probe)
      .put("rank", rank)
      .put("roofline", roofline.done())
      .put("tasks", a.tasks)
      .put("type", op.type)
      .put("utilization", utilization.done());
  return e.done();
}

/// Splits [b, e) over the categories of `iv` (kernels first, then collectives, then capture;
/// uncovered time is launch). Returns cycles per kPathNames entry plus the collective union and
/// its part overlapped by kernels.
struct PathSplit {
  std::array<std::uint64_t, 5> path{};
  std::uint64_t kernel = 0, collective = 0, overlapped = 0;
};

PathSplit split_step(std::uint64_t b, std::uint64_t e, std::span<const Interval> iv) {
  std::vector<std::pair<std::uint64_t, int>> ev;  // (time, +cat+1 or -(cat+1))
  for (const Interval& i : iv) {
    const std::uint64_t s = std::max(i.b, b), t = std::min(i.e, e);
    if (s >= t) continue;
    ev.emplace_back(s, i.cat + 1);
    ev.emplace_back(t, -(i.cat + 1));
  }
  std::sort(ev.begin(), ev.end());
  PathSplit out;
  std::array<int, 4> active{};
  std::uint64_t prev = b;
  auto charge = [&](std::uint64_t until) {
    const std::uint64_t d = until - prev;
    if (d == 0) return;
    const bool kern = active[0] + active[1] > 0;
    if (kern) out.path[active[1] >= active[0] ? 1 : 0] += d;
    else if (active[2]) out.path[2] += d;
    else if (active[3]) out.path[3] += d;
    else out.path[4] += d;
    if (kern) out.kernel += d;
    if (active[2]) out.collective += d;
    if (active[2] && kern) out.overlapped += d;
  };
  for (const auto& [t, c] : ev) {
    charge(t);
    prev = t;
    if (c > 0) ++active[static_cast<std::size_t>(c - 1)];
    else --active[static_cast<std::size_t>(-c - 1)];
  }
  charge(e);
  return out;
}

}  // namespace

json perf_partition(const chip::ChipConfig& cfg, const std::map<std::uint32_t, PerfRank>& ranks,
                    const std::vector<PerfLink>& links) {
  const ChipRates r = rates_of(cfg);
  json out;
  json ops = json::array(), steps = json::array(), rank_list = json::array();
  const PerfLedger none;
  for (const auto& [rank, pr] : ranks) {
    const PerfLedger& led = pr.ledger ? *pr.ledger : none;
    std::vector<Interval> iv;
    for (const PerfLedger::TaskSpan& t : led.task_spans()) iv.push_back({t.begin, t.end, t.collective ? 2 : 3});
    std::map<std::uint32_t, std::string> bound_of;
    std::map<std::uint32_t, std::string> name_of;
    for (std::uint32_t id : pr.graph->topo_order()) {
      const graph::Op& op = pr.graph->op(id);
      if (probes::is_probe_op(op)) continue;
      std::string bound;
      ops.push_back(op_entry(op, rank, led.op(id), r, bound));
      bound_of[id] = bound;
      name_of[id] = op.name;
    }
    for (const PerfLedger::KernelSpan& k : led.kernels())
      iv.push_back({k.begin, k.end, bound_of[k.op_id] == "memory" ? 1 : 0});
    // Per step, only the intervals that can meet it: by start, within the longest one's length.
    std::stable_sort(iv.begin(), iv.end(), [](const Interval& x, const Interval& y) { return x.b < y.b; });
    std::uint64_t longest = 0;
    for (const Interval& i : iv) longest = std::max(longest, i.e - i.b);
    std::map<std::uint32_t, const probes::PerfProfiler::StepCounters*> counters_of;  // step -> its counters (the last recorded)
    if (pr.profiler)
      for (const auto& sc : pr.profiler->steps()) counters_of[sc.step] = &sc;

    for (std::size_t k = 0; k < pr.steps.size(); ++k) {
      const auto [b, e] = pr.steps[k];
      const std::uint32_t step = pr.first_step + static_cast<std::uint32_t>(k);
      const auto from = std::lower_bound(iv.begin(), iv.end(), b > longest ? b - longest : 0,
                                         [](const Interval& i, std::uint64_t v) { return i.b < v; });
      const auto to = std::lower_bound(from, iv.end(), e, [](const Interval& i, std::uint64_t v) { return i.b < v; });
      const PathSplit sp = split_step(b, e, std::span<const Interval>(from, to));
      std::size_t best = 0;
      for (std::size_t c = 0; c < kPathNames.size(); ++c)
        if (sp.path[c] > sp.path[best]) best = c;
      JsonMembers path;
      for (std::size_t c : kPathKeyOrder) path.put(kPathNames[c], sp.path[c]);
      const PerfLedger::Top* top = led.top(step);
      json counters = nullptr, der = nullptr;
      if (const auto c = counters_of.find(step); c != counters_of.end()) {
        counters = probes::pmu_json(c->second->delta);
        der = derived(c->second->delta.counters, r);
      }
      json top_op;
      if (top) {
        const auto name = name_of.find(top->op_id);
        const auto bound = bound_of.find(top->op_id);
        JsonMembers t;
        t.put("bound", bound == bound_of.end() ? std::string() : bound->second)
            .put("cycles", top->cycles)
            .put("op", name == name_of.end() ? led.op_name(top->op_id) : name->second);
        top_op = t.done();
      }
      JsonMembers st;
      st.put("bound", kPathNames[best])
          .put("collective_cycles", sp.collective)
          .put("counters", std::move(counters))
          .put("critical_path", path.done())
          .put("cycles", e - b)
          .put("derived", std::move(der))
          .put("exposed_collective_cycles", sp.collective - sp.overlapped)
          .put("kernel_cycles", sp.kernel)
          .put("overlapped_collective_cycles", sp.overlapped)
          .put("rank", rank)
          .put("step", step)
          .put("top_op", std::move(top_op));
      steps.push_back(st.done());
    }
    chip::PerfMonitor::Counters c = pr.counters;
    c[spec::kPmuCycle] = pr.cycles;
    json channels = json::array();
    const chip::ChipClock clk(cfg.clock_mhz);
    for (std::size_t ch = 0; ch < pr.hbm_channels.size(); ++ch) {
      const auto [bytes, busy] = pr.hbm_channels[ch];
      JsonMembers m;
      m.put("busy_cycles", clk.ps_to_cycles(busy))
          .put("bytes", bytes)
          .put("channel", ch)
          .put("gbps", busy ? static_cast<double>(bytes) * 1e3 / static_cast<double>(busy) : 0.0);
      channels.push_back(m.done());
    }
    json core_list = json::array();
    if (pr.cores)
      for (const auto& [core, l] : *pr.cores) {
        JsonMembers m;
        m.put("busy_cycles", clk.ps_to_cycles(l.busy_ps))
            .put("core", core)
            .put("pace", l.expected_ps > 0 ? static_cast<double>(l.busy_ps) / l.expected_ps : 1.0)
            .put("tiles", l.tiles);
        core_list.push_back(m.done());
      }
    JsonMembers m;
    m.put("cores", std::move(core_list))
        .put("counters", counters_json(c))
        .put("cycles", pr.cycles)
        .put("derived", derived(c, r))
        .put("hbm_channels", std::move(channels))
        .put("rank", rank)
        .put("tasks", led.task_count());
    rank_list.push_back(m.done());
  }
  out["ops"] = std::move(ops);
  out["steps"] = std::move(steps);
  out["ranks"] = std::move(rank_list);
  json lj = json::array();
  const chip::ChipClock clock(cfg.clock_mhz);
  for (const PerfLink& l : links) {
    json j = {{"id", l.id}, {"link", l.name}, {"kind", l.kind}};
    if (l.src) j["src"] = *l.src;
    if (l.dst) j["dst"] = *l.dst;
    j.update({{"bandwidth_gbps", l.nominal_gbps},
              {"bytes", l.bytes},
              {"transfers", l.transfers},
              {"busy_cycles", clock.ps_to_cycles(l.busy_ps)},
              {"wait_cycles", clock.ps_to_cycles(l.wait_ps)},
              {"busy_ps", l.busy_ps}});
    lj.push_back(std::move(j));
  }
  out["links"] = std::move(lj);
  return out;
}

json perf_section(const chip::ChipConfig& cfg, std::vector<json> parts, std::uint64_t run_ps) {
  const ChipRates r = rates_of(cfg);
  json out;
  out["chip"] = {{"clock_mhz", cfg.clock_mhz},
                 {"cores", cfg.num_cores},
                 {"peak_flops_per_cycle", r.peak(r.cores)},
                 {"hbm_bytes_per_cycle", r.bandwidth(r.cores)},
                 {"ridge_flops_per_byte", ratio(r.peak(r.cores), r.bandwidth(r.cores))},
                 {"hbm_channel_gbps", cfg.hbm_bandwidth_gbps / cfg.hbm_channels},
                 {"link_bandwidth_gbps", cfg.link_bandwidth_gbps},
                 {"dispatch_cycles_nominal",
                  (static_cast<std::uint64_t>(cfg.task_dispatch_ns + cfg.hbm_latency_ns) * cfg.clock_mhz + 999) / 1000}};
  // Each partition's ranks and links, merged in rank (link id) order.
  for (const char* key : {"ops", "steps", "ranks", "links"}) {
    // (sort key, entry), the key read once per entry
    std::vector<std::pair<std::uint64_t, json>> keyed;
    const char* by = std::string_view(key) == "links" ? "id" : "rank";
    for (json& p : parts)
      for (json& e : p.at(key)) keyed.emplace_back(e.at(by).get<std::uint64_t>(), std::move(e));
    std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    json::array_t all;
    all.reserve(keyed.size());
    for (auto& [k, e] : keyed) all.push_back(std::move(e));
    out[key] = json(std::move(all));
  }
  for (json& l : out["links"]) {
    const auto busy = l.at("busy_ps").get<std::uint64_t>();
    l["utilization"] = ratio(static_cast<double>(busy), static_cast<double>(run_ps));
    l["achieved_gbps"] = busy ? static_cast<double>(l.at("bytes").get<std::uint64_t>()) * 1e3 / static_cast<double>(busy) : 0.0;
    l.erase("busy_ps");
    l.erase("id");
  }
  out["findings"] = perf_findings(out);
  return out;
}

std::string perf_ops_csv(const json& perf) {
  std::string out =
      "rank,op,type,kind,tasks,cycles,cores,cube_busy_cycles,vector_busy_cycles,mte_busy_cycles,hbm_read_bytes,"
      "hbm_write_bytes,l2_read_bytes,flops,hbm_stall_cycles,hbm_gbps,cube_util,vector_util,mte_util,intensity,"
      "roofline_cycles,roofline_efficiency,launch_cycles,probe_cycles,bound\n";
  auto quoted = [](const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  };
  for (const json& o : perf.at("ops")) {
    const json& c = o.at("counters");
    const json& u = o.at("utilization");
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3f},{:.4f},{:.4f},{:.4f},{:.3f},{:.1f},{:.4f},{},{},{}\n",
                       o.at("rank").get<std::uint32_t>(), quoted(o.at("op").get<std::string>()),
                       quoted(o.at("type").get<std::string>()), o.at("kind").get<std::string>(),
                       o.at("tasks").get<std::uint64_t>(), o.at("cycles").get<std::uint64_t>(),
                       o.at("cores").get<std::uint32_t>(), c.at("cube_busy_cycles").get<std::uint64_t>(),
                       c.at("vector_busy_cycles").get<std::uint64_t>(), c.at("mte_busy_cycles").get<std::uint64_t>(),
                       c.at("hbm_read_bytes").get<std::uint64_t>(), c.at("hbm_write_bytes").get<std::uint64_t>(),
                       c.at("l2_read_bytes").get<std::uint64_t>(), c.at("flops").get<std::uint64_t>(),
                       c.at("hbm_stall_cycles").get<std::uint64_t>(), o.at("hbm_gbps").get<double>(),
                       u.at("cube").get<double>(), u.at("vector").get<double>(), u.at("mte").get<double>(),
                       o.at("intensity").get<double>(), o.at("roofline").at("bound_cycles").get<double>(),
                       o.at("roofline").at("efficiency").get<double>(), o.at("launch_cycles").get<std::uint64_t>(),
                       o.at("probe_cycles").get<std::uint64_t>(), o.at("bound").get<std::string>());
  }
  return out;
}

}  // namespace probelab::sim
