// CompactObject: one JSON object written straight to text, byte for byte what
// nlohmann::json::dump() (compact, keys sorted) writes for the same object, without building the
// tree. For text written often where a checksum covers nlohmann's compact form (the dump manifest's
// entries, one per capture). Values: strings (escaped as nlohmann escapes them; text that is not
// valid UTF-8 throws nlohmann's type_error as dump() would), unsigned integers, doubles (shortest
// round-trip digits; NaN and infinities as the strings "nan" / "inf" / "-inf", as json_number()
// writes them), arrays of integers, and nested objects or other values as finished compact text.
// Keys (plain ASCII identifiers, written without escaping) may be added in any order; each once.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace probelab::probes {

class CompactObject {
 public:
  CompactObject& add(std::string_view key, std::string_view text);
  CompactObject& add(std::string_view key, const char* text) { return add(key, std::string_view(text)); }
  CompactObject& add(std::string_view key, std::uint64_t v);
  CompactObject& add(std::string_view key, double v);
  CompactObject& add(std::string_view key, std::span<const std::int64_t> v);
  /// `compact_json`: a value already written in compact form (a nested CompactObject's str()).
  CompactObject& add_raw(std::string_view key, std::string compact_json);
  /// The object's text: {"k1":v1,"k2":v2,...}, keys in byte order.
  std::string str() const;

 private:
  struct Member {
    std::string_view key;
    std::size_t begin, end;  // the value's text in values_
  };
  void added(std::string_view key, std::size_t begin) { members_.push_back({key, begin, values_.size()}); }
  std::vector<Member> members_;
  std::string values_;  // the values' texts, one after the other
};

/// `s` as a JSON string literal, as nlohmann::json(s).dump() writes it.
std::string json_quoted(std::string_view s);

}  // namespace probelab::probes
