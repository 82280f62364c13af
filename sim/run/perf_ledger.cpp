#include "sim/run/perf_ledger.h"

#include <algorithm>

namespace probelab::sim {

void PerfLedger::add_op(const chip::OpRecord& rec) {
  OpTotals& a = ops_[rec.op_id];
  ++a.kernels;
  ++a.tasks;
  a.cycles += rec.cycles;
  a.cores = std::max(a.cores, rec.cores);
  a.cube += rec.cube_cycles;
  a.vec += rec.vector_cycles;
  a.mte += rec.mte_cycles;
  a.rd += rec.hbm_read_bytes;
  a.wr += rec.hbm_write_bytes;
  a.l2 += rec.l2_read_bytes;
  a.flops += rec.flops;
  a.stall += rec.hbm_stall_cycles;
  kernels_.push_back({rec.start_cycle, rec.end_cycle, rec.op_id, rec.step});
  const auto [top, fresh] = top_.try_emplace(rec.step, Top{rec.op_id, rec.cycles});
  if (!fresh && rec.cycles > top->second.cycles) top->second = {rec.op_id, rec.cycles};
  if (!rec.quant.empty()) quant_.push_back({rec.step, rec.quant});
  if (a.kernels == 1) names_.emplace(rec.op_id, rec.op_name);
}

void PerfLedger::add_task(const chip::StreamEngine::TaskRecord& t) {
  using spec::TaskKind;
  ++task_count_;
  const auto prev = stream_end_.find(t.stream);
  const std::uint64_t gap = prev == stream_end_.end() ? 0 : (t.fetch_cycle > prev->second ? t.fetch_cycle - prev->second : 0);
  stream_end_[t.stream] = t.end_cycle;
  const std::uint64_t dur = t.end_cycle - t.start_cycle;
  if (t.kind == TaskKind::Kernel) {
    ops_[t.op_id].launch += gap + (t.start_cycle - t.fetch_cycle);
  } else if (t.kind == TaskKind::Collective) {
    OpTotals& a = ops_[t.op_id];
    ++a.tasks;
    a.collective += dur;
    a.launch += gap + (t.start_cycle - t.fetch_cycle);
    task_spans_.push_back({t.start_cycle, t.end_cycle, true});
  } else if (t.kind == TaskKind::Capture || t.kind == TaskKind::Breakpoint) {
    ops_[t.op_id].probe += dur;
    task_spans_.push_back({t.start_cycle, t.end_cycle, false});
  }
}

std::string PerfLedger::op_name(std::uint32_t op_id) const {
  const auto it = names_.find(op_id);
  return it == names_.end() ? std::string() : it->second;
}

}  // namespace probelab::sim
