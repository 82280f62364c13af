// What report.json needs of one rank's executed ops and tasks, folded as each completes: the
// AI core's op records (chip::OpRecord) and the stream engines' task records
// (chip::StreamEngine::TaskRecord) are not kept, so a long run holds a few words per kernel
// execution instead of every record (an OpRecord is 240 bytes and more with its names; a task
// record 48).
//
// Kept: per op its sums (the perf report's per-op counters, report.json `ops`), per kernel
// execution its interval and step (the critical-path split of a step charges a kernel's time to
// its op's bound, which only the whole run's sums decide), per collective or probe task its
// interval, per step its longest kernel (the first of equals, in completion order), the
// quantized ops' executions, and the number of tasks. Fed in completion order (per rank, as
// the chip completes them), it gives what the records gave: the same report bytes. Folding a
// record touches the op's sums, the end of the spans and the current step's entry (arrays by op
// id, stream and step: at hundreds of ranks a tree walk per record missed the cache).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chip_model/ai_core.h"
#include "chip_model/stream_engine.h"

namespace probelab::sim {

class PerfLedger {
 public:
  struct OpTotals {
    std::uint64_t kernels = 0;  // kernel executions
    std::uint64_t tasks = 0;    // kernel executions and collective tasks
    std::uint64_t cycles = 0;   // kernel cycles (OpRecord::cycles), summed
    // cycles of host submission and dispatch before its tasks, of its probe tasks, of its collectives
    std::uint64_t launch = 0, probe = 0, collective = 0;
    // probe tasks, and the exact times of its probe tasks and collectives in picoseconds
    std::uint64_t probe_tasks = 0, probe_ps = 0, collective_ps = 0;
    std::uint32_t cores = 0;  // the most cores one execution was granted
    std::uint64_t cube = 0, vec = 0, mte = 0, rd = 0, wr = 0, l2 = 0, flops = 0, stall = 0;
  };
  /// One kernel execution, in cycles.
  struct KernelSpan {
    std::uint64_t begin = 0, end = 0;
    std::uint32_t op_id = 0, step = 0;
  };
  /// One collective (true) or probe (capture, breakpoint) task, in cycles.
  struct TaskSpan {
    std::uint64_t begin = 0, end = 0;
    bool collective = false;
  };
  /// A step's longest kernel.
  struct Top {
    std::uint32_t op_id = 0;
    std::uint64_t cycles = 0;
  };
  struct QuantExecution {
    std::uint32_t step = 0;
    std::vector<chip::kernels::QuantOpRecord> ops;
  };

  void add_op(const chip::OpRecord& rec);
  void add_task(const chip::StreamEngine::TaskRecord& t);

  /// An op's sums (all zero for an op that ran nothing).
  const OpTotals& op(std::uint32_t op_id) const;
  const std::vector<KernelSpan>& kernels() const { return kernels_; }
  const std::vector<TaskSpan>& task_spans() const { return task_spans_; }
  /// A step's longest kernel, or null when no kernel of that step ran.
  const Top* top(std::uint32_t step) const;
  const std::vector<QuantExecution>& quant() const { return quant_; }
  /// Tasks of every kind.
  std::uint64_t task_count() const { return task_count_; }
  /// The op name the op's kernel records carried (for an op id the graph does not hold), or "".
  std::string op_name(std::uint32_t op_id) const;

 private:
  OpTotals& at(std::uint32_t op_id);

  /// Op ids are a graph's op indices: an array by id, and a map for ids past kDenseIds (a task
  /// submitted through Device may carry any).
  static constexpr std::uint32_t kDenseIds = 1u << 20;
  std::vector<OpTotals> ops_;
  std::map<std::uint32_t, OpTotals> sparse_ops_;
  std::map<std::uint32_t, std::string> names_;
  std::vector<KernelSpan> kernels_;
  std::vector<TaskSpan> task_spans_;
  std::vector<std::pair<std::uint32_t, Top>> top_;  // by step, ascending
  std::vector<QuantExecution> quant_;
  std::vector<std::optional<std::uint64_t>> stream_end_;  // by stream: end of its previous task
  std::uint64_t task_count_ = 0;
};

}  // namespace probelab::sim
