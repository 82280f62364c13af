// PerfLedger: a rank's op and task records folded as they complete, giving what the perf report
// and report.json `ops` / `quantization` read of them.
#include <gtest/gtest.h>

#include "sim/run/perf_ledger.h"

namespace pc = probelab::chip;
namespace ps = probelab::spec;
using probelab::sim::PerfLedger;

namespace {

pc::OpRecord op(std::uint32_t id, std::uint32_t step, std::uint64_t begin, std::uint64_t end, std::uint32_t cores = 2) {
  pc::OpRecord r;
  r.op_id = id;
  r.step = step;
  r.op_name = "op" + std::to_string(id);
  r.start_cycle = begin;
  r.end_cycle = end;
  r.cycles = end - begin;
  r.cores = cores;
  r.flops = 100 * id;
  r.cube_cycles = 10;
  r.vector_cycles = 3;
  r.mte_cycles = 7;
  r.hbm_read_bytes = 64;
  r.hbm_write_bytes = 32;
  r.l2_read_bytes = 16;
  r.hbm_stall_cycles = 1;
  return r;
}

pc::StreamEngine::TaskRecord task(ps::TaskKind kind, std::uint32_t op_id, std::uint32_t stream, std::uint64_t fetch,
                                  std::uint64_t start, std::uint64_t end) {
  pc::StreamEngine::TaskRecord t;
  t.kind = kind;
  t.op_id = op_id;
  t.stream = stream;
  t.fetch_cycle = fetch;
  t.start_cycle = start;
  t.end_cycle = end;
  return t;
}

}  // namespace

TEST(PerfLedger, SumsEachOpsKernelsAndKeepsOneSpanPerExecution) {
  PerfLedger l;
  l.add_op(op(3, 0, 100, 150, 2));
  l.add_op(op(5, 0, 150, 170, 4));
  l.add_op(op(3, 1, 300, 380, 1));
  const auto& t = l.op(3);
  EXPECT_EQ(t.kernels, 2u);
  EXPECT_EQ(t.tasks, 2u);
  EXPECT_EQ(t.cycles, 50u + 80u);
  EXPECT_EQ(t.cores, 2u);  // the most one execution had
  EXPECT_EQ(t.flops, 600u);
  EXPECT_EQ(t.cube, 20u);
  EXPECT_EQ(t.vec, 6u);
  EXPECT_EQ(t.mte, 14u);
  EXPECT_EQ(t.rd, 128u);
  EXPECT_EQ(t.wr, 64u);
  EXPECT_EQ(t.l2, 32u);
  EXPECT_EQ(t.stall, 2u);
  EXPECT_EQ(l.op(5).cores, 4u);
  ASSERT_EQ(l.kernels().size(), 3u);
  EXPECT_EQ(l.kernels()[2].begin, 300u);
  EXPECT_EQ(l.kernels()[2].end, 380u);
  EXPECT_EQ(l.kernels()[2].op_id, 3u);
  EXPECT_EQ(l.kernels()[2].step, 1u);
  EXPECT_EQ(l.op_name(5), "op5");
  EXPECT_EQ(l.op_name(9), "");
  EXPECT_EQ(l.op(9).kernels, 0u);  // an op that ran nothing: zero sums
  // An op id far past a graph's (a task submitted through Device may carry any) is kept too.
  l.add_op(op(0xFFFFFFF0u, 2, 400, 410));
  EXPECT_EQ(l.op(0xFFFFFFF0u).kernels, 1u);
  EXPECT_EQ(l.op_name(0xFFFFFFF0u), "op4294967280");
  // What it keeps per kernel execution: two cycles and two ids, not the record.
  EXPECT_LE(sizeof(PerfLedger::KernelSpan), 24u);
}

TEST(PerfLedger, EachStepsTopOpIsItsLongestKernelTheFirstOfEquals) {
  PerfLedger l;
  l.add_op(op(1, 0, 0, 40));
  l.add_op(op(2, 0, 40, 80));    // as long as op 1: op 1 stays
  l.add_op(op(1, 1, 100, 110));
  l.add_op(op(2, 1, 110, 200));  // longer: op 2
  ASSERT_NE(l.top(0), nullptr);
  EXPECT_EQ(l.top(0)->op_id, 1u);
  EXPECT_EQ(l.top(0)->cycles, 40u);
  ASSERT_NE(l.top(1), nullptr);
  EXPECT_EQ(l.top(1)->op_id, 2u);
  EXPECT_EQ(l.top(1)->cycles, 90u);
  EXPECT_EQ(l.top(2), nullptr);
  // A kernel of an earlier step completing late (another stream) still counts for its step.
  l.add_op(op(3, 0, 200, 260));
  EXPECT_EQ(l.top(0)->op_id, 3u);
  EXPECT_EQ(l.top(1)->op_id, 2u);
}

TEST(PerfLedger, ChargesLaunchGapsPerStreamAndKeepsCollectiveAndProbeIntervals) {
  PerfLedger l;
  using K = ps::TaskKind;
  l.add_task(task(K::Kernel, 3, 0, 10, 14, 50));       // first on stream 0: dispatch only, 4
  l.add_task(task(K::Kernel, 4, 1, 20, 25, 30));       // first on stream 1: 5
  l.add_task(task(K::Kernel, 3, 0, 60, 62, 90));       // gap 60 - 50 on stream 0, dispatch 2
  l.add_task(task(K::Collective, 7, 1, 31, 33, 130));  // gap 1 after stream 1's task, dispatch 2
  l.add_task(task(K::Capture, 3, 0, 90, 91, 95));      // no gap: probe time of op 3
  l.add_task(task(K::EventRecord, 0, 0, 100, 100, 101));
  EXPECT_EQ(l.task_count(), 6u);
  EXPECT_EQ(l.op(3).launch, 4u + 10u + 2u);
  EXPECT_EQ(l.op(3).probe, 4u);
  EXPECT_EQ(l.op(3).tasks, 0u);  // kernel tasks count with their records (add_op)
  EXPECT_EQ(l.op(4).launch, 5u);
  const auto& c = l.op(7);
  EXPECT_EQ(c.tasks, 1u);
  EXPECT_EQ(c.collective, 97u);
  EXPECT_EQ(c.launch, 1u + 2u);
  ASSERT_EQ(l.task_spans().size(), 2u);
  EXPECT_TRUE(l.task_spans()[0].collective);
  EXPECT_EQ(l.task_spans()[0].begin, 33u);
  EXPECT_EQ(l.task_spans()[0].end, 130u);
  EXPECT_FALSE(l.task_spans()[1].collective);
  EXPECT_EQ(l.task_spans()[1].begin, 91u);
}

TEST(PerfLedger, KeepsOnlyTheQuantizedExecutions) {
  PerfLedger l;
  l.add_op(op(1, 0, 0, 10));
  pc::OpRecord q = op(2, 3, 10, 20);
  q.quant.push_back({"conv", {}, {}});
  l.add_op(q);
  ASSERT_EQ(l.quant().size(), 1u);
  EXPECT_EQ(l.quant()[0].step, 3u);
  ASSERT_EQ(l.quant()[0].ops.size(), 1u);
  EXPECT_EQ(l.quant()[0].ops[0].op, "conv");
}
