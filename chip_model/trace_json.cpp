// Trace::write_json: the layout of trace_layout.cpp as Chrome / Perfetto JSON. Each event is
// written straight into a buffer, byte for byte what nlohmann::json's dump() gives for the same
// object (keys in order, strings escaped, numbers as it prints them), without building one.
#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "chip_model/detail/trace_layout.h"
#include "chip_model/trace.h"

namespace probelab::chip {
namespace {

// Microseconds with nanosecond precision, as an exact decimal; its double is ns / 1000 (both
// correctly rounded, ns < 2^53).
void put_us(std::string& b, std::uint64_t ns) {
  b += fmt::format_int(ns / 1000).c_str();
  const auto frac = static_cast<unsigned>(ns % 1000);
  b += '.';
  b += static_cast<char>('0' + frac / 100);
  b += static_cast<char>('0' + frac / 10 % 10);
  b += static_cast<char>('0' + frac % 10);
}
double us_of(std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

// A "dur" whose double, added to the double of ts, gives exactly the double of the end (what a
// viewer computes as the end), and never more — nor more than `cap`, the end a viewer computes
// for the enclosing slice (which, ending in the same nanosecond, may fall just short). Appends
// its text; returns its double.
double put_dur(std::string& b, std::uint64_t start_ns, std::uint64_t end_ns, double cap) {
  const double t = us_of(start_ns), e = std::min(us_of(end_ns), cap);
  double c = us_of(end_ns - start_ns);
  if (t + c == e) {
    put_us(b, end_ns - start_ns);
    return c;
  }
  c = e - t;
  double below = 0;  // the largest candidate seen whose sum stays <= e
  for (int k = 0; k < 200; ++k) {
    const double sum = t + c;
    if (sum == e) {
      fmt::format_to(std::back_inserter(b), "{}", c);
      return c;
    }
    if (sum < e) {
      below = std::max(below, c);
      c = std::nextafter(c, HUGE_VAL);
    } else {
      c = std::nextafter(c, 0.0);
    }
  }
  fmt::format_to(std::back_inserter(b), "{}", below);
  return below;
}

// JSON text as nlohmann::json::dump() writes it.
void put_str(std::string& b, std::string_view s) {
  const bool plain = std::all_of(s.begin(), s.end(), [](char ch) { return ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\'; });
  if (plain) {
    b += '"';
    b += s;
    b += '"';
  } else {  // escapes and UTF-8 checking exactly as the library does them
    b += nlohmann::json(s).dump();
  }
}
void put_num(std::string& b, std::uint64_t v) { b += fmt::format_int(v).c_str(); }
void put_num(std::string& b, std::int64_t v) { b += fmt::format_int(v).c_str(); }
void put_num(std::string& b, double v) { b += nlohmann::json(v).dump(); }

// An object's members in the order given (the caller gives them sorted, as a JSON object of the
// library keeps them).
class Members {
 public:
  explicit Members(std::string& b) : b_(b) { b_ += '{'; }
  std::string& key(std::string_view k) {
    if (any_) b_ += ',';
    any_ = true;
    put_str(b_, k);
    b_ += ':';
    return b_;
  }
  void close() { b_ += '}'; }

 private:
  std::string& b_;
  bool any_ = false;
};

// The args object: keys sorted, a repeated key keeps its last value.
void put_args(std::string& b, const Trace::Args& args) {
  // A few arguments per event: a stable insertion sort.
  std::vector<std::size_t> order;
  order.reserve(args.size());
  for (std::size_t i = 0; i < args.size(); ++i) {
    auto at = order.end();
    while (at != order.begin() && args[i].first < args[*(at - 1)].first) --at;
    order.insert(at, i);
  }
  Members m(b);
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (k + 1 < order.size() && args[order[k + 1]].first == args[order[k]].first) continue;
    std::string& out = m.key(args[order[k]].first);
    std::visit([&](const auto& v) {
      if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string>) put_str(out, v);
      else put_num(out, v);
    }, args[order[k]].second);
  }
  m.close();
}

void put_ph(std::string& b, char ph) {
  b += '"';
  b += ph;
  b += '"';
}

}  // namespace

void Trace::write_json(std::ostream& out) const {
  const detail::Layout L = detail::lay_out(*this);
  using nlohmann::json;
  std::string b;
  b.reserve(1 << 20);
  b += "{\"traceEvents\":[";
  bool first = true;
  auto next = [&] {
    if (!first) b += ",\n";
    first = false;
    if (b.size() >= (1 << 20)) {
      out.write(b.data(), static_cast<std::streamsize>(b.size()));
      b.clear();
    }
  };
  auto put = [&](const json& j) {
    next();
    b += j.dump();
  };
  for (const auto& [pid, name] : process_names_)
    put(json{{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", name}}}});
  for (const auto& tr : L.tracks) {
    put(json{{"ph", "M"}, {"name", "thread_name"}, {"pid", tr.pid}, {"tid", tr.tid}, {"args", {{"name", tr.name}}}});
    put(json{{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", tr.pid}, {"tid", tr.tid},
             {"args", {{"sort_index", tr.tid}}}});
  }
  // An event's fields, then "ts" (and "dur") as exact decimals.
  for (const auto& tr : L.tracks) {
    // The slices enclosing the current one (items come by start, longest first): their end in
    // nanoseconds and as a viewer computes it, so a child never ends after its parent there.
    std::vector<std::pair<std::uint64_t, double>> open;
    for (const auto& it : tr.items) {
      const Event& e = *it.event;
      next();
      Members m(b);
      if (!e.args.empty()) put_args(m.key("args"), e.args);
      if (!e.category.empty()) put_str(m.key("cat"), e.category);
      put_str(m.key("name"), e.name);
      put_ph(m.key("ph"), e.phase);
      put_num(m.key("pid"), std::uint64_t{tr.pid});
      if (e.phase == 'i') put_str(m.key("s"), "t");
      put_num(m.key("tid"), std::int64_t{tr.tid});
      put_us(m.key("ts"), it.start_ns);
      if (e.phase == 'X') {
        while (!open.empty() && open.back().first <= it.start_ns) open.pop_back();
        const double dur = put_dur(m.key("dur"), it.start_ns, it.end_ns, open.empty() ? HUGE_VAL : open.back().second);
        open.emplace_back(it.end_ns, us_of(it.start_ns) + dur);
      }
      m.close();
    }
  }
  for (const auto& c : L.counters)
    for (const auto& [ns, v] : c.samples) {
      next();
      Members m(b);
      Members a(m.key("args"));
      put_num(a.key(c.unit), v);
      a.close();
      put_str(m.key("name"), c.name);
      put_ph(m.key("ph"), 'C');
      put_num(m.key("pid"), std::uint64_t{c.pid});
      put_num(m.key("tid"), std::int64_t{0});
      put_us(m.key("ts"), ns);
      m.close();
    }
  // Flows (v1): one event per bound slice, at the slice's own start, pid, tid and category (the
  // binding key of Chrome's trace model; Perfetto binds to the enclosing slice).
  for (const auto& f : L.flows) {
    for (std::size_t i = 0; i < f.points.size(); ++i) {
      const detail::LaidTrack& tr = L.tracks[f.points[i].track];
      const detail::LaidItem& it = tr.items[f.points[i].item];
      next();
      Members m(b);
      if (i > 0) put_str(m.key("bp"), "e");
      put_str(m.key("cat"), f.category);
      put_num(m.key("id"), f.id);
      put_str(m.key("name"), "flow");
      put_ph(m.key("ph"), i == 0 ? 's' : i + 1 == f.points.size() ? 'f' : 't');
      put_num(m.key("pid"), std::uint64_t{tr.pid});
      put_num(m.key("tid"), std::int64_t{tr.tid});
      put_us(m.key("ts"), it.start_ns);
      m.close();
    }
  }
  b += "]}\n";
  out.write(b.data(), static_cast<std::streamsize>(b.size()));
}

}  // namespace probelab::chip
