#include "chip_model/collective/collective_engine.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>

#include <fmt/format.h>

#include "chip_model/clock.h"
#include "chip_model/collective/collective_fabric.h"
#include "chip_model/collective/collective_program.h"
#include "chip_model/collective/collective_values.h"
#include "chip_model/detection_circuit.h"
#include "chip_model/hbm.h"
#include "numerics/fp16.h"
#include "chip_model/trace.h"

namespace probelab::chip {
namespace {

using spec::CollectiveOp;

std::int64_t numel(const spec::TensorRef& t) {
  std::int64_t n = 1;
  for (int i = 0; i < t.rank && i < spec::kMaxDims; ++i) n *= t.dims[i];
  return n;
}

/// splitmix64 finaliser, used to derive per-collective seeds.
std::uint64_t mix_seed(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// NaNs in the staged input (the adders read them: kExcNanInput on this rank).
num::ScanReport scan_input(std::span<const std::byte> in, graph::DType dt) {
  const Value v = load_value(in, dt, 0, in.size() / graph::dtype_size(dt));
  if (dt == graph::DType::F32) return num::scan(std::span<const float>(v.f));
  if (dt == graph::DType::F16) return num::scan(std::span<const num::f16>(v.h));
  return num::scan(std::span<const num::bf16>(v.b));
}

/// Element i of a staged buffer of dtype `dt` as FP32 (exact for F16/BF16).
float element_f32(const std::vector<std::byte>& buf, graph::DType dt, std::int64_t i) {
  if (i < 0) return 0.0f;
  const std::size_t es = graph::dtype_size(dt), at = static_cast<std::size_t>(i) * es;
  if (at + es > buf.size()) return 0.0f;
  if (dt == graph::DType::F32) {
    float v;
    std::memcpy(&v, buf.data() + at, 4);
    return v;
  }
  std::uint16_t b;
  std::memcpy(&b, buf.data() + at, 2);
  if (dt == graph::DType::BF16) return std::bit_cast<float>(std::uint32_t{b} << 16);
  return num::to_f32(std::bit_cast<num::f16>(b)).value;
}

/// Maps the flags of this rank's additions (and non-finite inputs) to a detection event: produced
/// kinds at their first element of the output (value from `out`), input kinds in input 0.
void fill_detection(DetectionEvent& ev, const num::BulkReport& rep, const num::ScanReport& in_scan,
                    const std::vector<std::byte>& out, float nan_value, float inf_value, graph::DType dt,
                    std::uint64_t cycle) {
  using num::Flag;
  auto kind = [&](spec::ExcKindBit k, std::uint32_t status, std::int64_t at, std::uint64_t count, float value,
                  bool input) {
    ev.status |= status;
    spec::ExcHit& h = ev.kinds[k];
    const auto e = static_cast<std::uint64_t>(std::max<std::int64_t>(at, 0));
    if (h.hit && e >= h.element) {
      h.count += count;
      return;
    }
    h = spec::ExcHit{true, e, (h.hit ? h.count : 0) + count, cycle, std::bit_cast<std::uint32_t>(value),
                     spec::kExcDetailCollective, 0, input, static_cast<std::uint8_t>(dt), std::nullopt};
  };
  auto out_value = [&](std::int64_t i) { return element_f32(out, dt, i); };
  if (rep.flags.has(Flag::Overflow))
    kind(spec::kExcOverflow, spec::kFsOverflow, rep.first_index(Flag::Overflow), 1, out_value(rep.first_index(Flag::Overflow)),
         false);
  if (rep.flags.has(Flag::Underflow))
    kind(spec::kExcUnderflow, spec::kFsUnderflow, rep.first_index(Flag::Underflow), 1,
         out_value(rep.first_index(Flag::Underflow)), false);
  if (rep.flags.has(Flag::DenormalOut))
    kind(spec::kExcUnderflow, spec::kFsUnderflow | spec::kFsDenormal, rep.first_index(Flag::DenormalOut), 1,
         out_value(rep.first_index(Flag::DenormalOut)), false);
  if (rep.flags.has(Flag::Invalid))
    kind(spec::kExcInvalid, spec::kFsInvalid, rep.first_index(Flag::Invalid), 1, out_value(rep.first_index(Flag::Invalid)),
         false);
  if (in_scan.nan_count > 0)
    kind(spec::kExcNanInput, spec::kFsNanInput, in_scan.first_nan, static_cast<std::uint64_t>(in_scan.nan_count), nan_value,
         true);
  if (in_scan.inf_count > 0)
    kind(spec::kExcInfInput, spec::kFsInfInput, in_scan.first_inf, static_cast<std::uint64_t>(in_scan.inf_count), inf_value,
         true);
  if (rep.flags.has(Flag::DenormalIn)) ev.status |= spec::kFsDenormal;
  if (rep.flags.has(Flag::DivByZero)) ev.status |= spec::kFsDivByZero;
}

std::string header_text(const CollectiveHeader& h) {
  return fmt::format("{} {} count {} dtype {} {} root position {} group of {}",
                     spec::collective_op_name(static_cast<CollectiveOp>(h.op)),
                     spec::collective_algo_name(static_cast<spec::CollectiveAlgo>(h.algorithm)), h.count,
                     graph::dtype_name(static_cast<graph::DType>(h.dtype)), h.reduction ? "mean" : "sum", h.root,
                     h.group_size);
}

/// One rank's execution of its program on real values, with the timing of every transfer.
class Execution {
 public:
  struct Setup {
    TaskContext* ctx = nullptr;
    CollectiveEngine* engine = nullptr;
    Network* net = nullptr;
    const spec::CollectiveArgs* args = nullptr;
    CommGroup group;
    std::uint32_t position = 0;
    std::uint32_t comm = 0, seq = 0;
    CollectiveHeader header;
    graph::DType data = graph::DType::F32, acc = graph::DType::F32;
    std::uint32_t divisor = 1;
    num::Mode mode;
    Payload input;
    std::uint64_t out_count = 0;
    std::uint64_t arrival_ps = 0;
    std::uint64_t jitter_ps = 0, jitter_seed = 0;
    std::uint64_t* send_seq = nullptr;
    std::function<Message(const MessageKey&, std::uint32_t)> take;
  };

  explicit Execution(Setup s)
      : s_(std::move(s)), es_(graph::dtype_size(s_.data)), out_(s_.out_count * es_), t_(s_.arrival_ps),
        rng_(s_.jitter_seed) {}

  void run(const RankProgram& prog) {
    for (const ProgStep& st : prog.steps) {
      switch (st.kind) {
        case ProgStep::Kind::Send: send(st); break;
        case ProgStep::Kind::Recv: recv(st); break;
        case ProgStep::Kind::Finalize: finalize(st); break;
        case ProgStep::Kind::Copy: std::memcpy(out_.data() + st.dst * es_, s_.input.bytes().data() + st.begin * es_, st.count * es_); break;
        case ProgStep::Kind::FoldAll: fold_all(st); break;
      }
    }
  }

  std::vector<std::byte>& output() { return out_; }
  const num::BulkReport& report() const { return rep_; }
  std::uint64_t done_ps() const { return std::max(t_, send_free_); }
  std::uint64_t recv_wait_ps() const { return recv_wait_; }
  std::uint64_t bytes_sent() const { return bytes_sent_; }
  std::uint64_t messages_sent() const { return messages_; }
  const std::vector<std::uint32_t>& order() const { return order_; }

 private:
  struct Slot {
    Value v;
    bool final = false;     // finalized in place: data dtype values of [begin, begin + size)
    std::uint64_t begin = 0;
  };

  Hbm& hbm() { return *s_.ctx->chip.hbm; }
  std::uint64_t hbm_time(std::uint64_t addr, std::uint64_t bytes, std::uint64_t start, bool write) {
    if (bytes == 0) return start;
    return ChipClock::to_ps(hbm().transfer(addr, bytes, ChipClock::from_ps(start), HbmClient::Collective, write, 0, false));
  }
  Value own(std::uint64_t begin, std::uint64_t count) const { return load_value(s_.input.bytes(), s_.data, begin, count); }
  std::uint64_t jitter() { return s_.jitter_ps == 0 ? 0 : rng_() % (s_.jitter_ps + 1); }

  void send(const ProgStep& st) {
    Message m;
    m.src = s_.engine->rank();
    m.dst = s_.group.member(st.peer);
    m.seq = (*s_.send_seq)++;
    m.key = {s_.comm, s_.seq, st.tag, s_.position};
    m.header = s_.header;
    m.dtype = static_cast<std::uint8_t>(s_.data);
    std::uint64_t addr = s_.args->input.addr + st.begin * es_;
    if (st.from == Operand::Input) {
      m.payload = s_.input;
      m.payload.offset += st.begin * es_;
      m.payload.size = st.count * es_;
    } else if (st.from == Operand::Output) {
      m.payload = Payload::own(std::vector<std::byte>(out_.begin() + st.begin * es_, out_.begin() + (st.begin + st.count) * es_));
      addr = s_.args->output.addr + st.begin * es_;
    } else {
      auto it = slots_.find(st.slot);
      if (it == slots_.end()) {
        m.payload = s_.input;
        m.payload.offset += st.begin * es_;
        m.payload.size = st.count * es_;
      } else if (it->second.final) {
        const std::vector<std::byte> all = it->second.v.bytes();
        const std::uint64_t off = (st.begin - it->second.begin) * es_;
        m.payload = Payload::own(std::vector<std::byte>(all.begin() + off, all.begin() + off + st.count * es_));
        addr = s_.args->output.addr;
      } else {
        m.partial = true;
        m.dtype = static_cast<std::uint8_t>(it->second.v.dt);
        m.payload = Payload::own(it->second.v.bytes());
        slots_.erase(it);  // a partial is sent once (ring: forwarded; tree: handed to the parent)
        addr = s_.args->output.addr;
      }
    }
    m.wire_bytes = m.payload.size;
    bytes_sent_ += m.wire_bytes;
    ++messages_;
    const std::uint64_t read_done = hbm_time(addr, m.wire_bytes, t_, false);
    send_free_ = std::max(send_free_, s_.net->send(std::move(m), t_, read_done));
  }

  /// Lands `m` in this rank's HBM (plus the read of the local operand of an addition); returns
  /// when the data is usable.
  std::uint64_t land(const Message& m, std::uint64_t dst, std::uint64_t begin, bool adds) {
    const std::uint64_t start = std::max(m.head_ps, s_.arrival_ps);
    std::uint64_t landed = std::max(m.tail_ps, hbm_time(s_.args->output.addr + dst * es_, m.wire_bytes, start, true));
    if (adds) landed = std::max(landed, hbm_time(s_.args->input.addr + begin * es_, m.wire_bytes, start, false));
    return landed + jitter();
  }

  void advance(std::uint64_t landed) {
    if (landed > t_) recv_wait_ += landed - t_;
    t_ = std::max(t_, landed);
  }

  Message receive(const ProgStep& st, std::uint32_t from_pos) {
    Message m = s_.take(MessageKey{s_.comm, s_.seq, st.tag, from_pos}, s_.group.member(from_pos));
    if (!(m.header == s_.header))
      throw std::runtime_error(fmt::format("collective comm {} #{}: r{} and r{} disagree on the collective: r{} has {}, "
                                           "r{} has {} (an algorithm forced by an injector must be forced on every "
                                           "rank of the group)",
                                           s_.comm, s_.seq, m.src, m.dst, m.src, header_text(m.header), m.dst,
                                           header_text(s_.header)));
    const std::uint64_t elems = m.payload.size / graph::dtype_size(static_cast<graph::DType>(m.dtype));
    if (elems != st.count)
      throw std::runtime_error(fmt::format("collective comm {} #{}: r{} sent {} elements to r{}, which expects {}",
                                           s_.comm, s_.seq, m.src, elems, m.dst, st.count));
    return m;
  }

  Value payload_value(const Message& m) const {
    return load_value(m.payload.bytes(), static_cast<graph::DType>(m.dtype), 0,
                      m.payload.size / graph::dtype_size(static_cast<graph::DType>(m.dtype)));
  }

  /// a + b in this rank's accumulation dtype, flags at element `begin` of the reduced buffer.
  Value add(Value a, Value b, std::uint64_t begin) {
    num::BulkReport r;
    Value x = convert_value(std::move(a), s_.acc, s_.mode, r);
    Value y = convert_value(std::move(b), s_.acc, s_.mode, r);
    add_values(x, y, s_.mode, r);
    rep_.merge(r, static_cast<std::int64_t>(begin));
    return x;
  }

  void recv(const ProgStep& st) {
    const Message m = receive(st, st.peer);
    advance(land(m, st.dst, st.begin, st.combine != Combine::Store));
    Value v = payload_value(m);
    switch (st.combine) {
      case Combine::Store:
        if (v.dt != s_.data) throw std::runtime_error("collective: a partial sum arrived where final values were expected");
        store_value(v, out_, st.dst);
        break;
      case Combine::AddRecvFirst:
        slots_[st.slot] = Slot{add(std::move(v), own(st.begin, st.count), st.begin), false, st.begin};
        break;
      case Combine::AddOwnFirst: {
        auto it = slots_.find(st.slot);
        Value lhs = it == slots_.end() ? own(st.begin, st.count) : std::move(it->second.v);
        slots_[st.slot] = Slot{add(std::move(lhs), std::move(v), st.begin), false, st.begin};
        break;
      }
    }
  }

  Value finish(Value acc, std::uint64_t begin) {
    num::BulkReport r;
    Value out = finish_value(std::move(acc), s_.data, s_.args->reduction == static_cast<std::uint8_t>(spec::ReduceOp::Mean),
                             s_.divisor, s_.mode, r);
    rep_.merge(r, static_cast<std::int64_t>(begin));
    return out;
  }

  void finalize(const ProgStep& st) {
    auto it = slots_.find(st.slot);
    Value res;
    std::uint64_t begin = st.begin;
    if (it != slots_.end() && it->second.final) {
      const std::vector<std::byte> all = it->second.v.bytes();
      res = load_value(all, it->second.v.dt, st.begin - it->second.begin, st.count);
    } else if (it != slots_.end()) {
      res = finish(std::move(it->second.v), st.begin);
      slots_.erase(it);
    } else {
      res = own(st.begin, st.count);  // a single contribution: its bits unchanged
    }
    if (st.in_place) {
      slots_[st.slot] = Slot{std::move(res), true, begin};
    } else {
      store_value(res, out_, st.dst);
    }
  }

  void fold_all(const ProgStep& st) {
    const std::uint32_t n = s_.group.size;
    std::vector<Message> msgs(n);
    for (std::uint32_t p = 0; p < n; ++p)
      if (p != s_.position) msgs[p] = receive(st, p);
    // Landing in HBM in the order the heads arrived (ties: position); jitter drawn by position.
    std::vector<std::uint32_t> by_head;
    for (std::uint32_t p = 0; p < n; ++p)
      if (p != s_.position) by_head.push_back(p);
    std::stable_sort(by_head.begin(), by_head.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return msgs[a].head_ps < msgs[b].head_ps; });
    std::vector<std::uint64_t> landed(n, s_.arrival_ps);
    for (std::uint32_t p : by_head) landed[p] = land(msgs[p], 0, st.begin, true);
    for (std::uint32_t p = 0; p < n; ++p)
      if (p != s_.position) advance(landed[p]);
    std::vector<std::uint32_t> order = st.order;
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

  Setup s_;
  std::size_t es_;
  std::vector<std::byte> out_;
  std::map<std::uint32_t, Slot> slots_;
  num::BulkReport rep_;
  std::uint64_t t_ = 0, send_free_ = 0, recv_wait_ = 0, bytes_sent_ = 0, messages_ = 0;
  std::mt19937_64 rng_;
  std::vector<std::uint32_t> order_;
};

}  // namespace

CollectiveEngine::CollectiveEngine(sc_core::sc_module_name name, std::uint32_t rank, CollectiveFabric& fabric)
    : sc_core::sc_module(name), rank_(rank), fabric_(fabric) {}

void CollectiveEngine::deliver(Message m) {
  const MessageKey k = m.key;
  if (!mailbox_.emplace(k, std::move(m)).second)
    throw std::runtime_error(fmt::format("collective comm {} #{}: r{} received message {} from position {} twice", k.comm,
                                         k.seq, rank_, k.step, k.src_pos));
  arrived_.notify(sc_core::SC_ZERO_TIME);
}

Message CollectiveEngine::take(const MessageKey& key, std::uint32_t peer_rank, TaskContext& ctx) {
  auto it = mailbox_.find(key);
  if (it == mailbox_.end()) {
    ctx.qk.sync();
    waiting_ = std::make_pair(key, peer_rank);
    while ((it = mailbox_.find(key)) == mailbox_.end()) sc_core::wait(arrived_);
    waiting_.reset();
  }
  Message m = std::move(it->second);
  mailbox_.erase(it);
  return m;
}

std::string CollectiveEngine::waiting() const {
  if (!waiting_) return {};
  const auto& [k, peer] = *waiting_;
  return fmt::format("r{} waits for r{} in comm {} #{} (message {})", rank_, peer, k.comm, k.seq, k.step);
}

void CollectiveEngine::run(TaskContext& ctx) {
  const auto& task = ctx.task;
  auto fail = [&](const std::string& what) {
    throw std::runtime_error(fmt::format("collective task {} on r{}: {}", task.task_id, rank_, what));
  };
  if (task.args_size < sizeof(spec::CollectiveArgs))
    fail(fmt::format("args_size {} < {} bytes of CollectiveArgs", task.args_size, sizeof(spec::CollectiveArgs)));
  Hbm& hbm = *ctx.chip.hbm;
  spec::CollectiveArgs args;
  hbm.read(task.args_addr, std::as_writable_bytes(std::span<spec::CollectiveArgs>(&args, 1)), ctx.qk, HbmClient::Collective);

  if (args.comm_kind > 2) fail(fmt::format("comm_kind {} is not world(0), server(1) or peers(2)", args.comm_kind));
  const CommGroup group = fabric_.group(static_cast<CommKind>(args.comm_kind), rank_);
  const std::uint32_t n = group.size, pos = group.position_of(rank_);
  if (args.num_ranks != 0 && args.num_ranks != n)
    fail(fmt::format("the task expects {} ranks, the {} communicator of r{} has {}", args.num_ranks,
                     comm_kind_name(group.kind), rank_, n));
  const auto data = static_cast<graph::DType>(args.input.dtype);
  if (data != graph::DType::F16 && data != graph::DType::BF16 && data != graph::DType::F32)
    fail(fmt::format("input.dtype {} is not float16, bfloat16 or float32", args.input.dtype));
  if (args.output.dtype != args.input.dtype)
    fail(fmt::format("output.dtype {} differs from input.dtype {}", args.output.dtype, args.input.dtype));
  if (args.op > 3) fail(fmt::format("op {} is not allreduce, reducescatter, allgather or broadcast", args.op));
  if (args.reduction > 1) fail(fmt::format("reduction {} is not sum(0) or mean(1)", args.reduction));
  if (args.order_mode > 2) fail("order_mode: expected arrival, group or explicit");
  if (args.count == 0) fail("count must be > 0");
  const std::uint32_t root_pos = args.root;
  if (root_pos >= n) fail(fmt::format("root position {} outside the {} communicator of r{} ({} ranks)", args.root, comm_kind_name(group.kind), rank_, n));

  const std::size_t es = graph::dtype_size(data);
  const std::uint64_t in_count = spec::collective_input_count(args, n);
  const std::uint64_t out_count = spec::collective_output_count(args, n);
  const bool has_input = args.op != static_cast<std::uint8_t>(CollectiveOp::Broadcast) || root_pos == pos;
  if (has_input && args.input.rank > 0 && numel(args.input) != static_cast<std::int64_t>(in_count))
    fail(fmt::format("input.dims hold {} elements, the collective reads {}", numel(args.input), in_count));
  if (args.output.rank > 0 && numel(args.output) != static_cast<std::int64_t>(out_count))
    fail(fmt::format("output.dims hold {} elements, the collective writes {}", numel(args.output), out_count));

  std::optional<CollectiveOverride> over;
  if (fault_wanted(ctx.chip.faults, kFaultCollective)) {
    CollectiveOverride o;
    ctx.chip.faults->on_collective(ctx.site(0), o);
    over = std::move(o);
  }
  std::uint32_t algo = over && over->algorithm ? *over->algorithm : args.algorithm;
  if (algo > 2) fail(fmt::format("algorithm {} is not ring(0), tree(1) or direct(2)", algo));
  const graph::DType acc = over && over->acc_dtype ? *over->acc_dtype : static_cast<graph::DType>(args.acc_dtype);
  if (acc != graph::DType::F16 && acc != graph::DType::BF16 && acc != graph::DType::F32)
    fail(fmt::format("acc_dtype {} is not float32, float16 or bfloat16", static_cast<int>(acc)));

  ProgramRequest preq;
  preq.op = static_cast<CollectiveOp>(args.op);
  preq.algo = static_cast<spec::CollectiveAlgo>(algo);
  preq.size = n;
  preq.position = pos;
  preq.root_pos = root_pos;
  preq.count = args.count;
  if (preq.algo == spec::CollectiveAlgo::Direct) {
    if (over && !over->reduction_order.empty()) {
      // The injector's order over the job's ranks, restricted to this group's members.
      for (auto r : over->reduction_order)
        if (group.position_of(r) < n) preq.direct_order.push_back(group.position_of(r));
      if (preq.direct_order.size() != n) fail("the injected reduction order does not name every rank of the group");
    } else if (args.order_mode == static_cast<std::uint8_t>(spec::OrderMode::GroupOrder)) {
      for (std::uint32_t i = 0; i < n; ++i) preq.direct_order.push_back(i);
    } else if (args.order_mode == static_cast<std::uint8_t>(spec::OrderMode::Explicit)) {
      std::vector<std::uint32_t> ranks(n);
      hbm.read(args.order_addr, std::as_writable_bytes(std::span<std::uint32_t>(ranks)), ctx.qk, HbmClient::Collective);
      for (auto r : ranks) {
        if (group.position_of(r) >= n) fail(fmt::format("explicit order names r{}, which is not in the group", r));
        preq.direct_order.push_back(group.position_of(r));
      }
    }
  }
  RankProgram prog;
  try {
    prog = build_program(preq);
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }

  std::vector<std::byte> staged(in_count * es, std::byte{0});  // Broadcast non-roots: never read
  num::ScanReport nan_in;
  float nan_value = 0.0f, inf_value = 0.0f;
  if (has_input) {
    hbm.read(args.input.addr, staged, ctx.qk, HbmClient::Collective);
    nan_in = scan_input(staged, data);
    nan_value = element_f32(staged, data, nan_in.first_nan);
    inf_value = element_f32(staged, data, nan_in.first_inf);
  }
  const std::uint32_t comm = group.comm_id + (args.comm_id << 28);
  const std::uint32_t seq = next_seq_[comm]++;
  const std::uint64_t arrival_ps = ChipClock::to_ps(ctx.now());

  Execution::Setup s;
  s.ctx = &ctx;
  s.engine = this;
  s.net = &fabric_.network();
  s.args = &args;
  s.group = group;
  s.position = pos;
  s.comm = comm;
  s.seq = seq;
  s.header = CollectiveHeader{args.op, static_cast<std::uint8_t>(algo), args.input.dtype, args.reduction,
                              args.root, n, args.count};
  s.data = data;
  s.acc = acc;
  s.divisor = args.divisor ? args.divisor : n;
  s.mode.overflow = ctx.saturation() ? num::OverflowMode::Saturation : num::OverflowMode::InfNan;
  s.mode.denormal = ctx.flush_denormals() ? num::DenormalMode::FlushToZero : num::DenormalMode::Preserve;
  s.input = Payload::own(std::move(staged));
  s.out_count = out_count;
  s.arrival_ps = arrival_ps;
  std::uint64_t seed_report = 0;
  if (over && over->arrival_jitter_ps) {
    s.jitter_ps = over->arrival_jitter_ps;
    seed_report = over->jitter_seed;
    s.jitter_seed = mix_seed(over->jitter_seed ^ mix_seed((std::uint64_t{comm} << 32 | seq) + rank_));
  }
  s.send_seq = &send_seq_;
  s.take = [this, &ctx](const MessageKey& k, std::uint32_t peer) { return take(k, peer, ctx); };
  Execution ex(std::move(s));
  ex.run(prog);

  // Output: written from the time this rank's transfers were done.
  const std::uint64_t start_ps = std::max(ex.done_ps(), ChipClock::to_ps(ctx.now()));
  const sc_core::sc_time end = hbm.write(args.output.addr, ex.output(), ChipClock::from_ps(start_ps), HbmClient::Collective);
  ctx.qk.set(end - sc_core::sc_time_stamp());
  const std::uint64_t end_ps = ChipClock::to_ps(end);

  DetectionEvent ev = ctx.detection_event(0);
  fill_detection(ev, ex.report(), nan_in, ex.output(), nan_value, inf_value, data, ctx.chip.clock.cycle_at(end));
  if (ev.status != 0) ctx.chip.detection->report(ev);
  if (ctx.chip.trace && ctx.chip.trace->enabled()) {
    ctx.chip.trace->complete(
        rank_, "collective",
        fmt::format("{} {}", spec::collective_op_name(static_cast<CollectiveOp>(args.op)),
                    spec::collective_algo_name(static_cast<spec::CollectiveAlgo>(algo))),
        "collective", arrival_ps, end_ps - arrival_ps,
        {{"comm", std::uint64_t{comm}},
         {"seq", std::uint64_t{seq}},
         {"group", std::string(comm_kind_name(group.kind))},
         {"ranks", std::uint64_t{n}},
         {"bytes", std::uint64_t{in_count * es}},
         {"sent_bytes", ex.bytes_sent()},
         {"messages", ex.messages_sent()},
         {"acc", std::string(graph::dtype_name(acc))},
         {"wait_ps", ex.recv_wait_ps()},
         {"flags", num::to_string(ex.report().flags)}});
    // One flow per collective links its slices on every rank.
    ctx.chip.trace->flow(fmt::format("collective {}:{}", comm, seq), rank_, "collective", arrival_ps);
  }
  if (fabric_.keep_records()) {
    CollectiveRecord rec;
    rec.comm_id = comm;
    rec.seq = seq;
    rec.op = static_cast<CollectiveOp>(args.op);
    rec.algo = static_cast<spec::CollectiveAlgo>(algo);
    rec.rank = rank_;
    rec.position = pos;
    rec.group_size = n;
    rec.task_id = task.task_id;
    rec.acc_dtype = acc;
    rec.arrival_ps = arrival_ps;
    rec.done_ps = ex.done_ps();
    rec.finish_ps = end_ps;
    rec.recv_wait_ps = ex.recv_wait_ps();
    rec.bytes_sent = ex.bytes_sent();
    rec.messages_sent = ex.messages_sent();
    rec.order = ex.order();
    rec.flags = ex.report().flags;
    rec.overridden = over.has_value();
    rec.jitter_seed = seed_report;
    records_.push_back(std::move(rec));
  }
  ++completed_;
}

}  // namespace probelab::chip
