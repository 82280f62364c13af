// The packed B operand kept between GEMMs of one thread (detail/gemm_internal.h: packed_b). A
// product by the same weights again - a recurrent cell multiplies its hidden state by R at every
// step, 32 to 128 times per op; a model's weights, read into a fresh buffer for every op, at every
// step - finds B already packed: the cache holds the source patterns it was packed from and is
// used only when the operand's patterns are equal to them (and its shape, type and Mode are the
// same), so the result is the one packing again would give, bit for bit. An operand is known by
// its shape and a sample of its patterns (not by its address, which a fresh buffer does not
// keep). Only an operand seen again among the recent calls (same shape and sample) is cached, so
// a GEMM that never repeats pays a sample of its patterns and one look into a table of them; an
// operand whose values change at every call but not at the sampled places (an im2col scratch) is
// not cached again once its entry has missed without ever being used. The entries hold a model's
// weights (a LLaMA-style block's seven projections, a ResNet's sixteen convolutions) beside the
// operands a step repeats in a burst (the key/value heads that grouped-query attention shares):
// 32 entries of at most 2^20 elements, at most 2^22 elements in all (about 24 MiB), the least
// recently used going first. The recent calls are remembered in a table of 1024 keys, 256 sets of
// four chosen by the sample (a new key takes the place of its set's oldest), many more than a step
// of those models makes, so a weight used once a step is known again at the next.
#include <algorithm>
#include <cstring>
#include <iterator>
#include <vector>

#include "numerics/detail/gemm_internal.h"

namespace probelab::num::detail {
namespace {

constexpr std::int64_t kSampleRows = 8;

struct Key {
  std::uint64_t sample = 0;  // sampled patterns (sample_of)
  InType type = InType::F16;
  std::int64_t ld = 0, K = 0, N = 0;
  bool trans = false;
  Mode mode{};
  bool operator==(const Key&) const = default;
};

struct Entry {
  bool valid = false;  // `packed` was packed from `source` under `key`
  Key key;
  std::vector<std::uint16_t> source;  // the operand's patterns, its stored rows end to end
  FloatBuffer buf;
  std::int64_t cap = 0;
  Packed packed;
  std::uint64_t used = 0;  // call count at its last use (least recently used goes first)
  std::uint64_t hits = 0;  // uses since it was packed
  std::int64_t elems = 0;  // K * N
};

constexpr std::size_t kEntries = 32, kSets = 256, kWays = 4, kVolatile = 32;
// Larger operands are packed every time: an entry holds about 6 bytes per element (patterns and
// packed floats), and packing costs 1/M of the product, small where B is this large (a
// transformer's projections over a whole sequence).
constexpr std::int64_t kMaxCachedElems = std::int64_t{1} << 20;
constexpr std::int64_t kBudgetElems = std::int64_t{1} << 22;  // all entries together

struct Cache {
  Entry entries[kEntries];
  std::uint64_t entry_sample[kEntries] = {};  // entries[i].key.sample, 0 when invalid
  Key recent[kSets][kWays];  // operands of recent calls, cached or not, in the set of their sample
  std::uint8_t recent_next[kSets] = {};  // each set's oldest way
  Key volatile_keys[kVolatile];  // operands whose values changed before their entry was used
  std::size_t next_volatile = 0;
  std::uint64_t calls = 0, hits = 0;
  std::int64_t cached_elems = 0;
};

std::size_t recent_set(std::uint64_t sample) { return static_cast<std::size_t>(sample ^ sample >> 32) % kSets; }

Cache& cache() {
  thread_local Cache c;
  return c;
}

// Rows of the stored operand: K rows of N (row-major) or N rows of K (stored transposed); rows
// laid end to end (ld equal to their length) come as one block.
template <class F>
void for_rows(const GemmOperand& b, std::int64_t K, std::int64_t N, F&& f) {
  const std::int64_t rows = b.trans ? N : K, len = b.trans ? K : N;
  if (b.ld == len) {
    f(b.data, rows * len, 0);
    return;
  }
  for (std::int64_t r = 0; r < rows; ++r) f(b.data + r * b.ld, len, r * len);
}

// Four patterns (first, a third, two thirds, last) of each of kSampleRows stored rows spread
// evenly over the operand (all rows when fewer), folded FNV-1a style into one word: a few dozen
// loads and multiplies, and a key whose first member tells most operands apart.
std::uint64_t sample_of(const GemmOperand& b, std::int64_t K, std::int64_t N) {
  const std::int64_t rows = b.trans ? N : K, len = b.trans ? K : N;
  if (rows <= 0 || len <= 0) return 0;
  const std::int64_t stride = std::max<std::int64_t>(1, rows / kSampleRows), third = len / 3, two_thirds = len * 2 / 3;
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::int64_t i = 0; i < kSampleRows && i * stride < rows; ++i) {
    const std::uint16_t* row = b.data + i * stride * b.ld;
    h = (h ^ (std::uint64_t{row[0]} | std::uint64_t{row[third]} << 16 | std::uint64_t{row[two_thirds]} << 32 |
              std::uint64_t{row[len - 1]} << 48)) *
        0x100000001b3ull;
  }
  return h;
}

bool same_source(const Entry& e, const GemmOperand& b, std::int64_t K, std::int64_t N) {
  bool same = true;
  for_rows(b, K, N, [&](const std::uint16_t* row, std::int64_t len, std::int64_t at) {
    same = same && std::memcmp(row, e.source.data() + at, static_cast<std::size_t>(len) * 2) == 0;
  });
  return same;
}

// Entry i no longer holds anything, and its storage goes back to the heap (the budget bounds what
// the cache keeps, not only what its valid entries use).
void drop(Cache& c, std::size_t i) {
  Entry& e = c.entries[i];
  if (e.valid) c.cached_elems -= e.elems;
  e.valid = false;
  c.entry_sample[i] = 0;
  std::vector<std::uint16_t>().swap(e.source);
  e.buf.reset();
  e.cap = 0;
}

}  // namespace

const Packed& packed_b(const GemmOperand& b, std::int64_t K, std::int64_t N, const Mode& mode, FloatBuffer& storage,
                       std::int64_t& capacity, Packed& scratch) {
  if (K * N > kMaxCachedElems) {
    scratch = pack_b(b, K, N, mode, storage, capacity);
    return scratch;
  }
  Cache& c = cache();
  ++c.calls;
  const Key key{sample_of(b, K, N), b.type, b.ld, K, N, b.trans, mode};
  Entry* stale = nullptr;  // this operand's entry, packed from other values
  for (std::size_t i = 0; i < kEntries; ++i) {
    if (c.entry_sample[i] != key.sample) continue;
    Entry& e = c.entries[i];
    if (!e.valid || !(e.key == key)) continue;
    if (same_source(e, b, K, N)) {
      e.used = c.calls;
      ++e.hits;
      ++c.hits;
      return e.packed;
    }
    // Other values of the same shape and sample: packed again below, unless the entry was
    // never used (a scratch buffer), which is then left uncached.
    if (e.hits == 0) {
      drop(c, i);
      c.volatile_keys[c.next_volatile] = key;
      c.next_volatile = (c.next_volatile + 1) % kVolatile;
    } else {
      stale = &e;
    }
    break;
  }
  const std::size_t set = recent_set(key.sample);
  Key* const ways = c.recent[set];
  const bool recent = std::find(ways, ways + kWays, key) != ways + kWays;
  const bool seen = recent && std::ranges::find(c.volatile_keys, key) == std::end(c.volatile_keys);
  if (!recent) {
    ways[c.recent_next[set]] = key;
    c.recent_next[set] = static_cast<std::uint8_t>((c.recent_next[set] + 1) % kWays);
  }
  if (!seen) {
    scratch = pack_b(b, K, N, mode, storage, capacity);
    return scratch;
  }
  // The slot: this operand's stale entry, else a free one, else the least recently used; then
  // the least recently used others go until the new entry fits the budget.
  std::size_t slot = 0;
  if (stale) {
    slot = static_cast<std::size_t>(stale - c.entries);
  } else {
    for (std::size_t i = 0; i < kEntries; ++i) {
      const Entry& x = c.entries[i];
      if (!x.valid) {
        slot = i;
        break;
      }
      if (x.used < c.entries[slot].used) slot = i;
    }
  }
  drop(c, slot);
  while (c.cached_elems + K * N > kBudgetElems) {
    std::size_t oldest = kEntries;
    for (std::size_t i = 0; i < kEntries; ++i)
      if (c.entries[i].valid && (oldest == kEntries || c.entries[i].used < c.entries[oldest].used)) oldest = i;
    drop(c, oldest);
  }
  Entry* e = &c.entries[slot];
  e->source.clear();  // the rows appended in order: `at` is always the current end
  for_rows(b, K, N, [&](const std::uint16_t* row, std::int64_t len, std::int64_t) {
    e->source.insert(e->source.end(), row, row + len);
  });
  e->packed = pack_b(b, K, N, mode, e->buf, e->cap);
  e->key = key;
  e->used = c.calls;
  e->hits = 0;
  e->elems = K * N;
  e->valid = true;
  c.entry_sample[slot] = key.sample;
  c.cached_elems += e->elems;
  return e->packed;
}

BCacheStats b_cache_stats() {
  const Cache& c = cache();
  return {c.calls, c.hits, static_cast<std::uint64_t>(c.cached_elems)};
}

}  // namespace probelab::num::detail
