// The packed B operand kept between GEMMs of one thread (detail/gemm_internal.h: packed_b). A
// product by the same weights again - a recurrent cell multiplies its hidden state by R at every
// step, 32 to 128 times per op; a model's weights, read into a fresh buffer for every op, at every
// step - finds B already packed: the cache holds the source patterns it was packed from and is
// used only when the operand's patterns are equal to them (and its shape, type and Mode are the
// same), so the result is the one packing again would give, bit for bit. An operand is known by
// its shape and a sample of its patterns (not by its address, which a fresh buffer does not
// keep). Only an operand seen again among the last calls (same shape and sample) is cached, in
// one of a few entries (a GRU's gate blocks, both directions, the weights of a block), so a GEMM
// that never repeats pays a sample of its patterns and a few comparisons of keys; an operand
// whose values change at every call but not at the sampled places (an im2col scratch) is not
// cached again once its entry has missed without ever being used.
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
};

constexpr std::size_t kEntries = 8, kHistory = 32;
// Larger operands are packed every time: an entry holds about 6 bytes per element (patterns and
// packed floats), and packing costs 1/M of the product, small where B is this large (a
// transformer's projections over a whole sequence). The entries hold at most about 48 MiB.
constexpr std::int64_t kMaxCachedElems = std::int64_t{1} << 20;

struct Cache {
  Entry entries[kEntries];
  Key recent[kHistory];  // the operands of the last calls, cached or not
  std::size_t next = 0;
  Key volatile_keys[kHistory];  // operands whose values changed before their entry was used
  std::size_t next_volatile = 0;
  std::uint64_t calls = 0;
};

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
  for (Entry& e : c.entries)
    if (e.valid && e.key == key) {
      if (same_source(e, b, K, N)) {
        e.used = c.calls;
        ++e.hits;
        return e.packed;
      }
      // Other values of the same shape and sample: packed again below, unless the entry was
      // never used (a scratch buffer), which is then left uncached.
      if (e.hits == 0) {
        e.valid = false;
        c.volatile_keys[c.next_volatile] = key;
        c.next_volatile = (c.next_volatile + 1) % kHistory;
      }
      break;
    }
  // Keys differ mostly in their sample, their first member: most comparisons stop there.
  const bool seen = std::ranges::find(c.recent, key) != std::end(c.recent) &&
                    std::ranges::find(c.volatile_keys, key) == std::end(c.volatile_keys);
  c.recent[c.next] = key;
  c.next = (c.next + 1) % kHistory;
  if (!seen) {
    scratch = pack_b(b, K, N, mode, storage, capacity);
    return scratch;
  }
  Entry* e = &c.entries[0];
  for (Entry& x : c.entries) {
    if (x.valid && x.key == key) {  // the stale entry of this operand
      e = &x;
      break;
    }
    if (!x.valid || x.used < e->used) e = &x;
  }
  e->valid = false;
  e->source.clear();  // the rows appended in order: `at` is always the current end
  for_rows(b, K, N, [&](const std::uint16_t* row, std::int64_t len, std::int64_t) {
    e->source.insert(e->source.end(), row, row + len);
  });
  e->packed = pack_b(b, K, N, mode, e->buf, e->cap);
  e->key = key;
  e->used = c.calls;
  e->hits = 0;
  e->valid = true;
  return e->packed;
}

}  // namespace probelab::num::detail
