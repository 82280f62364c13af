// Trace::write_perfetto: the layout of trace_layout.cpp as Perfetto TracePackets.
#include <algorithm>
#include <map>
#include <ostream>
#include <string>
#include <stdexcept>
#include <tuple>

#include "chip_model/detail/trace_layout.h"
#include "chip_model/trace.h"
#include "perfetto_trace.pb.h"

namespace probelab::chip {
namespace {

namespace pp = perfetto::protos;

constexpr std::uint32_t kSequence = 1;

std::string fmt_pid(std::uint32_t pid) { return "pid " + std::to_string(pid); }

// Track uuids: processes 1 + pid << 20, their tracks and counters below that. Deterministic and
// unique for pids and track counts far beyond what a run has.
std::uint64_t process_uuid(std::uint32_t pid) { return (std::uint64_t{pid} + 1) << 20; }

void annotate(pp::TrackEvent& te, const Trace::Args& args) {
  for (const auto& [k, v] : args) {
    pp::DebugAnnotation* a = te.add_debug_annotations();
    a->set_name(k);
    if (const auto* i = std::get_if<std::int64_t>(&v)) a->set_int_value(*i);
    else if (const auto* u = std::get_if<std::uint64_t>(&v)) a->set_uint_value(*u);
    else if (const auto* d = std::get_if<double>(&v)) a->set_double_value(*d);
    else a->set_string_value(std::get<std::string>(v));
  }
}

struct Timed {
  std::uint64_t ts;
  std::size_t stream;  // track or counter index: ties keep each stream's own order
  std::size_t seq;
  pp::TracePacket packet;
};

}  // namespace

void Trace::write_perfetto(std::ostream& out) const {
  const detail::Layout L = detail::lay_out(*this);
  pp::Trace trace;
  bool first = true;
  auto start_packet = [&](pp::TracePacket& p) {
    p.set_trusted_packet_sequence_id(kSequence);
    if (first) p.set_sequence_flags(1);
    first = false;
  };
  // Processes: every pid with a track, counter or name.
  std::map<std::uint32_t, std::string> procs = process_names_;
  for (const auto& t : L.tracks) procs.emplace(t.pid, fmt_pid(t.pid));
  for (const auto& c : L.counters) procs.emplace(c.pid, fmt_pid(c.pid));
  for (const auto& [pid, name] : procs) {
    pp::TracePacket* p = trace.add_packet();
    start_packet(*p);
    pp::TrackDescriptor* d = p->mutable_track_descriptor();
    d->set_uuid(process_uuid(pid));
    d->mutable_process()->set_pid(static_cast<std::int32_t>(pid));
    d->mutable_process()->set_process_name(name);
    d->set_child_ordering(pp::TrackDescriptor::EXPLICIT);
  }
  std::vector<std::uint64_t> track_uuid(L.tracks.size()), counter_uuid(L.counters.size());
  for (std::size_t i = 0; i < L.tracks.size(); ++i) {
    const auto& t = L.tracks[i];
    track_uuid[i] = process_uuid(t.pid) + static_cast<std::uint64_t>(t.tid);
    pp::TracePacket* p = trace.add_packet();
    start_packet(*p);
    pp::TrackDescriptor* d = p->mutable_track_descriptor();
    d->set_uuid(track_uuid[i]);
    d->set_parent_uuid(process_uuid(t.pid));
    d->set_name(t.name);
    d->set_sibling_order_rank(t.tid);
  }
  std::map<std::uint32_t, int> next_counter;
  for (std::size_t i = 0; i < L.counters.size(); ++i) {
    const auto& c = L.counters[i];
    const int k = next_counter[c.pid]++;
    counter_uuid[i] = process_uuid(c.pid) + (1u << 19) + static_cast<std::uint64_t>(k);
    pp::TracePacket* p = trace.add_packet();
    start_packet(*p);
    pp::TrackDescriptor* d = p->mutable_track_descriptor();
    d->set_uuid(counter_uuid[i]);
    d->set_parent_uuid(process_uuid(c.pid));
    d->set_name(c.name + " " + c.unit);
    d->mutable_counter()->set_unit_name(c.unit);
    d->set_sibling_order_rank((1 << 20) + k);
  }

  // Events, per track in nesting order (begin, children, end), merged by time.
  std::vector<Timed> timed;
  for (std::size_t ti = 0; ti < L.tracks.size(); ++ti) {
    const auto& items = L.tracks[ti].items;
    std::size_t seq = 0;
    auto emit = [&](std::uint64_t ts, pp::TrackEvent::Type type, const detail::LaidItem* it) {
      Timed t{ts, ti, seq++, {}};
      t.packet.set_timestamp(ts);
      pp::TrackEvent* te = t.packet.mutable_track_event();
      te->set_type(type);
      te->set_track_uuid(track_uuid[ti]);
      if (it) {
        const Event& e = *it->event;
        te->set_name(e.name);
        if (!e.category.empty()) te->add_categories(e.category);
        annotate(*te, e.args);
        for (const auto id : it->flows_out) te->add_flow_ids(id);
        for (const auto id : it->flows_end) te->add_terminating_flow_ids(id);
      }
      timed.push_back(std::move(t));
    };
    std::vector<std::uint64_t> open;  // ends of open slices
    for (const auto& it : items) {
      while (!open.empty() && open.back() <= it.start_ns) {
        emit(open.back(), pp::TrackEvent::TYPE_SLICE_END, nullptr);
        open.pop_back();
      }
      if (it.event->phase == 'X') {
        emit(it.start_ns, pp::TrackEvent::TYPE_SLICE_BEGIN, &it);
        open.push_back(it.end_ns);
      } else {
        emit(it.start_ns, pp::TrackEvent::TYPE_INSTANT, &it);
      }
    }
    while (!open.empty()) {
      emit(open.back(), pp::TrackEvent::TYPE_SLICE_END, nullptr);
      open.pop_back();
    }
  }
  for (std::size_t ci = 0; ci < L.counters.size(); ++ci) {
    std::size_t seq = 0;
    for (const auto& [ns, v] : L.counters[ci].samples) {
      Timed t{ns, L.tracks.size() + ci, seq++, {}};
      t.packet.set_timestamp(ns);
      pp::TrackEvent* te = t.packet.mutable_track_event();
      te->set_type(pp::TrackEvent::TYPE_COUNTER);
      te->set_track_uuid(counter_uuid[ci]);
      te->set_double_counter_value(v);
      timed.push_back(std::move(t));
    }
  }
  std::stable_sort(timed.begin(), timed.end(), [](const Timed& a, const Timed& b) {
    return std::tie(a.ts, a.stream, a.seq) < std::tie(b.ts, b.stream, b.seq);
  });
  for (Timed& t : timed) {
    t.packet.set_trusted_packet_sequence_id(kSequence);
    *trace.add_packet() = std::move(t.packet);
  }
  if (!trace.SerializeToOstream(&out)) throw std::runtime_error("cannot serialize the Perfetto trace");
}

}  // namespace probelab::chip
