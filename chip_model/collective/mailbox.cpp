#include "chip_model/collective/mailbox.h"

#include <algorithm>

namespace probelab::chip {
namespace {

struct KeyLess {
  template <class E>
  bool operator()(const E& e, const MessageKey& k) const { return e.key < k; }
};

}  // namespace

bool Mailbox::put(Message&& m) {
  const MessageKey k = m.key;
  auto at = keys_.end();
  if (head_ != keys_.size() && !(keys_.back().key < k)) {
    at = std::lower_bound(keys_.begin() + static_cast<std::ptrdiff_t>(head_), keys_.end(), k, KeyLess{});
    if (at->key == k) return false;
  }
  std::uint32_t slot;
  if (free_.empty()) {
    slot = static_cast<std::uint32_t>(slab_.size());
    slab_.push_back(std::move(m));
  } else {
    slot = free_.back();
    free_.pop_back();
    slab_[slot] = std::move(m);
  }
  if (head_ == keys_.size()) {
    keys_.clear();
    head_ = 0;
    at = keys_.end();
  }
  keys_.insert(at, Entry{k, slot});
  return true;
}

Message* Mailbox::take(const MessageKey& key) {
  if (head_ == keys_.size()) return nullptr;
  auto at = keys_.begin() + static_cast<std::ptrdiff_t>(head_);
  if (at->key != key) {
    at = std::lower_bound(at, keys_.end(), key, KeyLess{});
    if (at == keys_.end() || at->key != key) return nullptr;
  }
  const std::uint32_t slot = at->slot;
  free_.push_back(slot);  // reused by a later put(): the message stays valid until then
  if (at == keys_.begin() + static_cast<std::ptrdiff_t>(head_)) {
    ++head_;
  } else {
    keys_.erase(at);
  }
  // Drops the skipped front once it outweighs what waits.
  if (head_ > 32 && head_ * 2 > keys_.size()) {
    keys_.erase(keys_.begin(), keys_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
  return &slab_[slot];
}

}  // namespace probelab::chip
