#include "chip_model/debug_tasks.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "chip_model/capture_unit.h"
#include "chip_model/hbm.h"
#include "chip_model/spec/capture_math.h"
#include "chip_model/spec/kernel_args.h"
#include "chip_model/trace.h"
#include "graph/format.h"

namespace probelab::chip {
namespace {

template <class Args>
Args read_args(TaskContext& ctx, const char* what) {
  if (ctx.task.args_size < sizeof(Args))
    throw std::runtime_error(fmt::format("task {} ({}): argument block of {} bytes, expected at least {}",
                                         ctx.task.task_id, what, ctx.task.args_size, sizeof(Args)));
  Args a;
  std::span<std::byte> raw(reinterpret_cast<std::byte*>(&a), sizeof a);
  ctx.chip.hbm->read(ctx.task.args_addr, raw, ctx.qk, HbmClient::Stream);
  return a;
}

struct LoadedTensor {
  graph::TensorDesc desc;        // as stored
  graph::Format plain = graph::Format::ND;  // layout of `bytes`
  std::vector<std::byte> bytes;  // logical elements, row-major
  std::size_t numel = 0;
};

graph::TensorDesc desc_of(const spec::TensorRef& t, std::uint32_t task_id) {
  if (t.rank > spec::kMaxDims)
    throw std::runtime_error(fmt::format("task {}: tensor rank {} exceeds {}", task_id, t.rank, spec::kMaxDims));
  if (spec::element_bytes(t.dtype) == 0)
    throw std::runtime_error(fmt::format("task {}: unknown tensor dtype code {}", task_id, t.dtype));
  if (t.format > static_cast<std::uint8_t>(graph::Format::FRACTAL_NZ))
    throw std::runtime_error(fmt::format("task {}: unknown tensor format code {}", task_id, t.format));
  graph::TensorDesc d;
  d.dtype = static_cast<graph::DType>(t.dtype);
  d.format = static_cast<graph::Format>(t.format);
  for (int i = 0; i < t.rank; ++i) {
    if (t.dims[i] < 0) throw std::runtime_error(fmt::format("task {}: negative tensor dim", task_id));
    d.shape.push_back(t.dims[i]);
  }
  return d;
}

/// Loads the tensor through the MTE in double-buffered blocks and charges `passes` vector passes
/// per block (+1 if the layout is converted). Advances ctx.qk to the end of the last pass.
LoadedTensor load_tensor(TaskContext& ctx, const spec::TensorRef& ref, int passes) {
  const auto& cfg = *ctx.chip.config;
  LoadedTensor t;
  t.desc = desc_of(ref, ctx.task.task_id);
  const std::size_t esize = spec::element_bytes(ref.dtype);
  t.numel = static_cast<std::size_t>(graph::numel(t.desc.shape));
  const std::size_t phys = graph::physical_nbytes(t.desc);
  const bool convert = t.desc.format != graph::Format::ND && t.desc.format != graph::Format::NCHW;
  t.plain = (t.desc.format == graph::Format::ND || t.desc.format == graph::Format::FRACTAL_NZ) ? graph::Format::ND
                                                                                               : graph::Format::NCHW;
  if (convert) ++passes;

  std::vector<std::byte> raw(phys);
  const std::size_t block = std::max<std::size_t>(cfg.ub_bytes / 2, 512);
  const double port_gbps = static_cast<double>(cfg.mte_bytes_per_cycle) * cfg.clock_mhz / 1000.0;
  const sc_core::sc_time start = ctx.now();
  sc_core::sc_time read_free = start, vec_free = start, prev_vec_start = start;
  for (std::size_t off = 0; off < phys; off += block) {
    const std::size_t n = std::min(block, phys - off);
    // Double buffering: block b may load once the buffer of block b-2 is free, i.e. once block
    // b-1's processing started.
    const sc_core::sc_time issue = std::max(read_free, prev_vec_start);
    const sc_core::sc_time loaded =
        ctx.chip.hbm->read(ref.addr + off, std::span(raw).subspan(off, n), issue, HbmClient::Core, port_gbps);
    read_free = loaded;
    const sc_core::sc_time vstart = std::max(loaded, vec_free);
    const std::uint64_t cycles = (n + cfg.vector_bytes_per_cycle - 1) / cfg.vector_bytes_per_cycle * passes;
    vec_free = vstart + ctx.chip.clock.cycles(cycles);
    prev_vec_start = vstart;
  }
  ctx.qk.set(vec_free - sc_core::sc_time_stamp());

  if (convert) {
    t.bytes.resize(t.numel * esize);
    graph::convert_layout(raw, t.desc.format, t.bytes, graph::Format::ND, t.desc.shape, esize);
  } else {
    raw.resize(t.numel * esize);
    t.bytes = std::move(raw);
  }
  if (ctx.chip.trace->enabled())
    ctx.chip.trace->complete(ctx.chip.rank, TaskContext::core_track(ctx.cores.front(), "vector"), "load+scan",
                             "debug", ChipClock::to_ps(start), ChipClock::to_ps(vec_free - start),
                             {{"task_id", std::uint64_t{ctx.task.task_id}}, {"bytes", std::uint64_t{phys}}});
  return t;
}

}  // namespace

void run_capture_task(TaskContext& ctx) {
  const auto args = read_args<spec::CaptureArgs>(ctx, "capture");
  const auto kind = static_cast<spec::CapturePayload>(args.payload);
  if (kind != spec::CapturePayload::Statistics && kind != spec::CapturePayload::FullTensor &&
      kind != spec::CapturePayload::Hash)
    throw std::runtime_error(fmt::format("task {}: unknown capture payload kind {}", ctx.task.task_id, args.payload));
  LoadedTensor t = load_tensor(ctx, args.tensor, 1);

  spec::CaptureRecordHeader h;
  h.op_id = ctx.task.op_id;
  h.task_id = ctx.task.task_id;
  h.step = ctx.step;
  h.output_index = args.output_index;
  h.payload = kind;
  h.dtype = args.tensor.dtype;
  h.format = static_cast<std::uint8_t>(t.plain);
  h.rank_dims = args.tensor.rank;
  h.is_input = args.is_input;
  for (int i = 0; i < args.tensor.rank; ++i) h.dims[i] = args.tensor.dims[i];

  std::vector<std::byte> payload;
  switch (kind) {
    case spec::CapturePayload::Statistics: {
      const spec::CaptureStats s = spec::compute_stats(t.bytes, args.tensor.dtype, t.numel);
      payload.resize(sizeof s);
      std::memcpy(payload.data(), &s, sizeof s);
      break;
    }
    case spec::CapturePayload::Hash: {
      const std::uint64_t d = spec::xxh64(t.bytes, 0);
      payload.resize(sizeof d);
      std::memcpy(payload.data(), &d, sizeof d);
      break;
    }
    case spec::CapturePayload::FullTensor: payload = std::move(t.bytes); break;
  }
  ctx.chip.capture->produce(h, payload, ctx.qk, ctx.site(ctx.cores.front()));
}

bool run_breakpoint_task(TaskContext& ctx) {
  const auto args = read_args<spec::BreakpointArgs>(ctx, "breakpoint");
  bool halt = false;
  if (args.num_clauses > 0) {
    const LoadedTensor t = load_tensor(ctx, args.tensor, 1);
    const spec::CaptureStats s = spec::compute_stats(t.bytes, args.tensor.dtype, t.numel);
    halt = spec::eval_predicate(args, s);
  }
  if (args.halt_on_exception && ctx.chip.detection->anomaly_seen(ctx.task.op_id, ctx.step)) halt = true;
  return halt;
}

}  // namespace probelab::chip
