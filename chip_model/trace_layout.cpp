#include "chip_model/detail/trace_layout.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "chip_model/innermost_slices.h"

namespace probelab::chip::detail {
namespace {

struct Raw {
  std::size_t seq;  // index in events()
  std::uint64_t start_ns, end_ns;
};

// Places each slice on the first lane where it nests (Chrome's tree builder rule: a slice that
// starts inside the open one must end inside it). Returns the lane of each item.
std::vector<std::size_t> assign_lanes(const std::vector<Raw>& items) {
  std::vector<std::vector<std::uint64_t>> open;  // per lane: stack of open ends
  std::vector<std::size_t> lane(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    const Raw& r = items[i];
    std::size_t l = 0;
    for (;; ++l) {
      if (l == open.size()) open.emplace_back();
      auto& st = open[l];
      while (!st.empty() && st.back() <= r.start_ns) st.pop_back();
      if (st.empty() || r.end_ns <= st.back()) break;
    }
    open[l].push_back(r.end_ns);
    lane[i] = l;
  }
  return lane;
}

std::vector<LaidCounter> counters_of(const Trace& t) {
  std::map<std::pair<std::uint32_t, std::string>, LaidCounter> by;
  std::vector<std::size_t> idx;
  const auto& ev = t.events();
  for (std::size_t i = 0; i < ev.size(); ++i)
    if (ev[i].phase == 'C') idx.push_back(i);
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return ev[a].ts_ps < ev[b].ts_ps; });
  for (const std::size_t i : idx) {
    const Trace::Event& e = ev[i];
    LaidCounter& c = by[{e.pid, e.name}];
    c.pid = e.pid;
    c.name = e.name;
    c.unit = e.track;
    const std::uint64_t ns = ns_of(e.ts_ps);
    if (!c.samples.empty() && c.samples.back().first == ns)
      c.samples.back().second = e.value;  // one value per instant: the last one recorded
    else
      c.samples.emplace_back(ns, e.value);
  }
  const double bin_ns = static_cast<double>(t.rate_bin_ps()) / 1000.0;
  for (const auto& [key, r] : t.rates()) {
    LaidCounter& c = by[key];
    c.pid = key.first;
    c.name = key.second;
    c.unit = r.unit;
    auto put = [&](std::uint64_t bin, double v) {
      const std::uint64_t ns = ns_of(bin * t.rate_bin_ps());
      if (!c.samples.empty() && c.samples.back().second == v) return;
      if (!c.samples.empty() && c.samples.back().first == ns)
        c.samples.back().second = v;
      else
        c.samples.emplace_back(ns, v);
    };
    std::uint64_t next = 0;
    bool any = false;
    for (const auto& [bin, amount] : r.bins) {
      if (any && bin != next) put(next, 0.0);
      put(bin, static_cast<double>(amount) / bin_ns);
      next = bin + 1;
      any = true;
    }
    if (any) put(next, 0.0);
  }
  std::vector<LaidCounter> out;
  for (auto& [k, c] : by) out.push_back(std::move(c));
  return out;
}

}  // namespace

Layout lay_out(const Trace& t) {
  Layout L;
  const auto& ev = t.events();
  // Group slices and instants by (pid, track), in output order.
  std::map<std::pair<std::uint32_t, std::string>, std::vector<Raw>> groups;
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const Trace::Event& e = ev[i];
    if (e.phase == 'C') continue;
    const std::uint64_t s = ns_of(e.ts_ps), en = e.phase == 'X' ? ns_of(e.ts_ps + e.dur_ps) : s;
    groups[{e.pid, e.track}].push_back({i, s, en});
  }
  // Display order within a process: explicit order, then name; lanes right after their track.
  std::map<std::uint32_t, std::vector<std::string>> names;
  for (const auto& [key, v] : groups) names[key.first].push_back(key.second);
  const auto& orders = t.track_orders();
  std::map<std::pair<std::uint32_t, std::string>, std::vector<std::size_t>> lanes_of;  // -> track indices
  for (auto& [pid, v] : names) {
    std::stable_sort(v.begin(), v.end(), [&, p = pid](const std::string& a, const std::string& b) {
      const auto oa = orders.find({p, a}), ob = orders.find({p, b});
      const int ia = oa == orders.end() ? 1 << 30 : oa->second;
      const int ib = ob == orders.end() ? 1 << 30 : ob->second;
      return ia < ib;
    });
    int tid = 1;
    for (const std::string& name : v) {
      std::vector<Raw>& items = groups[{pid, name}];
      std::stable_sort(items.begin(), items.end(), [](const Raw& a, const Raw& b) {
        return std::tie(a.start_ns, b.end_ns, a.seq) < std::tie(b.start_ns, a.end_ns, b.seq);
      });
      const std::vector<std::size_t> lane = assign_lanes(items);
      const std::size_t n_lanes = lane.empty() ? 1 : *std::max_element(lane.begin(), lane.end()) + 1;
      const std::size_t first = L.tracks.size();
      for (std::size_t l = 0; l < n_lanes; ++l) {
        L.tracks.push_back({pid, l == 0 ? name : fmt::format("{} #{}", name, l + 1), tid++, {}});
        lanes_of[{pid, name}].push_back(first + l);
      }
      for (std::size_t i = 0; i < items.size(); ++i) {
        const Trace::Event& e = ev[items[i].seq];
        L.tracks[first + lane[i]].items.push_back({&e, items[i].start_ns, items[i].end_ns, {}, {}});
        if (e.phase == 'X') {
          ++L.stats.slices;
          if (lane[i] > 0) ++L.stats.lane_slices;
        }
      }
    }
  }
  L.counters = counters_of(t);

  // Flows: each point binds to the innermost enclosing slice (recorded picoseconds; ties to the
  // first lane, then the first item), found for all points of a track in one sweep.
  const auto& fps = t.flow_points();
  std::map<std::pair<std::uint32_t, std::string>, std::vector<std::size_t>> points_of;  // -> flow point indices
  for (std::size_t i = 0; i < fps.size(); ++i) points_of[{fps[i].pid, fps[i].track}].push_back(i);
  std::vector<std::optional<LaidFlow::Point>> bound(fps.size());
  for (const auto& [key, idx] : points_of) {
    const auto it = lanes_of.find(key);
    if (it == lanes_of.end()) continue;
    std::vector<SliceSpan> spans;
    std::vector<LaidFlow::Point> where;
    for (const std::size_t ti : it->second) {
      const auto& items = L.tracks[ti].items;
      for (std::size_t k = 0; k < items.size(); ++k) {
        const Trace::Event& e = *items[k].event;
        if (e.phase != 'X') continue;
        spans.push_back({e.ts_ps, e.dur_ps});
        where.push_back({ti, k});
      }
    }
    std::vector<std::uint64_t> ts;
    for (const std::size_t i : idx) ts.push_back(fps[i].ts_ps);
    const std::vector<std::size_t> found = innermost_slices(spans, ts);
    for (std::size_t q = 0; q < idx.size(); ++q)
      if (found[q] != kNoSlice) bound[idx[q]] = where[found[q]];
  }
  std::map<std::string, std::vector<LaidFlow::Point>> by_key;
  for (std::size_t i = 0; i < fps.size(); ++i) {
    if (!bound[i]) {
      ++L.stats.unbound_flow_points;
      continue;
    }
    by_key[fps[i].key].push_back(*bound[i]);
  }
  std::uint64_t next_id = 1;
  for (auto& [key, pts] : by_key) {
    auto at = [&](const LaidFlow::Point& p) {
      const LaidTrack& tr = L.tracks[p.track];
      return std::make_tuple(tr.items[p.item].start_ns, tr.pid, tr.tid, p.item);
    };
    std::sort(pts.begin(), pts.end(), [&](const auto& a, const auto& b) { return at(a) < at(b); });
    pts.erase(std::unique(pts.begin(), pts.end(),
                          [](const auto& a, const auto& b) { return a.track == b.track && a.item == b.item; }),
              pts.end());
    if (pts.size() < 2) continue;
    LaidFlow f{next_id++, L.tracks[pts[0].track].items[pts[0].item].event->category, pts};
    for (const auto& p : pts)
      if (L.tracks[p.track].items[p.item].event->category != f.category) {
        ++L.stats.mixed_category_flows;
        break;
      }
    for (std::size_t i = 0; i < pts.size(); ++i) {
      LaidItem& item = L.tracks[pts[i].track].items[pts[i].item];
      (i + 1 < pts.size() ? item.flows_out : item.flows_end).push_back(f.id);
    }
    L.flows.push_back(std::move(f));
  }
  L.stats.flows = L.flows.size();
  return L;
}

}  // namespace probelab::chip::detail
