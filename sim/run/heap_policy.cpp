#include "sim/run/heap_policy.h"

#include <malloc.h>

namespace probelab::sim {

bool keep_freed_memory() {
  constexpr int kMmapThreshold = 32 << 20;  // glibc accepts at most HEAP_MAX_SIZE / 2 = 32 MiB
  constexpr int kTrimThreshold = 256 << 20;
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
  return mmap_ok && trim_ok;
}

}  // namespace probelab::sim
