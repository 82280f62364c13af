// Bytes of the distributed-run protocol (sim/run/partition_run.h): window reports and grants,
// network messages, and length-prefixed frames on a socket. MessagePack via nlohmann::json.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "chip_model/collective/message.h"
#include "sim/platform/partition_link.h"

namespace probelab::sim::detail {

nlohmann::json message_json(const chip::Message& m);
chip::Message message_from(const nlohmann::json& j);

std::vector<std::uint8_t> encode_report(const WindowReport& r);
WindowReport decode_report(const std::vector<std::uint8_t>& b);
std::vector<std::uint8_t> encode_grant(const WindowGrant& g);
WindowGrant decode_grant(const std::vector<std::uint8_t>& b);

/// Frame kinds: R (report, child -> parent), G (grant, parent -> child), F (final outcome).
/// `fd` is a socket; a peer that went away throws std::runtime_error (never SIGPIPE).
void write_frame(int fd, char kind, const std::vector<std::uint8_t>& bytes);
/// nullopt at end of file or on an I/O error.
std::optional<std::pair<char, std::vector<std::uint8_t>>> read_frame(int fd);

}  // namespace probelab::sim::detail
