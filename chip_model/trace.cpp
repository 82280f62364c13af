#include "chip_model/trace.h"

#include <algorithm>
#include <fstream>
#include <numeric>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace probelab::chip {
namespace {

// Microseconds with picosecond precision, as an exact decimal (no binary rounding in the file).
std::string us_text(std::uint64_t ps) { return fmt::format("{}.{:06d}", ps / 1'000'000, ps % 1'000'000); }

nlohmann::json args_json(const Trace::Args& args) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& kv : args) std::visit([&](const auto& x) { j[kv.first] = x; }, kv.second);
  return j;
}

}  // namespace

void Trace::complete(std::uint32_t pid, std::string_view track, std::string_view name, std::string_view category,
                     std::uint64_t start_ps, std::uint64_t dur_ps, Args args) {
  if (!enabled_) return;
  events_.push_back({'X', pid, std::string(track), std::string(name), std::string(category), start_ps, dur_ps, 0.0,
                     std::move(args)});
}

void Trace::instant(std::uint32_t pid, std::string_view track, std::string_view name, std::string_view category,
                    std::uint64_t ts_ps, Args args) {
  if (!enabled_) return;
  events_.push_back({'i', pid, std::string(track), std::string(name), std::string(category), ts_ps, 0, 0.0,
                     std::move(args)});
}

void Trace::counter(std::uint32_t pid, std::string_view name, std::uint64_t ts_ps, double value) {
  if (!enabled_) return;
  events_.push_back({'C', pid, std::string(), std::string(name), "counter", ts_ps, 0, value, {}});
}

void Trace::set_process_name(std::uint32_t pid, std::string name) { process_names_[pid] = std::move(name); }

void Trace::set_track_order(std::uint32_t pid, std::string_view track, int order) {
  track_order_[{pid, std::string(track)}] = order;
}

void Trace::clear() { events_.clear(); }

void Trace::write_json(std::ostream& out) const {
  // Track ids: per process, tracks sorted by (explicit order, name); tid 0 is kept for counters.
  std::map<std::pair<std::uint32_t, std::string>, int> tids;
  {
    std::map<std::uint32_t, std::vector<std::string>> names;
    for (const auto& e : events_)
      if (e.phase != 'C') names[e.pid].push_back(e.track);
    for (auto& [pid, v] : names) {
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
      std::stable_sort(v.begin(), v.end(), [&, p = pid](const std::string& a, const std::string& b) {
        const auto oa = track_order_.find({p, a}), ob = track_order_.find({p, b});
        const int ia = oa == track_order_.end() ? 1 << 30 : oa->second;
        const int ib = ob == track_order_.end() ? 1 << 30 : ob->second;
        return ia < ib;
      });
      int next = 1;
      for (const auto& n : v) tids[{pid, n}] = next++;
    }
  }
  std::vector<std::size_t> order(events_.size());
  std::iota(order.begin(), order.end(), 0);
  auto tid_of = [&](const Event& e) { return e.phase == 'C' ? 0 : tids.at({e.pid, e.track}); };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const Event& x = events_[a];
    const Event& y = events_[b];
    if (x.pid != y.pid) return x.pid < y.pid;
    const int tx = tid_of(x), ty = tid_of(y);
    if (tx != ty) return tx < ty;
    if (x.ts_ps != y.ts_ps) return x.ts_ps < y.ts_ps;
    return x.dur_ps > y.dur_ps;  // enclosing spans first
  });

  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
  bool first = true;
  auto sep = [&] {
    if (!first) out << ",\n";
    first = false;
  };
  for (const auto& [pid, name] : process_names_) {
    sep();
    out << nlohmann::json{{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0},
                          {"args", {{"name", name}}}}
               .dump();
  }
  for (const auto& [key, tid] : tids) {
    sep();
    out << nlohmann::json{{"ph", "M"}, {"name", "thread_name"}, {"pid", key.first}, {"tid", tid},
                          {"args", {{"name", key.second}}}}
               .dump();
    sep();
    out << nlohmann::json{{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", key.first}, {"tid", tid},
                          {"args", {{"sort_index", tid}}}}
               .dump();
  }
  for (const std::size_t i : order) {
    const Event& e = events_[i];
    sep();
    nlohmann::json j{{"ph", std::string(1, e.phase)}, {"pid", e.pid}, {"tid", tid_of(e)}, {"name", e.name}};
    if (!e.category.empty()) j["cat"] = e.category;
    if (e.phase == 'C') {
      j["args"] = {{"value", e.value}};
    } else if (!e.args.empty()) {
      j["args"] = args_json(e.args);
    }
    if (e.phase == 'i') j["s"] = "t";
    std::string text = j.dump();
    // Timestamps are written as exact decimals (appended before the closing brace).
    text.pop_back();
    text += ",\"ts\":" + us_text(e.ts_ps);
    if (e.phase == 'X') text += ",\"dur\":" + us_text(e.dur_ps);
    text += '}';
    out << text;
  }
  out << "]}\n";
}

std::string Trace::to_json_string() const {
  std::ostringstream s;
  write_json(s);
  return s.str();
}

void Trace::write_file(const std::string& path) const {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open trace file '" + path + "' for writing");
  write_json(f);
  if (!f) throw std::runtime_error("error writing trace file '" + path + "'");
}

}  // namespace probelab::chip
