#include "chip_model/trace.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "chip_model/detail/trace_layout.h"
#include "chip_model/innermost_slices.h"

namespace probelab::chip {
namespace {

__extension__ typedef unsigned __int128 U128;

}  // namespace

void Trace::complete(std::uint32_t pid, std::string_view track, std::string_view name, std::string_view category,
                     std::uint64_t start_ps, std::uint64_t dur_ps, Args args) {
  if (!enabled_) return;
  if (window_ && outside_window(pid, track, name, start_ps, start_ps + dur_ps)) return;
  events_.push_back({'X', pid, std::string(track), std::string(name), std::string(category), start_ps, dur_ps, 0.0,
                     std::move(args)});
  if (window_) maybe_purge();
}

void Trace::instant(std::uint32_t pid, std::string_view track, std::string_view name, std::string_view category,
                    std::uint64_t ts_ps, Args args) {
  if (!enabled_ || (window_ && outside_window(pid, track, name, ts_ps, ts_ps))) return;
  events_.push_back({'i', pid, std::string(track), std::string(name), std::string(category), ts_ps, 0, 0.0,
                     std::move(args)});
}

void Trace::counter(std::uint32_t pid, std::string_view name, std::string_view unit, std::uint64_t ts_ps,
                    double value) {
  if (!enabled_) return;
  if (window_) {  // a sample before the window may be the level it opens at: only later ones go now
    const auto r = rank_of(pid);
    if (r && *r < window_->ranks.size() && ts_ps > window_->ranks[*r].end) return;
  }
  events_.push_back({'C', pid, std::string(unit), std::string(name), "counter", ts_ps, 0, value, {}});
  if (window_) maybe_purge();
}

void Trace::rate(std::uint32_t pid, std::string_view name, std::string_view unit, std::uint64_t start_ps,
                 std::uint64_t dur_ps, std::uint64_t amount) {
  if (!enabled_ || amount == 0) return;
  if (window_) {
    const auto r = rank_of(pid);
    if (r && *r < window_->ranks.size() &&
        (start_ps > window_->ranks[*r].end || start_ps + dur_ps < window_->ranks[*r].cut))
      return;
  }
  auto it = rates_.find(std::pair<std::uint32_t, std::string_view>(pid, name));
  if (it == rates_.end()) it = rates_.try_emplace(std::pair<std::uint32_t, std::string>(pid, name)).first;
  Rate& r = it->second;
  if (r.unit.empty()) r.unit = std::string(unit);
  const std::uint64_t bin = rate_bin_ps_;
  // Bins mostly come in time order: the last one, or a new one after it, without a search.
  auto add = [&r](std::uint64_t b, std::uint64_t v) {
    if (!r.bins.empty()) {
      auto last = std::prev(r.bins.end());
      if (last->first == b) {
        last->second += v;
        return;
      }
      if (last->first < b) {
        r.bins.emplace_hint(r.bins.end(), b, v);
        return;
      }
    }
    r.bins[b] += v;
  };
  if (dur_ps == 0) {
    add(start_ps / bin, amount);
    return;
  }
  // Cumulative integer shares: the bins of one call add up to `amount` exactly.
  const std::uint64_t end = start_ps + dur_ps;
  std::uint64_t given = 0;
  for (std::uint64_t b = start_ps / bin; b * bin < end; ++b) {
    const std::uint64_t upto = std::min(end, (b + 1) * bin) - start_ps;
    const auto cum = static_cast<std::uint64_t>(static_cast<U128>(amount) * upto / dur_ps);
    if (cum > given) add(b, cum - given);
    given = cum;
  }
}

void Trace::flow(std::string_view key, std::uint32_t pid, std::string_view track, std::uint64_t ts_ps) {
  if (!enabled_ || (window_ && outside_window(pid, track, {}, ts_ps, ts_ps))) return;
  flows_.push_back({std::string(key), pid, std::string(track), ts_ps});
}

void Trace::set_process_name(std::uint32_t pid, std::string name) { process_names_[pid] = std::move(name); }

void Trace::set_track_order(std::uint32_t pid, std::string_view track, int order) {
  track_order_[{pid, std::string(track)}] = order;
}

std::vector<std::optional<Trace::Event>> Trace::slices_at(
    std::string_view track, const std::vector<std::pair<std::uint32_t, std::uint64_t>>& queries) const {
  struct PerPid {
    std::vector<const Event*> events;
    std::vector<SliceSpan> spans;
    std::vector<std::size_t> query;
    std::vector<std::uint64_t> ts;
  };
  std::map<std::uint32_t, PerPid> by_pid;
  for (std::size_t i = 0; i < queries.size(); ++i) {
    PerPid& p = by_pid[queries[i].first];
    p.query.push_back(i);
    p.ts.push_back(queries[i].second);
  }
  for (const Event& e : events_) {
    if (e.phase != 'X' || e.track != track) continue;
    const auto it = by_pid.find(e.pid);
    if (it == by_pid.end()) continue;
    it->second.events.push_back(&e);
    it->second.spans.push_back({e.ts_ps, e.dur_ps});
  }
  std::vector<std::optional<Event>> out(queries.size());
  for (const auto& [pid, p] : by_pid) {
    const std::vector<std::size_t> found = innermost_slices(p.spans, p.ts);
    for (std::size_t k = 0; k < found.size(); ++k)
      if (found[k] != kNoSlice) out[p.query[k]] = *p.events[found[k]];
  }
  return out;
}

void Trace::clear() {
  events_.clear();
  flows_.clear();
  rates_.clear();
}

Trace::Format Trace::parse_format(std::string_view s) {
  if (s == "json") return Format::Json;
  if (s == "perfetto") return Format::Perfetto;
  throw std::invalid_argument(fmt::format("unknown trace format '{}' (expected json or perfetto)", s));
}

const char* Trace::file_name(Format f) { return f == Format::Json ? "trace.json" : "trace.pftrace"; }

Trace::Stats Trace::stats() const { return detail::lay_out(*this).stats; }

namespace {

// Compact binary form of a trace (serialize / append_serialized): native-endian integers (the
// partitions of one job run the same binary), strings as length + bytes.
class Writer {
 public:
  std::vector<std::uint8_t> out;
  template <class T>
  void pod(T v) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof v);
  }
  void str(const std::string& s) {
    pod(static_cast<std::uint32_t>(s.size()));
    out.insert(out.end(), s.begin(), s.end());
  }
};

class Reader {
 public:
  explicit Reader(const std::vector<std::uint8_t>& b) : b_(b) {}
  template <class T>
  T pod() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, b_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  std::string str() {
    const auto n = pod<std::uint32_t>();
    need(n);
    std::string s(reinterpret_cast<const char*>(b_.data() + at_), n);
    at_ += n;
    return s;
  }
  bool done() const { return at_ == b_.size(); }

 private:
  void need(std::size_t n) const {
    if (n > b_.size() - at_) throw std::runtime_error("trace: truncated partition trace");
  }
  const std::vector<std::uint8_t>& b_;
  std::size_t at_ = 0;
};

}  // namespace

std::vector<std::uint8_t> Trace::serialize() const {
  Writer w;
  w.pod(rate_bin_ps_);
  w.pod(static_cast<std::uint64_t>(process_names_.size()));
  for (const auto& [pid, n] : process_names_) {
    w.pod(pid);
    w.str(n);
  }
  w.pod(static_cast<std::uint64_t>(track_order_.size()));
  for (const auto& [key, o] : track_order_) {
    w.pod(key.first);
    w.str(key.second);
    w.pod(o);
  }
  w.pod(static_cast<std::uint64_t>(events_.size()));
  for (const auto& e : events_) {
    w.pod(e.phase);
    w.pod(e.pid);
    w.str(e.track);
    w.str(e.name);
    w.str(e.category);
    w.pod(e.ts_ps);
    w.pod(e.dur_ps);
    w.pod(e.value);
    w.pod(static_cast<std::uint32_t>(e.args.size()));
    for (const auto& [k, v] : e.args) {
      w.str(k);
      w.pod(static_cast<std::uint8_t>(v.index()));
      std::visit(
          [&](const auto& x) {
            if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::string>)
              w.str(x);
            else
              w.pod(x);
          },
          v);
    }
  }
  w.pod(static_cast<std::uint64_t>(flows_.size()));
  for (const auto& f : flows_) {
    w.str(f.key);
    w.pod(f.pid);
    w.str(f.track);
    w.pod(f.ts_ps);
  }
  w.pod(static_cast<std::uint64_t>(rates_.size()));
  for (const auto& [key, r] : rates_) {
    w.pod(key.first);
    w.str(key.second);
    w.str(r.unit);
    w.pod(static_cast<std::uint64_t>(r.bins.size()));
    for (const auto& [bin, amount] : r.bins) {
      w.pod(bin);
      w.pod(amount);
    }
  }
  return std::move(w.out);
}

void Trace::append_serialized(const std::vector<std::uint8_t>& bytes) {
  Reader r(bytes);
  if (const auto bin = r.pod<std::uint64_t>(); bin != rate_bin_ps_)
    throw std::runtime_error(fmt::format("trace: partition trace has rate bin {} ps, this trace {} ps", bin, rate_bin_ps_));
  for (auto n = r.pod<std::uint64_t>(); n > 0; --n) {
    const auto pid = r.pod<std::uint32_t>();
    process_names_[pid] = r.str();
  }
  for (auto n = r.pod<std::uint64_t>(); n > 0; --n) {
    const auto pid = r.pod<std::uint32_t>();
    std::string track = r.str();
    track_order_[{pid, std::move(track)}] = r.pod<int>();
  }
  for (auto n = r.pod<std::uint64_t>(); n > 0; --n) {
    Event e;
    e.phase = r.pod<char>();
    e.pid = r.pod<std::uint32_t>();
    e.track = r.str();
    e.name = r.str();
    e.category = r.str();
    e.ts_ps = r.pod<std::uint64_t>();
    e.dur_ps = r.pod<std::uint64_t>();
    e.value = r.pod<double>();
    for (auto k = r.pod<std::uint32_t>(); k > 0; --k) {
      std::string key = r.str();
      switch (r.pod<std::uint8_t>()) {
        case 0: e.args.emplace_back(std::move(key), r.pod<std::int64_t>()); break;
        case 1: e.args.emplace_back(std::move(key), r.pod<std::uint64_t>()); break;
        case 2: e.args.emplace_back(std::move(key), r.pod<double>()); break;
        case 3: e.args.emplace_back(std::move(key), r.str()); break;
        default: throw std::runtime_error("trace: malformed partition trace (argument type)");
      }
    }
    events_.push_back(std::move(e));
  }
  for (auto n = r.pod<std::uint64_t>(); n > 0; --n) {
    FlowPoint f;
    f.key = r.str();
    f.pid = r.pod<std::uint32_t>();
    f.track = r.str();
    f.ts_ps = r.pod<std::uint64_t>();
    flows_.push_back(std::move(f));
  }
  for (auto n = r.pod<std::uint64_t>(); n > 0; --n) {
    const auto pid = r.pod<std::uint32_t>();
    std::string name = r.str();
    Rate& rate = rates_[{pid, std::move(name)}];
    std::string unit = r.str();
    if (rate.unit.empty()) rate.unit = std::move(unit);
    for (auto k = r.pod<std::uint64_t>(); k > 0; --k) {
      const auto bin = r.pod<std::uint64_t>();
      rate.bins[bin] += r.pod<std::uint64_t>();
    }
  }
  if (!r.done()) throw std::runtime_error("trace: trailing bytes in a partition trace");
}

void Trace::append(Trace&& other) {
  if (other.rate_bin_ps_ != rate_bin_ps_)
    throw std::runtime_error(
        fmt::format("trace: appended trace has rate bin {} ps, this trace {} ps", other.rate_bin_ps_, rate_bin_ps_));
  if (events_.empty() && flows_.empty() && rates_.empty() && process_names_.empty() && track_order_.empty()) {
    // Nothing here yet (the first partition): take everything as it is.
    std::swap(events_, other.events_);
    std::swap(flows_, other.flows_);
    std::swap(rates_, other.rates_);
    std::swap(process_names_, other.process_names_);
    std::swap(track_order_, other.track_order_);
    other.clear();
    return;
  }
  for (auto& [pid, n] : other.process_names_) process_names_[pid] = std::move(n);
  for (auto& [key, o] : other.track_order_) track_order_[key] = o;
  events_.insert(events_.end(), std::make_move_iterator(other.events_.begin()),
                 std::make_move_iterator(other.events_.end()));
  flows_.insert(flows_.end(), std::make_move_iterator(other.flows_.begin()), std::make_move_iterator(other.flows_.end()));
  for (auto& [key, r] : other.rates_) {
    Rate& mine = rates_[key];
    if (mine.unit.empty()) mine.unit = std::move(r.unit);
    for (const auto& [bin, amount] : r.bins) mine.bins[bin] += amount;
  }
  other.clear();
}

std::string Trace::to_json_string() const {
  std::ostringstream s;
  write_json(s);
  return s.str();
}

void Trace::write_file(const std::string& path, Format format) const {
  // Written beside its final name and renamed into place: a reader never sees a partial trace.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw std::runtime_error("cannot open trace file '" + tmp + "' for writing");
    if (format == Format::Json)
      write_json(f);
    else
      write_perfetto(f);
    f.flush();
    if (!f) throw std::runtime_error("error writing trace file '" + tmp + "'");
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace probelab::chip
