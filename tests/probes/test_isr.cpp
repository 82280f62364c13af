#include <gtest/gtest.h>

#include <cmath>

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
  dev.write_reg(spec::kRegExcEnable, 0x1F);
  ExceptionIsr isr(dev, g, nullptr);
  std::vector<probes::AnomalyRecord> got;
  std::uint64_t entry_cycle = 0;
  dev.set_irq_handler([&](std::uint32_t lines) {
    ASSERT_TRUE(lines & spec::kIrqException);
    entry_cycle = dev.now() + 10;  // the ISR's first device access (cycles()) advances the counter once
    for (auto& a : isr.handle()) got.push_back(std::move(a));
  });
  dev.advance(5000);
  dev.latch_exception({.kind = spec::kExcOverflow, .op_id = 3, .task_id = 42, .core = 1, .stream = 2, .output = 0,
                       .element = 5, .cycle = 4200, .value = 70000.0f,
                       .detail = spec::kExcDetailConversion | spec::kExcDetailAccumulator});
  ASSERT_EQ(got.size(), 1u);
  const auto& a = got[0];
  EXPECT_EQ(a.kind, AnomalyKind::Overflow);
  EXPECT_EQ(a.op, "fc2");
  EXPECT_EQ(a.op_type, "MatMul");
  EXPECT_EQ(a.scope, "model/layer2/fc2");
  EXPECT_EQ(a.tensor, "fc2:0");
  EXPECT_FALSE(a.on_input);
  EXPECT_EQ(a.element, 5u);
  EXPECT_EQ(a.coordinate, (std::vector<std::int64_t>{1, 1}));  // fc2:0 is [2, 4]
  EXPECT_EQ(a.value, 70000.0);
  EXPECT_EQ(probes::detail_names(a.detail), (std::vector<std::string>{"accumulator", "output_conversion"}));
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
  EXPECT_EQ(dev.read_reg(spec::kRegExcPending), 0u);
  EXPECT_EQ(dev.read_reg(spec::kRegIrqRaw) & spec::kIrqException, 0u);
  auto counters = isr.read_counters();
  EXPECT_EQ(counters.at("overflow_count"), 1u);
  EXPECT_EQ(counters.at("invalid_count"), 0u);
  EXPECT_EQ(counters.at("inf_input_count"), 0u);
}

TEST(Isr, ServicesEveryPendingKindOnce) {
  graph::Graph g = mlp();
  FakeDevice dev;
  ExceptionIsr isr(dev, g, nullptr);
  // no handler: an underflow at element 7 and a NaN input at element 70 latch side by side;
  // a second NaN input only counts as suppressed
  dev.latch_exception({.kind = spec::kExcUnderflow, .op_id = 3, .element = 7, .cycle = 10, .value = 1e-8f});
  dev.latch_exception({.kind = spec::kExcNanInput, .op_id = 3, .output = 0, .element = 70, .cycle = 12});
  dev.latch_exception({.kind = spec::kExcNanInput, .op_id = 4, .element = 1, .cycle = 14});
  dev.latch_exception({.kind = spec::kExcInfInput, .op_id = 4, .output = 0, .element = 2, .cycle = 16, .value = -INFINITY});
  auto got = isr.handle();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].kind, AnomalyKind::Underflow);
  EXPECT_EQ(got[0].element, 7u);
  EXPECT_EQ(got[1].kind, AnomalyKind::NanInput);
  EXPECT_EQ(got[1].element, 70u);
  EXPECT_TRUE(got[1].on_input);
  EXPECT_EQ(got[1].tensor, "relu1:0");  // fc2's input 0
  EXPECT_TRUE(got[1].more);
  EXPECT_EQ(got[1].suppressed, 1u);
  EXPECT_EQ(got[2].kind, AnomalyKind::InfInput);
  EXPECT_EQ(got[2].op, "softmax");
  EXPECT_EQ(got[2].value, -INFINITY);
  EXPECT_TRUE(isr.handle().empty());  // all re-armed and empty: spurious
  EXPECT_EQ(isr.read_suppressed().at(spec::kExcNanInput), 1u);
}

TEST(Isr, MoreBitSpuriousAndUnknownOp) {
  graph::Graph g = mlp();
  FakeDevice dev;
  ExceptionIsr isr(dev, g, nullptr);
  // no handler: two anomalies of one kind latch, the second only sets "more"
  dev.latch_exception({.kind = spec::kExcInvalid, .op_id = 99, .element = 1, .cycle = 10});
  dev.latch_exception({.kind = spec::kExcInvalid, .op_id = 2, .element = 0, .cycle = 20});
  auto a = isr.handle();
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, AnomalyKind::Invalid);
  EXPECT_TRUE(a[0].more);
  EXPECT_EQ(a[0].op, "<unknown op 99>");
  EXPECT_TRUE(a[0].coordinate.empty());
  EXPECT_TRUE(isr.handle().empty());  // latch re-armed and empty: spurious
  EXPECT_EQ(isr.read_counters().at("invalid_count"), 2u);
  // a disabled kind neither latches nor interrupts, but still counts
  dev.write_reg(spec::kRegExcEnable, 1u << spec::kExcOverflow);
  dev.latch_exception({.kind = spec::kExcUnderflow, .op_id = 1});
  EXPECT_TRUE(isr.handle().empty());
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
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].fused_from, (std::vector<std::string>{"ln", "relu"}));
  EXPECT_EQ(a[0].coordinate, (std::vector<std::int64_t>{1, 1}));
  ASSERT_FALSE(a[0].call_stack.empty());
  EXPECT_EQ(a[0].call_stack.back(), "fused: ln (LayerNormalization, model/block/ln) -> relu (Relu, model/block/relu)");
}
