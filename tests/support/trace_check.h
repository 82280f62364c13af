// Checks a written trace the way viewers read it. JSON: Chrome DevTools' trace model builds one
// tree per (pid, tid) from slices sorted by (ts, longest first) with double arithmetic, and skips
// a slice that starts inside the open one and ends after it; flows bind to the slice with the
// same (ts, pid, tid, cat). Perfetto protobuf: per track, SLICE_END closes the last open
// SLICE_BEGIN; timestamps never go back; every flow id has a start and one terminating slice.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

namespace probelab::test {

struct TraceCheck {
  std::uint64_t slices = 0, instants = 0, counters = 0, flow_events = 0, flows = 0;
  std::uint64_t dropped = 0;          // slices a viewer's nesting rule would skip
  std::uint64_t out_of_order = 0;     // a track's events not in (ts, longest first) file order
  std::uint64_t not_whole_ns = 0;     // timestamps that are not whole nanoseconds
  std::uint64_t unbound_flow_events = 0;
  std::uint64_t bad_flows = 0;        // not start .. end in order
  bool display_time_unit = false;     // Perfetto (older trace processors) reads it as the ts unit
  std::vector<std::string> problems;  // the first few, for messages
  bool ok() const {
    return dropped == 0 && out_of_order == 0 && not_whole_ns == 0 && unbound_flow_events == 0 && bad_flows == 0 &&
           !display_time_unit;
  }
  std::string summary() const {
    std::ostringstream s;
    s << slices << " slices, " << dropped << " dropped, " << out_of_order << " out of order, " << not_whole_ns
      << " not whole ns, " << unbound_flow_events << " unbound flow events, " << bad_flows << " bad flows";
    for (const auto& p : problems) s << "\n  " << p;
    return s.str();
  }
  void note(const std::string& p) {
    if (problems.size() < 8) problems.push_back(p);
  }
};

inline TraceCheck check_json_trace(const nlohmann::json& doc) {
  TraceCheck c;
  c.display_time_unit = doc.contains("displayTimeUnit");
  struct Ev {
    double ts, end;
    std::size_t seq;
  };
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<Ev>> tracks;
  std::set<std::tuple<double, std::int64_t, std::int64_t, std::string>> x_keys;
  std::map<std::int64_t, std::vector<std::string>> flow_phases;
  const auto& evs = doc.at("traceEvents");
  auto whole_ns = [&](double us) {
    const double ns = us * 1000.0;
    if (std::fabs(ns - std::round(ns)) > 1e-6 * std::max(1.0, std::fabs(ns))) ++c.not_whole_ns;
  };
  for (std::size_t i = 0; i < evs.size(); ++i) {
    const auto& e = evs[i];
    const std::string ph = e.value("ph", "");
    if (ph == "M") continue;
    const double ts = e.at("ts").get<double>();
    whole_ns(ts);
    const auto key = std::make_pair(e.value("pid", std::int64_t{0}), e.value("tid", std::int64_t{0}));
    if (ph == "X" || ph == "i") {
      const double dur = ph == "X" ? e.at("dur").get<double>() : 0.0;
      if (ph == "X") {
        ++c.slices;
        whole_ns(ts + dur);
        x_keys.insert({ts, key.first, key.second, e.value("cat", "")});
      } else {
        ++c.instants;
      }
      tracks[key].push_back({ts, ts + dur, i});
    } else if (ph == "C") {
      ++c.counters;
    } else if (ph == "s" || ph == "t" || ph == "f") {
      ++c.flow_events;
      flow_phases[e.at("id").get<std::int64_t>()].push_back(ph);
      if (!x_keys.count({ts, key.first, key.second, e.value("cat", "")})) {
        ++c.unbound_flow_events;
        c.note("flow event " + e.dump() + " binds no slice");
      }
    }
  }
  for (auto& [key, v] : tracks) {
    for (std::size_t i = 1; i < v.size(); ++i)
      if (v[i].ts < v[i - 1].ts || (v[i].ts == v[i - 1].ts && v[i].end > v[i - 1].end)) {
        ++c.out_of_order;
        c.note("track " + std::to_string(key.first) + "/" + std::to_string(key.second) + ": event " +
               std::to_string(v[i].seq) + " out of order");
      }
    std::stable_sort(v.begin(), v.end(), [](const Ev& a, const Ev& b) {
      return a.ts != b.ts ? a.ts < b.ts : a.end > b.end;
    });
    std::vector<double> open;  // ends
    for (const Ev& e : v) {
      while (!open.empty() && e.ts >= open.back()) open.pop_back();
      if (!open.empty() && e.end > open.back()) {
        ++c.dropped;
        c.note("track " + std::to_string(key.first) + "/" + std::to_string(key.second) + ": event " +
               std::to_string(e.seq) + " starts inside an open slice and ends after it");
        continue;
      }
      open.push_back(e.end);
    }
  }
  for (const auto& [id, phases] : flow_phases) {
    ++c.flows;
    bool good = phases.size() >= 2 && phases.front() == "s" && phases.back() == "f";
    for (std::size_t i = 1; i + 1 < phases.size(); ++i) good = good && phases[i] == "t";
    if (!good) {
      ++c.bad_flows;
      c.note("flow " + std::to_string(id) + " is not s, t..., f");
    }
  }
  return c;
}

}  // namespace probelab::test
