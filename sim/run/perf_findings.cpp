#include "sim/run/perf_findings.h"

#include <algorithm>
#include <map>
#include <vector>

#include <fmt/format.h>

namespace probelab::sim {

using nlohmann::json;

namespace {

constexpr double kSlowShare = 0.9;       // a component below 90% of its nominal rate is slow
constexpr double kStragglerRatio = 1.25; // kernels > 1.25x the other ranks' median
constexpr double kCoreRatio = 1.25;           // a core's pace (busy per tile against its ops' median core)
constexpr std::uint64_t kCoreMinTiles = 16;   // below that, too few tiles to judge a core
constexpr double kLaunchRatio = 2.0;     // dispatch per task > 2x one descriptor fetch + dispatch

/// Names of `rank`'s ops with `bound`, sorted by `key` (descending), at most `n`.
json ops_of(const json& perf, std::uint32_t rank, const std::string& bound, const char* key, std::size_t n) {
  std::vector<const json*> v;
  for (const json& o : perf.at("ops"))
    if (o.value("rank", 0u) == rank && o.value("bound", "") == bound) v.push_back(&o);
  auto val = [key](const json* o) {
    if (o->contains("counters") && o->at("counters").contains(key)) return o->at("counters").value(key, std::uint64_t{0});
    return o->value(key, std::uint64_t{0});
  };
  std::stable_sort(v.begin(), v.end(), [&](const json* a, const json* b) { return val(a) > val(b); });
  json out = json::array();
  for (std::size_t i = 0; i < v.size() && i < n; ++i) out.push_back(v[i]->value("op", ""));
  return out;
}

}  // namespace

json perf_findings(const json& perf) {
  std::vector<json> found;
  const json& chip = perf.at("chip");
  const double ch_nominal = chip.value("hbm_channel_gbps", 0.0);
  const double link_nominal = chip.value("link_bandwidth_gbps", 0.0);
  for (const json& rk : perf.at("ranks")) {
    const auto rank = rk.value("rank", 0u);
    if (!rk.contains("hbm_channels")) continue;
    for (const json& ch : rk.at("hbm_channels")) {
      const double g = ch.value("gbps", 0.0);
      if (ch.value("bytes", std::uint64_t{0}) == 0 || ch_nominal <= 0 || g >= kSlowShare * ch_nominal) continue;
      const json ops = ops_of(perf, rank, "memory", "hbm_stall_cycles", 5);
      found.push_back({{"cause", "hbm_channel"},
                       {"rank", rank},
                       {"channel", ch.value("channel", 0u)},
                       {"gbps", g},
                       {"nominal_gbps", ch_nominal},
                       {"ops", ops},
                       {"score", 1.0 - g / ch_nominal},
                       {"evidence", fmt::format("rank {} HBM channel {} moved {} bytes at {:.1f} GB/s while busy, nominal "
                                                "{:.1f} GB/s; memory-bound ops: {}",
                                                rank, ch.value("channel", 0u), ch.value("bytes", std::uint64_t{0}), g,
                                                ch_nominal, ops.empty() ? "none" : fmt::format("{}", fmt::join(ops, ", ")))}});
    }
  }
  if (perf.contains("links"))
    for (const json& l : perf.at("links")) {
      const double g = l.value("achieved_gbps", 0.0);
      const double nominal = l.value("bandwidth_gbps", link_nominal);
      if (l.value("bytes", std::uint64_t{0}) == 0 || nominal <= 0 || g >= kSlowShare * nominal) continue;
      // The chip that sends on it (an HCCS link or a NIC) or, at a switch port, the chip it feeds.
      const auto rank = l.contains("src") ? l.value("src", 0u) : l.value("dst", 0u);
      const json ops = ops_of(perf, rank, "communication", "cycles", 5);
      json f = {{"cause", "link"}, {"rank", rank}, {"link", l.value("link", "")}, {"kind", l.value("kind", "")}};
      if (l.contains("src")) f["src"] = l.at("src");
      if (l.contains("dst")) f["dst"] = l.at("dst");
      f.update({{"gbps", g},
                {"nominal_gbps", nominal},
                {"ops", ops},
                {"score", 1.0 - g / nominal},
                {"evidence", fmt::format("link {} carried {} bytes at {:.1f} GB/s while busy, nominal {:.1f} GB/s; "
                                         "queued {} cycles; collectives: {}",
                                         l.value("link", ""), l.value("bytes", std::uint64_t{0}), g, nominal,
                                         l.value("wait_cycles", std::uint64_t{0}),
                                         ops.empty() ? "none" : fmt::format("{}", fmt::join(ops, ", ")))}});
      found.push_back(std::move(f));
    }
  // Straggler: the cores' busy cycles (Cube + Vector) per rank; data-parallel ranks do the same
  // work, so a rank that needs more busy cycles for it computes slower.
  std::map<std::uint32_t, std::uint64_t> busy, kernel, exposed;
  for (const json& rk : perf.at("ranks")) {
    const json& c = rk.at("counters");
    busy[rk.value("rank", 0u)] = c.value("cube_busy_cycles", std::uint64_t{0}) + c.value("vector_busy_cycles", std::uint64_t{0});
  }
  for (const json& st : perf.at("steps")) {
    const auto r = st.value("rank", 0u);
    kernel[r] += st.value("kernel_cycles", std::uint64_t{0});
    exposed[r] += st.value("exposed_collective_cycles", std::uint64_t{0});
  }
  if (busy.size() >= 2) {
    auto worst = std::max_element(busy.begin(), busy.end(), [](auto& a, auto& b) { return a.second < b.second; });
    std::vector<std::uint64_t> others;
    for (const auto& [r, k] : busy)
      if (r != worst->first) others.push_back(k);
    std::sort(others.begin(), others.end());
    const double median = others.size() % 2 ? static_cast<double>(others[others.size() / 2])
                                            : 0.5 * static_cast<double>(others[others.size() / 2 - 1] + others[others.size() / 2]);
    if (median > 0 && static_cast<double>(worst->second) > kStragglerRatio * median) {
      json waiting = json::array();
      std::uint64_t wait_sum = 0;
      for (const auto& [r, e] : exposed)
        if (r != worst->first) {
          waiting.push_back(r);
          wait_sum += e;
        }
      found.push_back({{"cause", "straggler"},
                       {"rank", worst->first},
                       {"busy_cycles", worst->second},
                       {"others_median_busy_cycles", median},
                       {"kernel_cycles", kernel[worst->first]},
                       {"waiting_ranks", waiting},
                       {"score", 1.0 - median / static_cast<double>(worst->second)},
                       {"evidence", fmt::format("rank {}'s cores needed {} Cube/Vector busy cycles, the other ranks {:.0f} "
                                                "(median) for the same work ({:.2f}x); its kernels ran {} cycles; the others "
                                                "waited {} cycles in collectives (exposed, summed)",
                                                worst->first, worst->second, median,
                                                static_cast<double>(worst->second) / median, kernel[worst->first],
                                                wait_sum)}});
    }
  }
  // Core: an AI core whose tiles took longer than its ops' median core needed for theirs.
  for (const json& rk : perf.at("ranks")) {
    if (!rk.contains("cores")) continue;
    const json* worst = nullptr;
    for (const json& c : rk.at("cores"))
      if (c.value("tiles", std::uint64_t{0}) >= kCoreMinTiles && (!worst || c.value("pace", 1.0) > worst->value("pace", 1.0)))
        worst = &c;
    if (!worst || worst->value("pace", 1.0) <= kCoreRatio) continue;
    const auto r = rk.value("rank", 0u);
    const double pace = worst->value("pace", 1.0);
    const json ops = ops_of(perf, r, "compute", "cycles", 5);
    found.push_back({{"cause", "core"},
                     {"rank", r},
                     {"core", worst->value("core", 0u)},
                     {"pace", pace},
                     {"busy_cycles", worst->value("busy_cycles", std::uint64_t{0})},
                     {"tiles", worst->value("tiles", std::uint64_t{0})},
                     {"ops", ops},
                     {"score", 1.0 - 1.0 / pace},
                     {"evidence", fmt::format("rank {} AI core {} needed {:.2f}x the Cube/Vector time per tile of its ops' "
                                              "median core over {} tiles ({} busy cycles); every op it takes part in waits "
                                              "for its tiles; compute-bound ops: {}",
                                              r, worst->value("core", 0u), pace, worst->value("tiles", std::uint64_t{0}),
                                              worst->value("busy_cycles", std::uint64_t{0}),
                                              ops.empty() ? "none" : fmt::format("{}", fmt::join(ops, ", ")))}});
  }
  // Launch: the mean fetch-and-dispatch time per task against one descriptor fetch and dispatch.
  const double nominal_dispatch = chip.value("dispatch_cycles_nominal", 0.0);
  for (const json& rk : perf.at("ranks")) {
    const auto r = rk.value("rank", 0u);
    const auto tasks = rk.value("tasks", std::uint64_t{0});
    if (tasks == 0 || nominal_dispatch <= 0) continue;
    const double mean = static_cast<double>(rk.at("counters").value("dispatch_cycles", std::uint64_t{0})) / static_cast<double>(tasks);
    if (mean <= kLaunchRatio * nominal_dispatch) continue;
    const json ops = ops_of(perf, r, "launch", "launch_cycles", 5);
    found.push_back({{"cause", "launch"},
                     {"rank", r},
                     {"ops", ops},
                     {"dispatch_cycles_per_task", mean},
                     {"nominal_cycles", nominal_dispatch},
                     {"score", 1.0 - nominal_dispatch / mean},
                     {"evidence", fmt::format("rank {}: {:.0f} cycles to fetch and dispatch each of its {} tasks, nominal "
                                              "{:.0f}; launch-bound ops: {}",
                                              r, mean, tasks, nominal_dispatch,
                                              ops.empty() ? "none" : fmt::format("{}", fmt::join(ops, ", ")))}});
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const json& a, const json& b) { return a.value("score", 0.0) > b.value("score", 0.0); });
  json out = json::array();
  for (auto& f : found) out.push_back(std::move(f));
  return out;
}

const std::vector<std::string>& perf_finding_causes() {
  static const std::vector<std::string> causes = {"hbm_channel", "link", "straggler", "core", "launch"};
  return causes;
}

}  // namespace probelab::sim
