// Checks a Perfetto protobuf trace written by chip::Trace::write_perfetto (see trace_check.h).
// Needs the generated perfetto_trace.pb.h (the test target adds build/chip_model to its includes).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "perfetto_trace.pb.h"
#include "tests/support/trace_check.h"

namespace probelab::test {

inline TraceCheck check_perfetto_trace(const std::string& bytes) {
  namespace pp = perfetto::protos;
  TraceCheck c;
  pp::Trace t;
  if (!t.ParseFromString(bytes)) {
    c.note("not a perfetto.protos.Trace");
    ++c.bad_flows;
    return c;
  }
  std::set<std::uint64_t> described;
  std::map<std::uint64_t, std::vector<std::uint64_t>> open;  // track -> begin timestamps
  std::map<std::uint64_t, int> flow_seen, flow_ended;
  std::uint64_t last_ts = 0;
  for (const auto& p : t.packet()) {
    if (p.has_track_descriptor()) {
      described.insert(p.track_descriptor().uuid());
      continue;
    }
    if (!p.has_track_event()) continue;
    const auto& te = p.track_event();
    if (p.timestamp() < last_ts) {
      ++c.out_of_order;
      c.note("packet at " + std::to_string(p.timestamp()) + " after " + std::to_string(last_ts));
    }
    last_ts = std::max(last_ts, p.timestamp());
    if (!described.count(te.track_uuid())) {
      ++c.dropped;
      c.note("event on undescribed track " + std::to_string(te.track_uuid()));
    }
    switch (te.type()) {
      case pp::TrackEvent::TYPE_SLICE_BEGIN:
        ++c.slices;
        open[te.track_uuid()].push_back(p.timestamp());
        for (const auto id : te.flow_ids()) ++flow_seen[id];
        for (const auto id : te.terminating_flow_ids()) ++flow_seen[id], ++flow_ended[id];
        break;
      case pp::TrackEvent::TYPE_SLICE_END: {
        auto& st = open[te.track_uuid()];
        if (st.empty()) {
          ++c.dropped;
          c.note("SLICE_END without an open slice on track " + std::to_string(te.track_uuid()));
        } else {
          st.pop_back();
        }
        break;
      }
      case pp::TrackEvent::TYPE_INSTANT: ++c.instants; break;
      case pp::TrackEvent::TYPE_COUNTER: ++c.counters; break;
      default: break;
    }
  }
  for (const auto& [track, st] : open)
    if (!st.empty()) {
      c.dropped += st.size();
      c.note("slices left open on track " + std::to_string(track));
    }
  for (const auto& [id, n] : flow_seen) {
    ++c.flows;
    if (n < 2 || flow_ended[id] != 1) {
      ++c.bad_flows;
      c.note("flow " + std::to_string(id) + " on " + std::to_string(n) + " slices, ended " +
             std::to_string(flow_ended[id]) + " times");
    }
  }
  return c;
}

}  // namespace probelab::test
