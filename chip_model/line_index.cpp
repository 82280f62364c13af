// Cache-line index of the L2 model (see line_index.h).
#include "chip_model/line_index.h"

namespace probelab::chip {

void LineIndex::insert(std::uint64_t line, std::uint32_t slot) {
  const std::uint64_t key = line >> kLineBits;
  if (!stretch(key)) {
    auto& s = stretches_[key];
    s = std::make_unique<Stretch>();
    cached_key_ = key;
    cached_ = s.get();
  }
  cached_->slot[line & kLineMask] = slot;
  ++size_;
}

void LineIndex::erase(std::uint64_t line) {
  stretch(line >> kLineBits);  // present: the stretch exists
  cached_->slot[line & kLineMask] = kNone;
  --size_;
}

}  // namespace probelab::chip
