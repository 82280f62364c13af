#include <gtest/gtest.h>

#include "chip_model/spec/irq.h"
#include "chip_model/spec/registers.h"
#include "graph/passes.h"
#include "tests/probes/probe_test_util.h"
#include "probes/exception_isr.h"

using namespace probe_test;
using probes::AnomalyKind;
using probes::ExceptionIsr;
using probes::FakeDevice;

TEST(Isr, UnravelIndex) {
  EXPECT_EQ(probes::unravel_index(5, {2, 4}), (std::vector<std::int64_t>{1, 1}));
  EXPECT_EQ(probes::unravel_index(0, {2, 3, 4}), (std::vector<std::int64_t>{0, 0, 0}));
  EXPECT_EQ(probes::unravel_index(23, {2, 3, 4}), (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(probes::unravel_index(13, {2, 3, 4}), (std::vector<std::int64_t>{1, 0, 1}));
  EXPECT_TRUE(probes::unravel_index(24, {2, 3, 4}).empty());  // out of range
  EXPECT_TRUE(probes::unravel_index(0, {}).empty());
}

TEST(Isr, ScriptedLatchBecomesAnAnomalyRecord) {
  graph::Graph g = mlp();
  FakeDevice dev(3);
  dev.write_reg(spec::kRegStep, 7);
  dev.write_reg(spec::kRegExcEnable, 0xF);
  ExceptionIsr isr(dev, g, nullptr);
  std::optional<probes::AnomalyRecord> got;
  std::uint64_t entry_cycle = 0;
  dev.set_irq_handler([&](std::uint32_t lines) {
    ASSERT_TRUE(lines & spec::kIrqException);
    entry_cycle = dev.now() + 10;  // the ISR's first device access (cycles()) advances the counter once
    got = isr.handle();
  });
  dev.advance(5000);
  dev.latch_exception({.kind = spec::kExcOverflow, .op_id = 3, .task_id = 42, .core = 1, .stream = 2, .output = 0,
                       .element = 5, .cycle = 4200});
  ASSERT_TRUE(got);
  const auto& a = *got;
  EXPECT_EQ(a.kind, AnomalyKind::Overflow);
  EXPECT_EQ(a.op, "fc2");
  EXPECT_EQ(a.op_type, "MatMul");
  EXPECT_EQ(a.scope, "model/layer2/fc2");
  EXPECT_EQ(a.tensor, "fc2:0");
  EXPECT_EQ(a.element, 5u);
  EXPECT_EQ(a.coordinate, (std::vector<std::int64_t>{1, 1}));  // fc2:0 is [2, 4]
  EXPECT_EQ(a.step, 7u);
  EXPECT_EQ(a.rank, 3u);
  EXPECT_EQ(a.task_id, 42u);
  EXPECT_EQ(a.core, 1u);
  EXPECT_EQ(a.stream, 2u);
  EXPECT_EQ(a.cycle, 4200u);
  EXPECT_EQ(a.isr_cycle, entry_cycle);
  EXPECT_EQ(a.latency_cycles, entry_cycle - 4200);
  EXPECT_FALSE(a.more);
  EXPECT_TRUE(a.float_status & spec::kFsOverflow);
  EXPECT_EQ(a.call_stack, (std::vector<std::string>{"model", "layer2", "fc2 (MatMul)"}));
  // acknowledged and re-armed
  EXPECT_EQ(dev.reg(spec::kRegExcStatus), 0u);
  EXPECT_EQ(dev.read_reg(spec::kRegIrqRaw) & spec::kIrqException, 0u);
  auto counters = isr.read_counters();
  EXPECT_EQ(counters.at("overflow_count"), 1u);
  EXPECT_EQ(counters.at("invalid_count"), 0u);
}

TEST(Isr, MoreBitSpuriousAndUnknownOp) {
  graph::Graph g = mlp();
  FakeDevice dev;
  ExceptionIsr isr(dev, g, nullptr);
  // no handler: two anomalies latch, the second only sets "more"
  dev.latch_exception({.kind = spec::kExcInvalid, .op_id = 99, .element = 1, .cycle = 10});
  dev.latch_exception({.kind = spec::kExcNanInput, .op_id = 2, .element = 0, .cycle = 20});
  auto a = isr.handle();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->kind, AnomalyKind::Invalid);
  EXPECT_TRUE(a->more);
  EXPECT_EQ(a->op, "<unknown op 99>");
  EXPECT_TRUE(a->coordinate.empty());
  EXPECT_FALSE(isr.handle().has_value());  // latch re-armed and empty: spurious
  EXPECT_EQ(isr.read_counters().at("nan_input_count"), 1u);
  // a disabled kind neither latches nor interrupts, but still counts
  dev.write_reg(spec::kRegExcEnable, 1u << spec::kExcOverflow);
  dev.latch_exception({.kind = spec::kExcUnderflow, .op_id = 1});
  EXPECT_FALSE(isr.handle().has_value());
  EXPECT_EQ(isr.read_counters().at("underflow_count"), 1u);
}

TEST(Isr, FusedOpCallStackNamesOriginalOps) {
  graph::Graph g("ln");
  g.add_tensor({"x", {graph::DType::F32, {2, 8}, graph::Format::ND}, graph::TensorKind::Input});
  g.mark_input("x");
  g.add_initializer("gamma", graph::Tensor::from_f32({8}, std::vector<float>(8, 1.0f)));
  g.add_initializer("beta", graph::Tensor::from_f32({8}, std::vector<float>(8, 0.0f)));
  g.add_op(make_op("ln", "LayerNormalization", {"x", "gamma", "beta"}, {"ln:0"}, "model/block/ln"));
  g.add_op(make_op("relu", "Relu", {"ln:0"}, {"y"}, "model/block/relu"));
  g.mark_output("y");
  graph::Graph fused = graph::fuse_graph(g);
  const graph::Op* f = nullptr;
  for (const auto& op : fused.ops())
    if (!op.fused_from.empty()) f = &op;
  ASSERT_NE(f, nullptr);
  FakeDevice dev;
  ExceptionIsr isr(dev, fused, &g);
  dev.latch_exception({.kind = spec::kExcInvalid, .op_id = f->id, .element = 9});
  auto a = isr.handle();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->fused_from, (std::vector<std::string>{"ln", "relu"}));
  EXPECT_EQ(a->coordinate, (std::vector<std::int64_t>{1, 1}));
  ASSERT_FALSE(a->call_stack.empty());
  EXPECT_EQ(a->call_stack.back(), "fused: ln (LayerNormalization, model/block/ln) -> relu (Relu, model/block/relu)");
}

TEST(Propagation, SourceThenPropagationWithPath) {
  graph::Graph g = mlp();
  probes::PropagationTracker t(g);
  t.begin_step(2);
  auto rec = [&](const char* op, AnomalyKind k) {
    probes::AnomalyRecord a;
    a.op_id = g.find_op(op)->id;
    a.op = op;
    a.kind = k;
    a.step = 2;
    t.classify(a);
    return a;
  };
  auto add = rec("add1", AnomalyKind::Invalid);
  EXPECT_TRUE(add.is_source);
  EXPECT_EQ(add.source_op, "add1");
  auto relu = rec("relu1", AnomalyKind::NanInput);
  EXPECT_FALSE(relu.is_source);
  EXPECT_EQ(relu.source_op, "add1");
  EXPECT_EQ(relu.propagation_path, (std::vector<std::string>{"add1", "relu1"}));
  auto sm = rec("softmax", AnomalyKind::Invalid);  // produced NaN, but its input chain was already flagged
  EXPECT_FALSE(sm.is_source);
  EXPECT_EQ(sm.source_op, "add1");
  EXPECT_EQ(sm.propagation_path, (std::vector<std::string>{"add1", "relu1", "softmax"}));
  EXPECT_EQ(t.flagged_ops(), (std::vector<std::string>{"add1", "relu1", "softmax"}));

  // a new step forgets the history
  t.begin_step(3);
  probes::AnomalyRecord a;
  a.op_id = g.find_op("softmax")->id;
  a.op = "softmax";
  a.kind = AnomalyKind::Invalid;
  a.step = 3;
  t.classify(a);
  EXPECT_TRUE(a.is_source);
}

TEST(Propagation, NanInputWithoutFlaggedProducerNamesTheProducer) {
  graph::Graph g = mlp();
  probes::PropagationTracker t(g);
  t.begin_step(0);
  probes::AnomalyRecord a;
  a.op_id = g.find_op("fc2")->id;
  a.op = "fc2";
  a.kind = AnomalyKind::NanInput;
  t.classify(a);
  EXPECT_FALSE(a.is_source);
  EXPECT_EQ(a.source_op, "relu1");
  EXPECT_EQ(a.propagation_path, (std::vector<std::string>{"relu1", "fc2"}));
  // evidence from a capture: the softmax output held NaN; its consumer-free position makes it a source
  t.begin_step(1);
  t.note_nonfinite(g.find_op("fc1")->id, false);
  probes::AnomalyRecord b;
  b.op_id = g.find_op("relu1")->id;
  b.op = "relu1";
  b.kind = AnomalyKind::NanInput;
  b.step = 1;
  t.classify(b);
  EXPECT_EQ(b.source_op, "fc1");
  EXPECT_EQ(b.propagation_path, (std::vector<std::string>{"fc1", "relu1"}));
}
