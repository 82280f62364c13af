#include "chip_model/collective/collective_engine.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "chip_model/collective/collective_fabric.h"
#include "chip_model/detection_circuit.h"
#include "chip_model/hbm.h"
#include "numerics/fp16.h"
#include "chip_model/trace.h"

namespace probelab::chip {
namespace {

std::int64_t numel(const spec::TensorRef& t) {
  std::int64_t n = 1;
  for (int i = 0; i < t.rank && i < spec::kMaxDims; ++i) n *= t.dims[i];
  return n;
}

/// NaNs in the staged input (the adders read them: kExcNanInput on this rank).
num::ScanReport scan_input(const std::vector<std::byte>& in, graph::DType dt) {
  if (dt == graph::DType::F32) {
    std::vector<float> v(in.size() / 4);
    std::memcpy(v.data(), in.data(), v.size() * 4);
    return num::scan(std::span<const float>(v));
  }
  std::vector<num::f16> v(in.size() / 2);
  std::memcpy(v.data(), in.data(), v.size() * 2);
  if (dt == graph::DType::F16) return num::scan(std::span<const num::f16>(v));
  std::vector<num::bf16> b(v.size());
  std::memcpy(b.data(), in.data(), b.size() * 2);
  return num::scan(std::span<const num::bf16>(b));
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
                     spec::kExcDetailCollective, 0, input, static_cast<std::uint8_t>(dt)};
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
  PlanRequest req;
  try {
    req = plan_request_from_args(args, fabric_.size());
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
  const auto n = static_cast<std::uint32_t>(req.group.size());
  if (std::find(req.group.begin(), req.group.end(), rank_) == req.group.end()) fail("this chip is not in the group");
  const std::size_t es = graph::dtype_size(req.data_dtype);
  const std::uint64_t in_count = spec::collective_input_count(args, n);
  const std::uint64_t out_count = spec::collective_output_count(args, n);
  const bool has_input = args.op != static_cast<std::uint8_t>(spec::CollectiveOp::Broadcast) || args.root == rank_;
  if (has_input && args.input.rank > 0 && numel(args.input) != static_cast<std::int64_t>(in_count))
    fail(fmt::format("input.dims hold {} elements, the collective reads {}", numel(args.input), in_count));
  if (args.output.rank > 0 && numel(args.output) != static_cast<std::int64_t>(out_count))
    fail(fmt::format("output.dims hold {} elements, the collective writes {}", numel(args.output), out_count));

  CollectiveJoin j;
  j.rank = rank_;
  j.task_id = task.task_id;
  j.args = args;
  if (fault_wanted(ctx.chip.faults, kFaultCollective)) {
    CollectiveOverride o;
    ctx.chip.faults->on_collective(ctx.site(0), o);
    j.override_ = std::move(o);
  }
  num::ScanReport nan_in;
  float nan_value = 0.0f, inf_value = 0.0f;
  if (has_input) {
    j.input.resize(in_count * es);
    hbm.read(args.input.addr, j.input, ctx.qk, HbmClient::Collective);
    nan_in = scan_input(j.input, req.data_dtype);
    nan_value = element_f32(j.input, req.data_dtype, nan_in.first_nan);
    inf_value = element_f32(j.input, req.data_dtype, nan_in.first_inf);
  }
  j.mode.overflow = ctx.saturation() ? num::OverflowMode::Saturation : num::OverflowMode::InfNan;
  j.mode.denormal = ctx.flush_denormals() ? num::DenormalMode::FlushToZero : num::DenormalMode::Preserve;
  j.arrival_ps = ChipClock::to_ps(ctx.now());
  j.hbm = &hbm;
  const std::uint64_t arrival_ps = j.arrival_ps;
  const std::uint32_t seq = next_seq_[args.comm_id]++;

  std::shared_ptr<CollectiveTicket> ticket;
  try {
    ticket = fabric_.join(std::move(j), seq);
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
  if (!ticket->resolved) {
    ctx.qk.sync();
    while (!ticket->resolved) sc_core::wait(resolved_);
  }

  // Output: written from the time this rank's transfers were done.
  const std::uint64_t start_ps = std::max(ticket->done_ps, ChipClock::to_ps(ctx.now()));
  const sc_core::sc_time end = hbm.write(args.output.addr, ticket->output, ChipClock::from_ps(start_ps), HbmClient::Collective);
  ctx.qk.set(end - sc_core::sc_time_stamp());
  const std::uint64_t end_ps = ChipClock::to_ps(end);
  auto& rec = *ticket->record;
  rec.finish_ps.at(ticket->position) = end_ps;

  DetectionEvent ev = ctx.detection_event(0);
  fill_detection(ev, ticket->report, nan_in, ticket->output, nan_value, inf_value, req.data_dtype,
                 ctx.chip.clock.cycle_at(end));
  if (ev.status != 0) ctx.chip.detection->report(ev);
  if (ctx.chip.trace && ctx.chip.trace->enabled()) {
    const auto& plan = rec.plan;
    ctx.chip.trace->complete(
        rank_, "collective",
        fmt::format("{} {}", spec::collective_op_name(plan.op), spec::collective_algo_name(plan.algo)), "collective",
        arrival_ps, end_ps - arrival_ps,
        {{"comm", std::uint64_t{rec.comm_id}},
         {"seq", std::uint64_t{rec.seq}},
         {"bytes", std::uint64_t{in_count * es}},
         {"acc", std::string(graph::dtype_name(plan.acc_dtypes.at(ticket->position)))},
         {"wait_ps", *std::max_element(rec.arrival_ps.begin(), rec.arrival_ps.end()) - arrival_ps},
         {"flags", num::to_string(ticket->report.flags)}});
    // One flow per collective links its slices on every rank.
    ctx.chip.trace->flow(fmt::format("collective {}:{}", rec.comm_id, rec.seq), rank_, "collective", arrival_ps);
  }
  ++completed_;
}

}  // namespace probelab::chip
