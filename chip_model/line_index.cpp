// Cache-line index of the L2 model (see line_index.h).
#include "chip_model/line_index.h"

namespace probelab::chip {

void LineIndex::insert(std::uint64_t line, std::uint32_t slot) {
  const std::uint64_t key = line >> kLineBits;
  Stretch* s = stretch(key);
  if (!s) {
    auto& owned = stretches_[key];
    owned = std::make_unique<Stretch>();
    s = owned.get();
    memo_[key & (kMemo - 1)] = {key, s};
  }
  s->slot[line & kLineMask] = slot;
  ++size_;
}

void LineIndex::erase(std::uint64_t line) {
  Stretch* s = stretch(line >> kLineBits);  // present: the stretch exists
  s->slot[line & kLineMask] = kNone;
  --size_;
}

}  // namespace probelab::chip
