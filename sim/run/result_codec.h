// A simulation's result on its way from the process that simulated it to the one that writes the
// report: MessagePack bytes of the JSON (the library's own binary form, read back several times
// faster than text), holding what its JSON text would hold once read back — a number JSON has no
// text for (NaN, an infinity) as null, a binary value as the object the text shows — so the
// report says the same whichever way the result came.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

namespace probelab::sim {

/// `result` as its JSON text would read back (above), in place.
void as_text_would_read(nlohmann::json& result);

/// The bytes of `result` as read back by decode_result().
std::vector<std::uint8_t> encode_result(nlohmann::json result);

/// The result of encode_result()'s bytes. Throws nlohmann::json::exception on bytes that are not
/// one complete MessagePack value.
nlohmann::json decode_result(std::span<const std::uint8_t> bytes);

}  // namespace probelab::sim
