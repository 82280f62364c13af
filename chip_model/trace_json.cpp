// Trace::write_json: the layout of trace_layout.cpp as Chrome / Perfetto JSON. Each event is
// written straight into a buffer, byte for byte what nlohmann::json's dump() gives for the same
// object (keys in order, strings escaped, numbers as it prints them), without building one.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "chip_model/detail/trace_layout.h"
#include "chip_model/trace.h"

namespace probelab::chip {
namespace {

// The output: a byte buffer appended to without a call per character (std::string's are out of
// line), handed to the stream in pieces of about 1 MiB between events.
class Out {
 public:
  explicit Out(std::ostream& os) : os_(os) { buf_.resize(kFlush + 4096); }
  [[gnu::always_inline]] void put(char c) {
    need(1);
    buf_[n_++] = c;
  }
  [[gnu::always_inline]] void put(std::string_view s) {
    need(s.size());
    std::memcpy(buf_.data() + n_, s.data(), s.size());
    n_ += s.size();
  }
  /// Between events: the bytes so far go to the stream once there are enough of them.
  void boundary() {
    if (n_ >= kFlush) flush();
  }
  void flush() {
    os_.write(buf_.data(), static_cast<std::streamsize>(n_));
    n_ = 0;
  }

 private:
  static constexpr std::size_t kFlush = std::size_t{1} << 20;
  [[gnu::always_inline]] void need(std::size_t k) {
    if (n_ + k > buf_.size()) [[unlikely]] grow(k);
  }
  [[gnu::noinline]] void grow(std::size_t k) { buf_.resize(std::max(buf_.size() * 2, n_ + k)); }
  std::ostream& os_;
  std::vector<char> buf_;
  std::size_t n_ = 0;
};

[[gnu::always_inline]] inline void put_num(Out& o, std::uint64_t v) {
  const fmt::format_int f(v);
  o.put(std::string_view(f.data(), f.size()));
}
[[gnu::always_inline]] inline void put_num(Out& o, std::int64_t v) {
  const fmt::format_int f(v);
  o.put(std::string_view(f.data(), f.size()));
}
// A double as nlohmann::json's dump() prints it: "null" when not finite, else its to_chars.
void put_num(Out& o, double v) {
  if (!std::isfinite(v)) {
    o.put("null");
    return;
  }
  std::array<char, 64> digits;
  const char* end = nlohmann::detail::to_chars(digits.data(), digits.data() + digits.size(), v);
  o.put(std::string_view(digits.data(), static_cast<std::size_t>(end - digits.data())));
}

// Microseconds with nanosecond precision, as an exact decimal; its double is ns / 1000 (both
// correctly rounded, ns < 2^53).
void put_us(Out& o, std::uint64_t ns) {
  put_num(o, ns / 1000);
  const auto frac = static_cast<unsigned>(ns % 1000);
  const char digits[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                          static_cast<char>('0' + frac % 10)};
  o.put(std::string_view(digits, 4));
}
double us_of(std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

// A "dur" whose double, added to the double of ts, gives exactly the double of the end (what a
// viewer computes as the end), and never more — nor more than `cap`, the end a viewer computes
// for the enclosing slice (which, ending in the same nanosecond, may fall just short). Appends
// its text; returns its double.
double put_dur(Out& o, std::uint64_t start_ns, std::uint64_t end_ns, double cap) {
  const double t = us_of(start_ns), e = std::min(us_of(end_ns), cap);
  double c = us_of(end_ns - start_ns);
  if (t + c == e) {
    put_us(o, end_ns - start_ns);
    return c;
  }
  c = e - t;
  double below = 0;  // the largest candidate seen whose sum stays <= e
  for (int k = 0; k < 200; ++k) {
    const double sum = t + c;
    if (sum == e) {
      o.put(fmt::format("{}", c));
      return c;
    }
    if (sum < e) {
      below = std::max(below, c);
      c = std::nextafter(c, HUGE_VAL);
    } else {
      c = std::nextafter(c, 0.0);
    }
  }
  o.put(fmt::format("{}", below));
  return below;
}

// JSON text as nlohmann::json::dump() writes it.
void put_str(Out& o, std::string_view s) {
  const bool plain = std::all_of(s.begin(), s.end(), [](char ch) { return ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\'; });
  if (plain) {
    o.put('"');
    o.put(s);
    o.put('"');
  } else {  // escapes and UTF-8 checking exactly as the library does them
    o.put(nlohmann::json(s).dump());
  }
}
void put_ph(Out& o, char ph) {
  const char text[3] = {'"', ph, '"'};
  o.put(std::string_view(text, 3));
}

// An object's members in the order given (the caller gives them sorted, as a JSON object of the
// library keeps them). key() takes a plain name (no character to escape), as the writer's own
// are; arg() escapes a recorded one.
class Members {
 public:
  explicit Members(Out& o) : o_(o) { o_.put('{'); }
  [[gnu::always_inline]] Out& key(std::string_view k) {
    o_.put(any_ ? std::string_view(",\"") : std::string_view("\""));
    any_ = true;
    o_.put(k);
    o_.put("\":");
    return o_;
  }
  Out& arg(std::string_view k) {
    if (any_) o_.put(',');
    any_ = true;
    put_str(o_, k);
    o_.put(':');
    return o_;
  }
  void close() { o_.put('}'); }

 private:
  Out& o_;
  bool any_ = false;
};

// The args object: keys sorted, a repeated key keeps its last value.
void put_args(Out& o, const Trace::Args& args) {
  // A few arguments per event: a stable insertion sort of their indices.
  std::array<std::size_t, 16> small;
  std::vector<std::size_t> large;
  std::size_t* order = small.data();
  if (args.size() > small.size()) {
    large.resize(args.size());
    order = large.data();
  }
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::size_t at = i;
    while (at > 0 && args[i].first < args[order[at - 1]].first) {
      order[at] = order[at - 1];
      --at;
    }
    order[at] = i;
  }
  Members m(o);
  for (std::size_t k = 0; k < args.size(); ++k) {
    if (k + 1 < args.size() && args[order[k + 1]].first == args[order[k]].first) continue;
    Out& out = m.arg(args[order[k]].first);
    std::visit([&](const auto& v) {
      if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string>) put_str(out, v);
      else put_num(out, v);
    }, args[order[k]].second);
  }
  m.close();
}

// A metadata event: {"args":{<arg>:<value>},"name":<name>,"ph":"M","pid":..,"tid":..}.
template <class V>
void put_meta(Out& o, std::string_view name, std::uint32_t pid, int tid, std::string_view arg, const V& value) {
  Members m(o);
  Members a(m.key("args"));
  if constexpr (std::is_same_v<V, std::string>) put_str(a.key(arg), value);
  else put_num(a.key(arg), std::int64_t{value});
  a.close();
  put_str(m.key("name"), name);
  put_ph(m.key("ph"), 'M');
  put_num(m.key("pid"), std::uint64_t{pid});
  put_num(m.key("tid"), std::int64_t{tid});
  m.close();
}

}  // namespace

void Trace::write_json(std::ostream& out) const {
  const detail::Layout L = detail::lay_out(*this);
  Out o(out);
  o.put("{\"traceEvents\":[");
  bool first = true;
  auto next = [&] {
    if (!first) {
      o.put(",\n");
      o.boundary();
    }
    first = false;
  };
  for (const auto& [pid, name] : process_names_) {
    next();
    put_meta(o, "process_name", pid, 0, "name", name);
  }
  for (const auto& tr : L.tracks) {
    next();
    put_meta(o, "thread_name", tr.pid, tr.tid, "name", tr.name);
    next();
    put_meta(o, "thread_sort_index", tr.pid, tr.tid, "sort_index", tr.tid);
  }
  // An event's fields, then "ts" (and "dur") as exact decimals.
  for (const auto& tr : L.tracks) {
    // The slices enclosing the current one (items come by start, longest first): their end in
    // nanoseconds and as a viewer computes it, so a child never ends after its parent there.
    std::vector<std::pair<std::uint64_t, double>> open;
    for (const auto& it : tr.items) {
      const Event& e = *it.event;
      next();
      Members m(o);
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
      Members m(o);
      Members a(m.key("args"));
      put_num(a.arg(c.unit), v);
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
      Members m(o);
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
  o.put("]}\n");
  o.flush();
}

}  // namespace probelab::chip
