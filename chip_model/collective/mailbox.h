// The messages that arrived at a chip before its collectives asked for them, by MessageKey.
// Flat storage: a message is moved in once and used in place by the receive that takes it; the
// lookup is a sorted vector of keys whose taken front is skipped, not erased (messages are mostly
// taken in key order: a ring's steps arrive and are received in sequence). No allocation per
// message once the storage has grown to the largest number waiting at once. Plain C++.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "chip_model/collective/message.h"

namespace probelab::chip {

class Mailbox {
 public:
  /// Keeps `m`; false (and `m` untouched) when a message with its key is already waiting.
  bool put(Message&& m);
  /// The waiting message `key`, removed from the mailbox, or nullptr. It stays valid, to be used
  /// in place or moved from, until the next put().
  Message* take(const MessageKey& key);
  bool empty() const { return head_ == keys_.size(); }

 private:
  struct Entry {
    MessageKey key;
    std::uint32_t slot = 0;
  };
  std::vector<Entry> keys_;          // sorted by key; [head_, end) are waiting
  std::size_t head_ = 0;
  std::deque<Message> slab_;         // the messages (a message never moves)
  std::vector<std::uint32_t> free_;  // unused slots of slab_
};

}  // namespace probelab::chip
