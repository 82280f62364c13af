#include "sim/run/perf_ledger.h"

#include <algorithm>

namespace probelab::sim {

namespace {

bool step_less(const std::pair<std::uint32_t, PerfLedger::Top>& e, std::uint32_t step) { return e.first < step; }

}  // namespace

PerfLedger::OpTotals& PerfLedger::at(std::uint32_t op_id) {
  if (op_id >= kDenseIds) return sparse_ops_[op_id];
  if (op_id >= ops_.size()) ops_.resize(std::size_t{op_id} + 1);
  return ops_[op_id];
}

const PerfLedger::OpTotals& PerfLedger::op(std::uint32_t op_id) const {
  static const OpTotals none;
  if (op_id < ops_.size()) return ops_[op_id];
  const auto it = sparse_ops_.find(op_id);
  return it == sparse_ops_.end() ? none : it->second;
}

void PerfLedger::add_op(const chip::OpRecord& rec) {
  OpTotals& a = at(rec.op_id);
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
  // Steps complete in order, so the step is nearly always the last one or a new one.
  if (top_.empty() || top_.back().first < rec.step) {
    top_.emplace_back(rec.step, Top{rec.op_id, rec.cycles});
  } else {
    const auto it = std::lower_bound(top_.begin(), top_.end(), rec.step, step_less);
    if (it->first != rec.step) top_.insert(it, {rec.step, Top{rec.op_id, rec.cycles}});
    else if (rec.cycles > it->second.cycles) it->second = {rec.op_id, rec.cycles};
  }
  if (!rec.quant.empty()) quant_.push_back({rec.step, rec.quant});
  if (a.kernels == 1) names_.emplace(rec.op_id, rec.op_name);
}

void PerfLedger::add_task(const chip::StreamEngine::TaskRecord& t) {
  using spec::TaskKind;
  ++task_count_;
  if (t.stream >= stream_end_.size()) stream_end_.resize(std::size_t{t.stream} + 1);
  std::optional<std::uint64_t>& prev = stream_end_[t.stream];
  const std::uint64_t gap = prev && t.fetch_cycle > *prev ? t.fetch_cycle - *prev : 0;
  prev = t.end_cycle;
  const std::uint64_t dur = t.end_cycle - t.start_cycle;
  if (t.kind == TaskKind::Kernel) {
    at(t.op_id).launch += gap + (t.start_cycle - t.fetch_cycle);
  } else if (t.kind == TaskKind::Collective) {
    OpTotals& a = at(t.op_id);
    ++a.tasks;
    a.collective += dur;
    a.collective_ps += t.dur_ps;
    a.launch += gap + (t.start_cycle - t.fetch_cycle);
    task_spans_.push_back({t.start_cycle, t.end_cycle, true});
  } else if (t.kind == TaskKind::Capture || t.kind == TaskKind::Breakpoint) {
    OpTotals& a = at(t.op_id);
    a.probe += dur;
    ++a.probe_tasks;
    a.probe_ps += t.dur_ps;
    task_spans_.push_back({t.start_cycle, t.end_cycle, false});
  }
}

const PerfLedger::Top* PerfLedger::top(std::uint32_t step) const {
  const auto it = std::lower_bound(top_.begin(), top_.end(), step, step_less);
  return it != top_.end() && it->first == step ? &it->second : nullptr;
}

std::string PerfLedger::op_name(std::uint32_t op_id) const {
  const auto it = names_.find(op_id);
  return it == names_.end() ? std::string() : it->second;
}

}  // namespace probelab::sim
