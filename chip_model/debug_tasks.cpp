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

/// Where a debug task runs: on a core's Vector unit (capture/breakpoint tasks) or on the capture
/// unit's DMA engine (asynchronous full-tensor captures: no Vector passes, strided DMA converts
/// the layout).
struct DebugIo {
  const ChipServices& chip;
  const spec::TaskDescriptor& task;
  tlm_utils::tlm_quantumkeeper& qk;
  std::string track;  // trace track of the load span
  bool dma = false;
  FaultSite site;
};

template <class Args>
Args read_args(DebugIo& io, const char* what) {
  if (io.task.args_size < sizeof(Args))
    throw std::runtime_error(fmt::format("task {} ({}): argument block of {} bytes, expected at least {}",
                                         io.task.task_id, what, io.task.args_size, sizeof(Args)));
  Args a;
  std::span<std::byte> raw(reinterpret_cast<std::byte*>(&a), sizeof a);
  io.chip.hbm->read(io.task.args_addr, raw, io.qk, HbmClient::Stream);
  return a;
}

struct LoadedTensor {
  graph::TensorDesc desc;        // as stored
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

/// Loads the tensor in double-buffered blocks at the MTE port rate and charges `passes` vector
/// passes per block (+1 if the layout is converted; none on the DMA engine). Advances io.qk to
/// the end of the last pass.
LoadedTensor load_tensor(DebugIo& io, const spec::TensorRef& ref, int passes) {
  const auto& cfg = *io.chip.config;
  LoadedTensor t;
  t.desc = desc_of(ref, io.task.task_id);
  const std::size_t esize = spec::element_bytes(ref.dtype);
  t.numel = static_cast<std::size_t>(graph::numel(t.desc.shape));
  const std::size_t phys = graph::physical_nbytes(t.desc);
  const bool convert = t.desc.format != graph::Format::ND && t.desc.format != graph::Format::NCHW;
  if (io.dma) passes = 0;
  else if (convert) ++passes;

  std::vector<std::byte> raw(phys);
  // The DMA engine moves 4 KiB bursts (other initiators' requests interleave between them); a
  // core moves half-UB blocks.
  const std::size_t block = io.dma ? std::size_t{4096} : std::max<std::size_t>(cfg.ub_bytes / 2, 512);
  const double port_gbps = static_cast<double>(cfg.mte_bytes_per_cycle) * cfg.clock_mhz / 1000.0;
  const HbmClient client = io.dma ? HbmClient::Capture : HbmClient::Core;
  const sc_core::sc_time hbm_latency(static_cast<double>(cfg.hbm_latency_ns), sc_core::SC_NS);
  const sc_core::sc_time start = io.qk.get_current_time();
  sc_core::sc_time read_free = start, vec_free = start, prev_vec_start = start;
  for (std::size_t off = 0; off < phys; off += block) {
    const std::size_t n = std::min(block, phys - off);
    // Double buffering: block b may load once the buffer of block b-2 is free, i.e. once block
    // b-1's processing started.
    // (no processing on the DMA engine: only its own bursts in flight limit the next issue)
    const sc_core::sc_time issue = io.dma ? read_free : std::max(read_free, prev_vec_start);
    if (io.dma && issue > sc_core::sc_time_stamp()) {
      // Each burst is requested at its own time, so that the requests of other initiators made
      // meanwhile are served between the bursts (the HBM model serves in request order).
      io.qk.set(issue - sc_core::sc_time_stamp());
      io.qk.sync();
    }
    const sc_core::sc_time loaded =
        io.chip.hbm->read(ref.addr + off, std::span(raw).subspan(off, n), issue, client, port_gbps);
    // The DMA engine keeps bursts in flight: the next one issues once this one's bytes moved
    // through its port (an L2 hit has no HBM latency to overlap; a miss's latency overlaps).
    read_free = io.dma ? std::max(issue + ChipClock::from_ps(transfer_ps(n, port_gbps)), loaded - hbm_latency) : loaded;
    const sc_core::sc_time vstart = std::max(loaded, vec_free);
    const std::uint64_t cycles =
        (n + cfg.vector_bytes_per_cycle - 1) / cfg.vector_bytes_per_cycle * static_cast<std::uint64_t>(passes);
    vec_free = vstart + io.chip.clock.cycles(cycles);
    prev_vec_start = vstart;
  }
  io.qk.set(vec_free - sc_core::sc_time_stamp());

  if (convert) {
    t.bytes.resize(t.numel * esize);
    graph::convert_layout(raw, t.desc.format, t.bytes, graph::Format::ND, t.desc.shape, esize);
  } else {
    raw.resize(t.numel * esize);
    t.bytes = std::move(raw);
  }
  if (io.chip.trace->enabled())
    io.chip.trace->complete(io.chip.rank, io.track, io.dma ? "load" : "load+scan", "debug", ChipClock::to_ps(start),
                            ChipClock::to_ps(vec_free - start),
                            {{"task_id", std::uint64_t{io.task.task_id}}, {"bytes", std::uint64_t{phys}}});
  return t;
}

DebugIo core_io(TaskContext& ctx) {
  return DebugIo{ctx.chip, ctx.task, ctx.qk, TaskContext::core_track(ctx.cores.front(), "vector"), false,
                 ctx.site(ctx.cores.front())};
}

void capture_tensor(DebugIo& io, const spec::TensorRef& ref, spec::CapturePayload kind, std::uint16_t index,
                    bool is_input) {
  LoadedTensor t = load_tensor(io, ref, 1);
  const spec::CaptureRecordHeader h = tensor_record_header(io.task, ref, kind, index, is_input);

  std::vector<std::byte> payload;
  switch (kind) {
    case spec::CapturePayload::Statistics: {
      const spec::CaptureStats s = spec::compute_stats(t.bytes, ref.dtype, t.numel);
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
    case spec::CapturePayload::StepStatus: break;  // not a capture task payload (rejected above)
  }
  io.site.cycle = io.chip.clock.cycle_at(io.qk.get_current_time());
  io.chip.capture->produce(h, payload, io.qk, io.site);
}

void capture(DebugIo& io) {
  const auto args = read_args<spec::CaptureArgs>(io, "capture");
  const auto kind = static_cast<spec::CapturePayload>(args.payload);
  if (kind != spec::CapturePayload::Statistics && kind != spec::CapturePayload::FullTensor &&
      kind != spec::CapturePayload::Hash)
    throw std::runtime_error(fmt::format("task {}: unknown capture payload kind {}", io.task.task_id, args.payload));
  if (io.dma && kind != spec::CapturePayload::FullTensor)
    throw std::runtime_error(fmt::format("task {}: an asynchronous capture moves full tensors only (payload kind {})",
                                         io.task.task_id, args.payload));
  capture_tensor(io, args.tensor, kind, args.output_index, args.is_input != 0);
}

DebugIo dma_io(const ChipServices& chip, const spec::TaskDescriptor& task, std::uint32_t stream,
               tlm_utils::tlm_quantumkeeper& qk) {
  return DebugIo{chip, task, qk, "capture_dma", true,
                 FaultSite{chip.rank, task.step, task.op_id, task.task_id, 0, stream, chip.clock.cycle_at(qk.get_current_time())}};
}

}  // namespace

void run_capture_task(TaskContext& ctx) {
  DebugIo io = core_io(ctx);
  capture(io);
}

void run_capture_dma(const ChipServices& chip, const spec::TaskDescriptor& task, std::uint32_t stream,
                     tlm_utils::tlm_quantumkeeper& qk) {
  DebugIo io = dma_io(chip, task, stream, qk);
  capture(io);
}

void run_dump_dma(const ChipServices& chip, const spec::TaskDescriptor& task, std::uint32_t stream,
                  tlm_utils::tlm_quantumkeeper& qk, const spec::TensorRef& ref, std::uint16_t index, bool is_input) {
  DebugIo io = dma_io(chip, task, stream, qk);
  capture_tensor(io, ref, spec::CapturePayload::FullTensor, index, is_input);
}

bool run_breakpoint_task(TaskContext& ctx) {
  DebugIo io = core_io(ctx);
  const auto args = read_args<spec::BreakpointArgs>(io, "breakpoint");
  bool halt = false;
  if (args.num_clauses > 0) {
    const LoadedTensor t = load_tensor(io, args.tensor, 1);
    const spec::CaptureStats s = spec::compute_stats(t.bytes, args.tensor.dtype, t.numel);
    halt = spec::eval_predicate(args, s);
  }
  if (args.halt_on_exception && ctx.chip.detection->anomaly_seen(ctx.task.op_id, ctx.step)) halt = true;
  return halt;
}

}  // namespace probelab::chip
