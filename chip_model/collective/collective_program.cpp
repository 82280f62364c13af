#include "chip_model/collective/collective_program.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace probelab::chip {
namespace {

using spec::CollectiveAlgo;
using spec::CollectiveOp;
using Kind = ProgStep::Kind;

std::uint32_t ceil_log2(std::uint32_t n) {
  std::uint32_t k = 0;
  while ((1u << k) < n) ++k;
  return k;
}

class Builder {
 public:
  explicit Builder(const ProgramRequest& r) : r_(r), n_(r.size), p_(r.position) {
    prog_.position = p_;
    prog_.size = n_;
  }

  RankProgram build() {
    switch (r_.algo) {
      case CollectiveAlgo::Ring:
        prog_.steps.reserve(4 * std::size_t{n_});
        ring();
        break;
      case CollectiveAlgo::Tree: tree(); break;
      case CollectiveAlgo::Direct: direct(); break;
    }
    return std::move(prog_);
  }

 private:
  std::uint32_t mod(std::int64_t x) const {
    const auto n = static_cast<std::int64_t>(n_);
    return static_cast<std::uint32_t>(((x % n) + n) % n);
  }
  void rounds(std::uint32_t r) { prog_.rounds = std::max(prog_.rounds, r); }
  void send(std::uint32_t peer, std::uint32_t tag, std::uint32_t round, Operand from, std::uint32_t slot,
            std::uint64_t begin, std::uint64_t count) {
    if (count == 0 || peer == p_) return;
    ProgStep s;
    s.kind = Kind::Send;
    s.peer = peer;
    s.tag = tag;
    s.round = round;
    s.from = from;
    s.slot = slot;
    s.begin = begin;
    s.count = count;
    prog_.steps.push_back(std::move(s));
  }
  void recv(std::uint32_t peer, std::uint32_t tag, std::uint32_t round, Combine c, std::uint32_t slot,
            std::uint64_t begin, std::uint64_t count, std::uint64_t dst) {
    if (count == 0 || peer == p_) return;
    ProgStep s;
    s.kind = Kind::Recv;
    s.peer = peer;
    s.tag = tag;
    s.round = round;
    s.combine = c;
    s.slot = slot;
    s.begin = begin;
    s.count = count;
    s.dst = dst;
    prog_.steps.push_back(std::move(s));
  }
  void finalize(std::uint32_t slot, std::uint64_t begin, std::uint64_t count, std::uint64_t dst, bool in_place = false) {
    if (count == 0) return;
    ProgStep s;
    s.kind = Kind::Finalize;
    s.slot = slot;
    s.begin = begin;
    s.count = count;
    s.dst = dst;
    s.in_place = in_place;
    prog_.steps.push_back(std::move(s));
  }
  void copy(std::uint64_t begin, std::uint64_t count, std::uint64_t dst) {
    if (count == 0) return;
    ProgStep s;
    s.kind = Kind::Copy;
    s.begin = begin;
    s.count = count;
    s.dst = dst;
    prog_.steps.push_back(std::move(s));
  }

  // ---- ring ----
  // Reduce-scatter: in step s position q sends its partial of chunk (q-1-s) to q+1, which adds
  // its own contribution (received partial first): chunk c is summed in position order c+1, c+2,
  // ..., c and ends on position c. All-gather: in step N-1+s q forwards chunk (q-s) to q+1.
  void ring() {
    const std::uint64_t cnt = r_.count;
    const bool blocks = r_.op == CollectiveOp::ReduceScatter || r_.op == CollectiveOp::AllGather;
    const Chunking ch{cnt, n_};
    auto begin = [&](std::uint32_t c) { return blocks ? c * cnt : ch.begin(c); };
    auto size = [&](std::uint32_t c) { return blocks ? cnt : ch.size(c); };
    const std::uint32_t next = mod(p_ + 1), prev = mod(std::int64_t{p_} - 1);
    switch (r_.op) {
      case CollectiveOp::AllReduce:
      case CollectiveOp::ReduceScatter: {
        for (std::uint32_t s = 0; s + 1 < n_; ++s) {
          const std::uint32_t ks = mod(std::int64_t{p_} - 1 - s), kr = mod(std::int64_t{p_} - 2 - s);
          send(next, s, s, s == 0 ? Operand::Input : Operand::Slot, ks, begin(ks), size(ks));
          recv(prev, s, s, Combine::AddRecvFirst, kr, begin(kr), size(kr), 0);
        }
        rounds(n_ - 1);
        if (r_.op == CollectiveOp::ReduceScatter) {
          finalize(p_, begin(p_), cnt, 0);
          break;
        }
        finalize(p_, begin(p_), size(p_), begin(p_));
        for (std::uint32_t s = 0; s + 1 < n_; ++s) {
          const std::uint32_t ks = mod(std::int64_t{p_} - s), kr = mod(std::int64_t{p_} - 1 - s);
          send(next, n_ - 1 + s, n_ - 1 + s, Operand::Output, 0, begin(ks), size(ks));
          recv(prev, n_ - 1 + s, n_ - 1 + s, Combine::Store, 0, begin(kr), size(kr), begin(kr));
        }
        rounds(2 * (n_ - 1));
        break;
      }
      case CollectiveOp::AllGather:
        copy(0, cnt, p_ * cnt);
        for (std::uint32_t s = 0; s + 1 < n_; ++s) {
          const std::uint32_t ks = mod(std::int64_t{p_} - s), kr = mod(std::int64_t{p_} - 1 - s);
          send(next, s, s, Operand::Output, 0, begin(ks), cnt);
          recv(prev, s, s, Combine::Store, 0, begin(kr), cnt, begin(kr));
        }
        rounds(n_ - 1);
        break;
      case CollectiveOp::Broadcast: {
        // Chunk i crosses hop h (root+h -> root+h+1) in step i + h.
        const std::uint32_t h = mod(std::int64_t{p_} - r_.root_pos);
        if (h == 0) copy(0, cnt, 0);
        for (std::uint32_t t = 0; n_ > 1 && t < 2 * (n_ - 1); ++t) {
          if (h + 1 < n_ && t >= h && t - h < n_) send(next, t, t, Operand::Output, 0, ch.begin(t - h), ch.size(t - h));
          if (h >= 1 && t + 1 >= h && t + 1 - h < n_)
            recv(prev, t, t, Combine::Store, 0, ch.begin(t + 1 - h), ch.size(t + 1 - h), ch.begin(t + 1 - h));
        }
        rounds(n_ > 1 ? 2 * (n_ - 1) : 0);
        break;
      }
    }
  }

  // ---- tree ----
  // Binomial tree on v = (p - root) mod N: in reduce step k, v with v mod 2^(k+1) == 2^k sends its
  // partial to v - 2^k, which adds it to its own (own partial first). The root finalizes; the
  // result goes down the same tree. For N = 8: ((v0+v1)+(v2+v3))+((v4+v5)+(v6+v7)).
  void tree() {
    const std::uint32_t k_levels = ceil_log2(n_);
    const std::uint64_t cnt = r_.count;
    const std::uint32_t v = mod(std::int64_t{p_} - r_.root_pos);
    auto pos = [&](std::uint32_t x) { return mod(std::int64_t{x} + r_.root_pos); };
    auto reduce = [&](std::uint64_t elems) {
      for (std::uint32_t k = 0; k < k_levels; ++k) {
        const std::uint32_t bit = 1u << k;
        if (v % (2 * bit) == bit) {
          send(pos(v - bit), k, k, Operand::Slot, 0, 0, elems);
          break;
        }
        if (v + bit < n_) recv(pos(v + bit), k, k, Combine::AddOwnFirst, 0, 0, elems, 0);
      }
    };
    // Broadcast of `elems` output elements down the tree, in rounds first_round + 0..K-1.
    auto broadcast = [&](std::uint64_t elems, std::uint32_t first_round) {
      for (std::uint32_t k = k_levels; k-- > 0;) {
        const std::uint32_t bit = 1u << k, round = first_round + (k_levels - 1 - k);
        if (v % (2 * bit) == 0 && v + bit < n_) send(pos(v + bit), round, round, Operand::Output, 0, 0, elems);
        if (v % (2 * bit) == bit) recv(pos(v - bit), round, round, Combine::Store, 0, 0, elems, 0);
      }
    };
    switch (r_.op) {
      case CollectiveOp::AllReduce:
        reduce(cnt);
        if (v == 0) finalize(0, 0, cnt, 0);
        broadcast(cnt, k_levels);
        rounds(2 * k_levels);
        break;
      case CollectiveOp::ReduceScatter:
        reduce(cnt * n_);
        if (v == 0) {
          finalize(0, 0, cnt * n_, 0, true);
          for (std::uint32_t q = 0; q < n_; ++q) send(q, k_levels, k_levels, Operand::Slot, 0, q * cnt, cnt);
          // The root's own block: finalized values of the slot.
          finalize(0, p_ * cnt, cnt, 0);
        } else {
          recv(r_.root_pos, k_levels, k_levels, Combine::Store, 0, 0, cnt, 0);
        }
        rounds(k_levels + (n_ > 1 ? 1 : 0));
        break;
      case CollectiveOp::AllGather: {
        copy(0, cnt, p_ * cnt);
        // Blocks of the v-range [a, b) in output order: positions (a + root) mod N onwards,
        // two contiguous pieces when they wrap.
        auto pieces = [&](std::uint32_t a, std::uint32_t b, auto&& f) {
          const std::uint32_t start = pos(a), len = b - a;
          const std::uint32_t first = std::min(len, n_ - start);
          f(0u, start * cnt, first * cnt);
          if (first < len) f(1u, 0, (len - first) * cnt);
        };
        for (std::uint32_t k = 0; k < k_levels; ++k) {
          const std::uint32_t bit = 1u << k;
          if (v % (2 * bit) == bit) {
            pieces(v, std::min(v + bit, n_), [&](std::uint32_t part, std::uint64_t b, std::uint64_t c) {
              send(pos(v - bit), 2 * k + part, k, Operand::Output, 0, b, c);
            });
            break;
          }
          if (v + bit < n_)
            pieces(v + bit, std::min(v + 2 * bit, n_), [&](std::uint32_t part, std::uint64_t b, std::uint64_t c) {
              recv(pos(v + bit), 2 * k + part, k, Combine::Store, 0, b, c, b);
            });
        }
        // Broadcast of the gathered buffer; tags after the gather's.
        for (std::uint32_t k = k_levels; k-- > 0;) {
          const std::uint32_t bit = 1u << k, round = k_levels + (k_levels - 1 - k), tag = 2 * k_levels + round;
          if (v % (2 * bit) == 0 && v + bit < n_) send(pos(v + bit), tag, round, Operand::Output, 0, 0, cnt * n_);
          if (v % (2 * bit) == bit) recv(pos(v - bit), tag, round, Combine::Store, 0, 0, cnt * n_, 0);
        }
        rounds(2 * k_levels);
        break;
      }
      case CollectiveOp::Broadcast:
        if (v == 0) copy(0, cnt, 0);
        broadcast(cnt, 0);
        rounds(k_levels);
        break;
    }
  }

  // ---- direct ----
  // One step: every position sends what each peer needs to each peer; each rank folds the N
  // contributions left to right in its own order: ((o0 + o1) + o2) + ...
  void direct() {
    const std::uint64_t cnt = r_.count;
    switch (r_.op) {
      case CollectiveOp::AllReduce:
      case CollectiveOp::ReduceScatter: {
        const bool rs = r_.op == CollectiveOp::ReduceScatter;
        for (std::uint32_t q = 0; q < n_; ++q) send(q, 0, 0, Operand::Input, 0, rs ? q * cnt : 0, cnt);
        if (n_ == 1) {
          finalize(0, 0, cnt, 0);
        } else {
          ProgStep f;
          f.kind = Kind::FoldAll;
          f.begin = rs ? p_ * cnt : 0;
          f.count = cnt;
          prog_.fold_order = r_.direct_order;
          prog_.steps.push_back(std::move(f));
        }
        rounds(n_ > 1 ? 1 : 0);
        break;
      }
      case CollectiveOp::AllGather:
        copy(0, cnt, p_ * cnt);
        for (std::uint32_t q = 0; q < n_; ++q) send(q, 0, 0, Operand::Input, 0, 0, cnt);
        for (std::uint32_t q = 0; q < n_; ++q) recv(q, 0, 0, Combine::Store, 0, 0, cnt, q * cnt);
        rounds(n_ > 1 ? 1 : 0);
        break;
      case CollectiveOp::Broadcast:
        if (p_ == r_.root_pos) {
          copy(0, cnt, 0);
          for (std::uint32_t q = 0; q < n_; ++q) send(q, 0, 0, Operand::Input, 0, 0, cnt);
        } else {
          recv(r_.root_pos, 0, 0, Combine::Store, 0, 0, cnt, 0);
        }
        rounds(n_ > 1 ? 1 : 0);
        break;
    }
  }

  const ProgramRequest& r_;
  std::uint32_t n_, p_;
  RankProgram prog_;
};

}  // namespace

namespace {

void check_request(const ProgramRequest& req) {
  if (req.size == 0) throw std::invalid_argument("collective program: empty group");
  if (req.position >= req.size)
    throw std::invalid_argument(fmt::format("collective program: position {} outside a group of {}", req.position, req.size));
  if (req.root_pos >= req.size)
    throw std::invalid_argument(fmt::format("collective program: root position {} outside a group of {}", req.root_pos, req.size));
  if (req.count == 0) throw std::invalid_argument("collective program: count must be > 0");
  if (static_cast<unsigned>(req.algo) > 2) throw std::invalid_argument("collective program: algorithm must be ring, tree or direct");
  if (static_cast<unsigned>(req.op) > 3) throw std::invalid_argument("collective program: unknown op");
  if (!req.direct_order.empty()) {
    std::vector<std::uint32_t> s = req.direct_order;
    std::sort(s.begin(), s.end());
    bool perm = s.size() == req.size;
    for (std::size_t i = 0; perm && i < s.size(); ++i) perm = s[i] == i;
    if (!perm)
      throw std::invalid_argument(fmt::format("collective program: direct order of position {} is not a permutation of "
                                              "positions 0..{}",
                                              req.position, req.size - 1));
  }
}

}  // namespace

RankProgram build_program(const ProgramRequest& req) {
  check_request(req);
  return Builder(req).build();
}

// Ring candidates, in the order Builder::ring() emits them (a candidate whose count is 0 or whose
// peer is this position is skipped there and here):
//   AllReduce / ReduceScatter: send, recv for s = 0..N-2; finalize; AllReduce only: send, recv
//     for s = 0..N-2 of the all-gather
//   AllGather: copy; send, recv for s = 0..N-2
//   Broadcast: copy (the root only); send, recv for t = 0..2(N-1)-1
ProgramCursor::ProgramCursor(ProgramRequest req) : req_(std::move(req)) {
  check_request(req_);
  lazy_ = req_.algo == CollectiveAlgo::Ring;
  if (lazy_) {
    const std::uint64_t pairs = 2 * std::uint64_t{req_.size - 1};
    const bool two_phases = req_.op == CollectiveOp::AllReduce || req_.op == CollectiveOp::Broadcast;
    end_ = (two_phases ? 2 * pairs : pairs) + 1;
    blocks_ = req_.op == CollectiveOp::ReduceScatter || req_.op == CollectiveOp::AllGather;
    chunk_q_ = req_.count / req_.size;
    chunk_r_ = req_.count % req_.size;
    next_ = (req_.position + 1) % req_.size;
    prev_ = (req_.position + req_.size - 1) % req_.size;
  } else {
    prog_ = Builder(req_).build();
    end_ = prog_.steps.size();
  }
  settle();
}

void ProgramCursor::next() {
  if (done_) return;
  ++k_;
  settle();
}

void ProgramCursor::settle() {
  for (; k_ < end_; ++k_) {
    if (!lazy_) {
      cur_ = prog_.steps[k_];
      return;
    }
    if (ring_candidate(k_)) return;
    k_ = ring_skip(k_);
  }
  done_ = true;
}

std::uint64_t ProgramCursor::ring_skip(std::uint64_t k) const {
  const std::uint32_t n = req_.size, p = req_.position;
  const std::uint64_t m = std::min<std::uint64_t>(req_.count, n);  // chunks 0..m-1 hold elements
  if (req_.op != CollectiveOp::AllReduce || m == n) return k;
  // In exchange s of a phase the send carries chunk d = (a - s) mod N and the receive chunk
  // d - 1 (mod N): one of them is non-empty iff d <= m, and d falls by one per exchange.
  const std::uint64_t pairs = 2 * std::uint64_t{n - 1};
  if (k == pairs) return k;
  const std::uint64_t first = k < pairs ? 0 : pairs + 1;
  const std::uint64_t a = k < pairs ? p + n - 1 : p + n;
  const std::uint64_t s = (k - first) / 2, d = (a - s) % n;
  if (d <= m) return k;
  const std::uint64_t s2 = s + (d - m);
  if (s2 > n - 2) return first + pairs - 1;  // nothing left in this phase
  return first + 2 * s2 - 1;                 // the caller's ++k lands on exchange s2's send
}

// Inlined into settle(), its one caller: it runs for every step of a ring.
[[gnu::always_inline]] inline bool ProgramCursor::ring_candidate(std::uint64_t k) {
  const std::uint32_t n = req_.size, p = req_.position;
  const std::uint64_t cnt = req_.count, q = chunk_q_, r = chunk_r_;
  const bool blocks = blocks_;
  // Chunking{cnt, n} with its quotient and remainder computed once.
  auto chunk_begin = [q, r](std::uint64_t c) { return c * q + std::min(c, r); };
  auto chunk_size = [q, r](std::uint64_t c) { return q + (c < r ? 1 : 0); };
  // Position x (mod N) for -N <= x < 2N.
  auto pos = [n](std::int64_t x) {
    const auto m = static_cast<std::int64_t>(n);
    return static_cast<std::uint32_t>(x < 0 ? x + m : x >= m ? x - m : x);
  };
  auto begin = [&](std::uint32_t c) { return blocks ? c * cnt : chunk_begin(c); };
  auto size = [&](std::uint32_t c) { return blocks ? cnt : chunk_size(c); };
  const std::uint32_t next = next_, prev = prev_;
  const std::uint64_t pairs = 2 * std::uint64_t{n - 1};
  ProgStep& st = cur_;
  st = ProgStep{};
  // Exchange j / 2 of a phase: its send (even j: block ks) or its receive (odd j: block kr).
  auto exchange = [&](std::uint64_t j, std::uint32_t tag, Operand from, Combine combine, std::uint32_t ks,
                      std::uint32_t kr, std::uint64_t elems) {
    st.tag = st.round = tag;
    if (j % 2 == 0) {
      st.kind = Kind::Send;
      st.peer = next;
      st.from = from;
      st.slot = from == Operand::Output ? 0 : ks;
      st.begin = begin(ks);
      st.count = elems ? elems : size(ks);
    } else {
      st.kind = Kind::Recv;
      st.peer = prev;
      st.combine = combine;
      st.slot = combine == Combine::AddRecvFirst ? kr : 0;
      st.begin = begin(kr);
      st.count = elems ? elems : size(kr);
      st.dst = combine == Combine::Store ? begin(kr) : 0;
    }
    return st.count != 0 && st.peer != p;
  };
  switch (req_.op) {
    case CollectiveOp::AllReduce:
    case CollectiveOp::ReduceScatter: {
      if (k < pairs) {
        const auto s = static_cast<std::uint32_t>(k / 2);
        return exchange(k, s, s == 0 ? Operand::Input : Operand::Slot, Combine::AddRecvFirst,
                        pos(std::int64_t{p} - 1 - s), pos(std::int64_t{p} - 2 - s), 0);
      }
      if (k == pairs) {
        const bool rs = req_.op == CollectiveOp::ReduceScatter;
        st.kind = Kind::Finalize;
        st.slot = p;
        st.begin = begin(p);
        st.count = rs ? cnt : size(p);
        st.dst = rs ? 0 : begin(p);
        return st.count != 0;
      }
      const std::uint64_t j = k - pairs - 1;
      const auto s = static_cast<std::uint32_t>(j / 2);
      return exchange(j, n - 1 + s, Operand::Output, Combine::Store, pos(std::int64_t{p} - s),
                      pos(std::int64_t{p} - 1 - s), 0);
    }
    case CollectiveOp::AllGather: {
      if (k == 0) {
        st.kind = Kind::Copy;
        st.count = cnt;
        st.dst = p * cnt;
        return true;
      }
      const std::uint64_t j = k - 1;
      const auto s = static_cast<std::uint32_t>(j / 2);
      return exchange(j, s, Operand::Output, Combine::Store, pos(std::int64_t{p} - s), pos(std::int64_t{p} - 1 - s),
                      cnt);
    }
    case CollectiveOp::Broadcast: {
      // Chunk i crosses hop h (root+h -> root+h+1) in step i + h.
      const std::uint32_t h = pos(std::int64_t{p} - req_.root_pos);
      if (k == 0) {
        st.kind = Kind::Copy;
        st.count = cnt;
        return h == 0;
      }
      const std::uint64_t j = k - 1;
      const auto t = static_cast<std::uint32_t>(j / 2);
      st.tag = st.round = t;
      if (j % 2 == 0) {
        if (!(h + 1 < n && t >= h && t - h < n)) return false;
        st.kind = Kind::Send;
        st.peer = next;
        st.from = Operand::Output;
        st.begin = chunk_begin(t - h);
        st.count = chunk_size(t - h);
      } else {
        if (!(h >= 1 && t + 1 >= h && t + 1 - h < n)) return false;
        st.kind = Kind::Recv;
        st.peer = prev;
        st.begin = st.dst = chunk_begin(t + 1 - h);
        st.count = chunk_size(t + 1 - h);
      }
      return st.count != 0 && st.peer != p;
    }
  }
  return false;
}

}  // namespace probelab::chip
