// One transfer of a collective between two chips, as the network carries it: who sends to whom,
// what it belongs to (the matching key at the receiver and a header the receiver checks against
// its own view of the collective), the payload, and where the message is on its route. Plain data.
#pragma once

#include <algorithm>
#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace probelab::chip {

/// The bytes a message carries: a range of a buffer shared by the messages that carry it (a
/// sender's staged input goes to many peers), or a copy held in the message itself when it is
/// small (a ring's chunks at scale hold a few elements: no allocation per message).
struct Payload {
  static constexpr std::size_t kInlineBytes = 64;
  std::shared_ptr<const std::vector<std::byte>> buf;
  std::size_t offset = 0, size = 0;
  bool held = false;                           // the bytes are in `small`
  std::array<std::byte, kInlineBytes> small{};

  std::span<const std::byte> bytes() const {
    if (held) return std::span<const std::byte>(small.data(), size);
    return buf ? std::span<const std::byte>(buf->data() + offset, size) : std::span<const std::byte>();
  }
  static Payload own(std::vector<std::byte> b) {
    Payload p;
    p.size = b.size();
    p.buf = std::make_shared<const std::vector<std::byte>>(std::move(b));
    return p;
  }
  /// A copy of `b`: held in the payload when it fits, else in a buffer of its own.
  static Payload copy(std::span<const std::byte> b) {
    Payload p;
    p.assign(b);
    return p;
  }
  /// Makes this payload a copy of `b` (as copy(), without a temporary).
  void assign(std::span<const std::byte> b) {
    offset = 0;
    size = b.size();
    held = b.size() <= kInlineBytes;
    if (!held) {
      buf = std::make_shared<const std::vector<std::byte>>(b.begin(), b.end());
      return;
    }
    buf.reset();
    std::copy(b.begin(), b.end(), small.begin());
  }
};

/// Matches a message to the receive that expects it: collective `seq` of communicator `comm`,
/// program step `step` (with a part index for split transfers), sent by group position `src_pos`.
struct MessageKey {
  std::uint32_t comm = 0, seq = 0, step = 0, src_pos = 0;
  auto operator<=>(const MessageKey&) const = default;
};

/// What the sender believes the collective is; a receiver with another view fails the run.
struct CollectiveHeader {
  std::uint8_t op = 0, algorithm = 0, dtype = 0, reduction = 0;
  std::uint32_t root = 0, group_size = 0;
  std::uint64_t count = 0;
  bool operator==(const CollectiveHeader&) const = default;
};

struct Message {
  std::uint32_t src = 0, dst = 0;  // chip ranks
  std::uint64_t seq = 0;           // per-sender sequence number: orders ties in the network
  MessageKey key;
  CollectiveHeader header;
  std::uint8_t dtype = 0;          // graph::DType of the payload elements
  bool partial = false;            // a partial sum (the sender's accumulation dtype), else data
  Payload payload;
  std::uint64_t wire_bytes = 0;
  // Progress along the route (ClusterTopology::route(src, dst)): the next link to take, and when
  // the head and the tail reach its input. After the last link: when they reached `dst`.
  std::uint16_t hop = 0;
  std::uint64_t head_ps = 0, tail_ps = 0;

  /// The collective this message belongs to (link timeline spans).
  std::uint64_t tag() const { return std::uint64_t{key.comm} << 32 | key.seq; }
};

}  // namespace probelab::chip
