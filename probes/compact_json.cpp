#include "probes/compact_json.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace probelab::probes {

namespace {

// Printable ASCII other than '"' and '\' is written as is; anything else takes nlohmann's own
// escaping (control characters, UTF-8 validation).
bool plain(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7F && c != '"' && c != '\\'; });
}
void append_quoted(std::string& out, std::string_view s) {
  if (!plain(s)) {
    out += nlohmann::json(std::string(s)).dump();
    return;
  }
  out += '"';
  out += s;
  out += '"';
}

}  // namespace

std::string json_quoted(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  append_quoted(out, s);
  return out;
}

CompactObject& CompactObject::add(std::string_view key, std::string_view text) {
  const std::size_t begin = values_.size();
  append_quoted(values_, text);
  added(key, begin);
  return *this;
}

CompactObject& CompactObject::add(std::string_view key, std::uint64_t v) {
  const std::size_t begin = values_.size();
  const fmt::format_int text(v);
  values_.append(text.data(), text.size());
  added(key, begin);
  return *this;
}

CompactObject& CompactObject::add(std::string_view key, double v) {
  if (std::isnan(v)) return add(key, "nan");
  if (std::isinf(v)) return add(key, v > 0 ? "inf" : "-inf");
  std::array<char, 64> buf{};  // nlohmann's own number buffer size
  const char* end = nlohmann::detail::to_chars(buf.data(), buf.data() + buf.size(), v);
  const std::size_t begin = values_.size();
  values_.append(buf.data(), static_cast<std::size_t>(end - buf.data()));
  added(key, begin);
  return *this;
}

CompactObject& CompactObject::add(std::string_view key, std::span<const std::int64_t> v) {
  const std::size_t begin = values_.size();
  fmt::format_to(std::back_inserter(values_), "[{}]", fmt::join(v, ","));
  added(key, begin);
  return *this;
}

CompactObject& CompactObject::add_raw(std::string_view key, std::string compact_json) {
  const std::size_t begin = values_.size();
  values_ += compact_json;
  added(key, begin);
  return *this;
}

std::string CompactObject::str() const {
  auto by_key = [](const Member& a, const Member& b) { return a.key < b.key; };
  std::vector<Member> sorted;
  std::span<const Member> order(members_);
  if (!std::is_sorted(members_.begin(), members_.end(), by_key)) {
    sorted = members_;
    std::sort(sorted.begin(), sorted.end(), by_key);
    order = sorted;
  }
  std::string out;
  out.reserve(values_.size() + 4 * members_.size() + 2 + 16 * members_.size());
  out += '{';
  for (const Member& m : order) {
    if (out.size() > 1) out += ',';
    out += '"';
    out += m.key;
    out += "\":";
    out.append(values_, m.begin, m.end - m.begin);
  }
  out += '}';
  return out;
}

}  // namespace probelab::probes
