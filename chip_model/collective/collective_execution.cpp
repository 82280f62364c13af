#include "chip_model/collective/collective_execution.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "chip_model/clock.h"
#include "chip_model/collective/network.h"
#include "chip_model/hbm.h"

namespace probelab::chip {
namespace {

std::string header_text(const CollectiveHeader& h) {
  return fmt::format("{} {} count {} dtype {} {} root position {} group of {}",
                     spec::collective_op_name(static_cast<spec::CollectiveOp>(h.op)),
                     spec::collective_algo_name(static_cast<spec::CollectiveAlgo>(h.algorithm)), h.count,
                     graph::dtype_name(static_cast<graph::DType>(h.dtype)), h.reduction ? "mean" : "sum", h.root,
                     h.group_size);
}

}  // namespace

CollectiveExecution::CollectiveExecution(Setup s, ProgramCursor prog)
    : s_(std::move(s)), prog_(std::move(prog)), es_(graph::dtype_size(s_.data)), out_(s_.out_count * es_),
      t_(s_.arrival_ps) {}

bool CollectiveExecution::advance() {
  if (!conflict_.empty()) return false;
  while (const ProgStep* step = prog_.step()) {
    const ProgStep& st = *step;
    switch (st.kind) {
      case ProgStep::Kind::Send: send(st); break;
      case ProgStep::Kind::Recv: {
        Message* m = next_message(st, st.peer);
        if (!m) return false;
        recv(st, *m);
        given_ = nullptr;
        break;
      }
      case ProgStep::Kind::Finalize: finalize(st); break;
      case ProgStep::Kind::Copy:
        std::memcpy(out_.data() + st.dst * es_, s_.input.bytes().data() + st.begin * es_, st.count * es_);
        break;
      case ProgStep::Kind::FoldAll: {
        fold_msgs_.resize(s_.group.size);
        for (; fold_next_ < s_.group.size; ++fold_next_) {
          if (fold_next_ == s_.position) continue;
          Message* m = next_message(st, fold_next_);
          if (!m) return false;
          fold_msgs_[fold_next_] = std::move(*m);
          given_ = nullptr;
        }
        fold_all(st);
        fold_msgs_.clear();
        fold_next_ = 0;
        break;
      }
    }
    prog_.next();
  }
  finished_ = true;
  return true;
}

Message* CollectiveExecution::next_message(const ProgStep& st, std::uint32_t from_pos) {
  const MessageKey key{s_.comm, s_.seq, st.tag, from_pos};
  Message* m = given_ && given_->key == key ? given_ : s_.source->take(key);
  if (!m || !check(*m, st)) {
    given_ = nullptr;
    awaited_ = key;
    awaited_rank_ = s_.group.member(from_pos);
    return nullptr;
  }
  return m;
}

bool CollectiveExecution::check(const Message& m, const ProgStep& st) {
  if (!(m.header == s_.header)) {
    const bool same_call = m.header.op == s_.header.op && m.header.count == s_.header.count &&
                           m.header.dtype == s_.header.dtype && m.header.group_size == s_.header.group_size;
    if (!same_call) {  // the ranks' programs went apart before it: this rank waits for ever
      conflict_ = header_text(m.header);
      return false;
    }
    throw std::runtime_error(fmt::format("collective comm {} #{}: r{} and r{} disagree on the collective: r{} has {}, "
                                         "r{} has {} (an algorithm forced by an injector must be forced on every rank "
                                         "of the group)",
                                         s_.comm, s_.seq, m.src, m.dst, m.src, header_text(m.header), m.dst,
                                         header_text(s_.header)));
  }
  const std::uint64_t elems = m.payload.size / graph::dtype_size(static_cast<graph::DType>(m.dtype));
  if (elems != st.count)
    throw std::runtime_error(fmt::format("collective comm {} #{}: r{} sent {} elements to r{}, which expects {}",
                                         s_.comm, s_.seq, m.src, elems, m.dst, st.count));
  return true;
}

std::string CollectiveExecution::describe() const { return header_text(s_.header); }

// The helpers below are inlined where they are called: every message goes through them.
[[gnu::always_inline]] inline std::uint64_t CollectiveExecution::hbm_time(std::uint64_t addr, std::uint64_t bytes,
                                                                        std::uint64_t start, bool write) {
  if (bytes == 0) return start;
  return s_.hbm->transfer_at_ps(addr, bytes, start, HbmClient::Collective, write, 0, false);
}

Value CollectiveExecution::own(std::uint64_t begin, std::uint64_t count) const {
  return load_value(s_.input.bytes(), s_.data, begin, count);
}

void CollectiveExecution::own_into(Value& v, std::uint64_t begin, std::uint64_t count) const {
  load_value_into(v, s_.input.bytes(), s_.data, begin, count);
}

[[gnu::always_inline]] inline CollectiveExecution::Slot* CollectiveExecution::find_slot(std::uint32_t id) {
  for (Slot& sl : slots_)
    if (sl.live && sl.id == id) return &sl;
  return nullptr;
}

CollectiveExecution::Slot& CollectiveExecution::slot(std::uint32_t id) {
  if (Slot* sl = find_slot(id)) return *sl;
  auto free = std::find_if(slots_.begin(), slots_.end(), [](const Slot& sl) { return !sl.live; });
  Slot& sl = free != slots_.end() ? *free : slots_.emplace_back();
  sl.id = id;
  sl.live = true;
  return sl;
}

void CollectiveExecution::send(const ProgStep& st) {
  Message m;
  m.src = s_.rank;
  m.dst = s_.group.member(st.peer);
  m.seq = (*s_.send_seq)++;
  m.key = {s_.comm, s_.seq, st.tag, s_.position};
  m.header = s_.header;
  m.dtype = static_cast<std::uint8_t>(s_.data);
  std::uint64_t addr = s_.args.input.addr + st.begin * es_;
  Slot* sl = st.from == Operand::Slot ? find_slot(st.slot) : nullptr;
  if (st.from == Operand::Input || (st.from == Operand::Slot && !sl)) {
    m.payload = s_.input;
    m.payload.offset += st.begin * es_;
    m.payload.size = st.count * es_;
  } else if (st.from == Operand::Output) {
    m.payload.assign(std::span<const std::byte>(out_).subspan(st.begin * es_, st.count * es_));
    addr = s_.args.output.addr + st.begin * es_;
  } else if (sl->final) {
    m.payload.assign(sl->v.view().subspan((st.begin - sl->begin) * es_, st.count * es_));
    addr = s_.args.output.addr;
  } else {
    m.partial = true;
    m.dtype = static_cast<std::uint8_t>(sl->v.dt);
    m.payload.assign(sl->v.view());
    sl->live = false;  // a partial is sent once (ring: forwarded; tree: handed to the parent)
    addr = s_.args.output.addr;
  }
  m.wire_bytes = m.payload.size;
  bytes_sent_ += m.wire_bytes;
  ++messages_;
  const std::uint64_t read_done = hbm_time(addr, m.wire_bytes, t_, false);
  send_free_ = std::max(send_free_, s_.net->send(std::move(m), t_, read_done));
}

std::uint64_t CollectiveExecution::land(const Message& m, std::uint64_t dst, std::uint64_t begin, bool adds) {
  const std::uint64_t start = std::max(m.head_ps, s_.arrival_ps);
  std::uint64_t landed = std::max(m.tail_ps, hbm_time(s_.args.output.addr + dst * es_, m.wire_bytes, start, true));
  if (adds) landed = std::max(landed, hbm_time(s_.args.input.addr + begin * es_, m.wire_bytes, start, false));
  return landed + jitter();
}

[[gnu::always_inline]] inline void CollectiveExecution::advance_to(std::uint64_t landed) {
  if (landed > t_) recv_wait_ += landed - t_;
  t_ = std::max(t_, landed);
}

Value CollectiveExecution::payload_value(const Message& m) const {
  return load_value(m.payload.bytes(), static_cast<graph::DType>(m.dtype), 0,
                    m.payload.size / graph::dtype_size(static_cast<graph::DType>(m.dtype)));
}

Value CollectiveExecution::add(Value a, Value b, std::uint64_t begin) {
  add_into(a, b, begin);
  return a;
}

void CollectiveExecution::add_into(Value& a, Value& b, std::uint64_t begin) {
  num::BulkReport r;
  convert_in_place(a, s_.acc, s_.mode, r);
  convert_in_place(b, s_.acc, s_.mode, r);
  add_values(a, b, s_.mode, r);
  rep_.merge(r, static_cast<std::int64_t>(begin));
}

void CollectiveExecution::recv(const ProgStep& st, const Message& m) {
  advance_to(land(m, st.dst, st.begin, st.combine != Combine::Store));
  const auto dt = static_cast<graph::DType>(m.dtype);
  load_value_into(in_, m.payload.bytes(), dt, 0, m.payload.size / graph::dtype_size(dt));
  switch (st.combine) {
    case Combine::Store:
      if (in_.dt != s_.data) throw std::runtime_error("collective: a partial sum arrived where final values were expected");
      store_value(in_, out_, st.dst);
      break;
    case Combine::AddRecvFirst: {
      own_into(own_, st.begin, st.count);
      add_into(in_, own_, st.begin);
      Slot& sl = slot(st.slot);
      std::swap(sl.v, in_);
      sl.final = false;
      sl.begin = st.begin;
      break;
    }
    case Combine::AddOwnFirst: {
      if (Slot* sl = find_slot(st.slot)) {
        add_into(sl->v, in_, st.begin);
        sl->final = false;
        sl->begin = st.begin;
        break;
      }
      own_into(own_, st.begin, st.count);
      add_into(own_, in_, st.begin);
      Slot& sl = slot(st.slot);
      std::swap(sl.v, own_);
      sl.final = false;
      sl.begin = st.begin;
      break;
    }
  }
}

Value CollectiveExecution::finish(Value acc, std::uint64_t begin) {
  num::BulkReport r;
  Value out = finish_value(std::move(acc), s_.data, s_.args.reduction == static_cast<std::uint8_t>(spec::ReduceOp::Mean),
                           s_.divisor, s_.mode, r);
  rep_.merge(r, static_cast<std::int64_t>(begin));
  return out;
}

void CollectiveExecution::finalize(const ProgStep& st) {
  Slot* sl = find_slot(st.slot);
  if (sl && sl->final) {
    load_value_into(res_, sl->v.view(), sl->v.dt, st.begin - sl->begin, st.count);
  } else if (sl) {
    res_ = finish(std::move(sl->v), st.begin);
    sl->live = false;
  } else {
    own_into(res_, st.begin, st.count);  // a single contribution: its bits unchanged
  }
  if (st.in_place) {
    Slot& out = slot(st.slot);
    std::swap(out.v, res_);
    out.final = true;
    out.begin = st.begin;
  } else {
    store_value(res_, out_, st.dst);
  }
}

void CollectiveExecution::fold_all(const ProgStep& st) {
  const std::uint32_t n = s_.group.size;
  std::vector<Message>& msgs = fold_msgs_;
  // Landing in HBM in the order the heads arrived (ties: position); jitter drawn by position.
  std::vector<std::uint32_t> by_head;
  for (std::uint32_t p = 0; p < n; ++p)
    if (p != s_.position) by_head.push_back(p);
  std::stable_sort(by_head.begin(), by_head.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return msgs[a].head_ps < msgs[b].head_ps; });
  std::vector<std::uint64_t> landed(n, s_.arrival_ps);
  for (std::uint32_t p : by_head) landed[p] = land(msgs[p], 0, st.begin, true);
  for (std::uint32_t p = 0; p < n; ++p)
    if (p != s_.position) advance_to(landed[p]);
  std::vector<std::uint32_t> order = prog_.fold_order();
  if (order.empty()) {
    order.push_back(s_.position);
    std::vector<std::uint32_t> rest = by_head;
    std::stable_sort(rest.begin(), rest.end(), [&](std::uint32_t a, std::uint32_t b) {
      return landed[a] != landed[b] ? landed[a] < landed[b] : a < b;
    });
    order.insert(order.end(), rest.begin(), rest.end());
  }
  auto contribution = [&](std::uint32_t p) {
    return p == s_.position ? own(st.begin, st.count) : payload_value(msgs[p]);
  };
  Value acc = contribution(order[0]);
  for (std::size_t j = 1; j < order.size(); ++j) acc = add(std::move(acc), contribution(order[j]), st.begin);
  store_value(finish(std::move(acc), st.begin), out_, st.dst);
  order_ = std::move(order);
}

}  // namespace probelab::chip
