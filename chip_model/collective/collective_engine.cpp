#include "chip_model/collective/collective_engine.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <tuple>

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

}  // namespace

CollectiveEngine::CollectiveEngine(sc_core::sc_module_name name, std::uint32_t rank, CollectiveFabric& fabric)
    : sc_core::sc_module(name), rank_(rank), fabric_(fabric) {}

void CollectiveEngine::deliver(Message&& m) {
  // At most one parked execution per stream: a linear search.
  if (auto it = std::find_if(parked_.begin(), parked_.end(), [&](const auto* e) { return e->awaited() == m.key; });
      it != parked_.end()) {
    CollectiveExecution* ex = *it;
    parked_.erase(it);
    ex->give(m);  // used in place: the network keeps it until this returns
    resume(*ex);
    return;
  }
  const MessageKey k = m.key;
  if (!mailbox_.put(std::move(m)))
    throw std::runtime_error(fmt::format("collective comm {} #{}: r{} received message {} from position {} twice", k.comm,
                                         k.seq, rank_, k.step, k.src_pos));
}

void CollectiveEngine::resume(CollectiveExecution& ex) {
  bool done = true;
  try {
    done = ex.advance();
  } catch (...) {
    ex.fail(std::current_exception());  // rethrown on the thread that runs the task
  }
  if (done) {
    finished_.notify(sc_core::SC_ZERO_TIME);
  } else {
    parked_.push_back(&ex);
  }
}

std::string CollectiveEngine::waiting() const {
  if (parked_.empty()) return {};
  const CollectiveExecution* ex = *std::min_element(
      parked_.begin(), parked_.end(), [](const auto* a, const auto* b) { return a->awaited() < b->awaited(); });
  const MessageKey& k = ex->awaited();
  return fmt::format("r{} waits for r{} in comm {} #{} (message {})", rank_, ex->awaited_rank(), k.comm, k.seq, k.step);
}

std::vector<BlockedCollective> CollectiveEngine::blocked() const {
  std::vector<BlockedCollective> out;
  for (const CollectiveExecution* ex : parked_) {
    const auto& s = ex->setup();
    out.push_back({rank_, s.comm, s.seq, s.task_id, s.op_id, s.step, ex->describe(), ex->awaited_rank(), s.arrival_ps,
                   ex->conflict()});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return std::tie(a.comm, a.seq) < std::tie(b.comm, b.seq); });
  return out;
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
  if (args.count == 0) {  // a zero-element tensor: nothing to move, done at once on every rank (as NCCL does)
    ++completed_;
    return;
  }

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
    } else if (args.order_mode == static_cast<std::uint8_t>(spec::OrderMode::GroupOrder) ||
               (over && over->follows_group && args.algorithm != static_cast<std::uint8_t>(spec::CollectiveAlgo::Direct))) {
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
  std::optional<ProgramCursor> prog;
  try {
    prog.emplace(std::move(preq));
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

  CollectiveExecution::Setup s;
  s.hbm = &hbm;
  s.net = &fabric_.network();
  s.source = this;
  s.rank = rank_;
  s.args = args;
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
  s.task_id = task.task_id;
  s.op_id = task.op_id;
  s.step = task.step;
  CollectiveExecution ex(std::move(s), std::move(*prog));
  // Runs until a message is missing; then the thread catches up with its local time (messages
  // that arrived meanwhile are taken here) and the network's deliveries run the rest.
  if (!ex.advance()) {
    ctx.qk.sync();
    if (!ex.advance()) {
      parked_.push_back(&ex);
      while (!ex.finished()) sc_core::wait(finished_);
      if (ex.error()) std::rethrow_exception(ex.error());
      // The network may deliver ahead of time (network.h: lookahead); resume when the last
      // message arrived.
      const sc_core::sc_time resumed = ChipClock::from_ps(ex.resumed_ps());
      if (resumed > sc_core::sc_time_stamp()) sc_core::wait(resumed - sc_core::sc_time_stamp());
    }
  }

  // A fault in the result as the engine stores it (a corrupted reduction or receive buffer):
  // what it writes is latched as the engine's own, as a core's detection circuit latches its op's.
  num::BulkReport rep = ex.report();
  if (fault_wanted(ctx.chip.faults, kFaultOpOutput)) {
    const num::ScanReport before = scan_input(ex.output(), data);
    graph::TensorDesc desc{data, {static_cast<std::int64_t>(out_count)}, graph::Format::ND};
    if (args.output.rank > 0) desc.shape.assign(args.output.dims, args.output.dims + std::min<int>(args.output.rank, spec::kMaxDims));
    ctx.chip.faults->on_op_output(ctx.site(0), 0, desc, 0, ex.output());
    const num::ScanReport after = scan_input(ex.output(), data);
    if (after.nan_count > before.nan_count) rep.raise(num::Flag::Invalid, after.first_nan);
    if (after.inf_count > before.inf_count) rep.raise(num::Flag::Overflow, after.first_inf);
  }

  // Output: written from the time this rank's transfers were done.
  const std::uint64_t start_ps = std::max(ex.done_ps(), ChipClock::to_ps(ctx.now()));
  const sc_core::sc_time end = hbm.write(args.output.addr, ex.output(), ChipClock::from_ps(start_ps), HbmClient::Collective);
  ctx.qk.set(end - sc_core::sc_time_stamp());
  const std::uint64_t end_ps = ChipClock::to_ps(end);

  DetectionEvent ev = ctx.detection_event(0);
  fill_detection(ev, rep, nan_in, ex.output(), nan_value, inf_value, data, ctx.chip.clock.cycle_at(end));
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
         {"flags", num::to_string(rep.flags)}});
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
    rec.flags = rep.flags;
    rec.overridden = over.has_value();
    rec.jitter_seed = seed_report;
    records_.push_back(std::move(rec));
  }
  ++completed_;
}

}  // namespace probelab::chip
