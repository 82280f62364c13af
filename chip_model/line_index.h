// A map from cache-line numbers to slot numbers for the L2 residency model (l2_cache.h): a table
// of 64 KiB stretches of HBM (128 lines each), each holding the slots of its lines, created when a
// line of the stretch first becomes resident and kept. A tile's lines are consecutive, so lookups
// after the first in a stretch find it in a small cache of the stretches looked up last, present
// or missing (a collective's input and output ranges alternate in it, one lookup per message).
// Memory follows the HBM footprint the L2 has seen (about 0.8% of it), not the L2's capacity.
// Never iterated, so its layout cannot leak into a result. Not thread-safe (one chip, one thread).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>

namespace probelab::chip {

class LineIndex {
 public:
  static constexpr std::uint32_t kNone = UINT32_MAX;

  /// The slot of `line`, or kNone.
  std::uint32_t find(std::uint64_t line) const {
    const Stretch* s = stretch(line >> kLineBits);
    return s ? s->slot[line & kLineMask] : kNone;
  }
  /// Adds `line` (not present) with `slot` (not kNone).
  void insert(std::uint64_t line, std::uint32_t slot);
  /// Removes `line` (present).
  void erase(std::uint64_t line);
  std::uint64_t size() const { return size_; }

 private:
  static constexpr int kLineBits = 7;
  static constexpr std::uint64_t kLineMask = (1u << kLineBits) - 1;
  struct Stretch {
    std::array<std::uint32_t, 1u << kLineBits> slot;
    Stretch() { slot.fill(kNone); }
  };
  Stretch* stretch(std::uint64_t key) const {
    Memo& m = memo_[key & (kMemo - 1)];
    if (m.key != key) {
      const auto it = stretches_.find(key);
      m = {key, it == stretches_.end() ? nullptr : it->second.get()};
    }
    return m.stretch;
  }
  /// Stretches looked up recently, present or not (nullptr), direct-mapped by key.
  struct Memo {
    std::uint64_t key = UINT64_MAX;
    Stretch* stretch = nullptr;
  };
  static constexpr std::size_t kMemo = 8;

  std::map<std::uint64_t, std::unique_ptr<Stretch>> stretches_;
  mutable std::array<Memo, kMemo> memo_{};
  std::uint64_t size_ = 0;
};

}  // namespace probelab::chip
