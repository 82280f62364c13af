#include "sim/run/result_codec.h"

#include <cmath>

namespace probelab::sim {

using nlohmann::json;

void as_text_would_read(json& result) {
  switch (result.type()) {
    case json::value_t::object:
    case json::value_t::array:
      for (json& v : result) as_text_would_read(v);
      break;
    case json::value_t::number_float:
      if (!std::isfinite(result.get<double>())) result = nullptr;
      break;
    case json::value_t::binary:
      result = json::parse(result.dump());
      break;
    default:
      break;
  }
}

std::vector<std::uint8_t> encode_result(json result) {
  as_text_would_read(result);
  return json::to_msgpack(result);
}

json decode_result(std::span<const std::uint8_t> bytes) { return json::from_msgpack(bytes.begin(), bytes.end()); }

}  // namespace probelab::sim
