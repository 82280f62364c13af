// Collective-order, bit-flip, stuck-at, interrupt and capture-record injectors, and the
// composite InjectionSet that the chips see.
#include <gtest/gtest.h>

#include "chip_model/spec/capture_record.h"
#include "chip_model/spec/collective_args.h"
#include "chip_model/spec/irq.h"
#include "injectors/injection_set.h"

namespace probelab::inject {
namespace {

using graph::DType;

graph::Graph dp_graph() {
  graph::Graph g("dp");
  g.add_tensor({"grad", {DType::F16, {16}}, graph::TensorKind::Gradient});
  g.add_tensor({"grad/reduced", {DType::F16, {16}}, graph::TensorKind::Activation});
  g.add_tensor({"w", {DType::F16, {4, 4}}, graph::TensorKind::Weight});
  graph::Op ar;
  ar.name = "grad/allreduce";
  ar.type = "AllReduce";
  ar.inputs = {"grad"};
  ar.outputs = {"grad/reduced"};
  g.add_op(ar);
  graph::Op scale;  // a core's op reading the collective's result
  scale.name = "grad/scale";
  scale.type = "Scale";
  scale.inputs = {"grad/reduced"};
  scale.outputs = {"grad/scaled"};
  scale.attrs["alpha"] = 0.5;
  g.add_op(scale);
  return g;
}

struct Fixture : ::testing::Test {
  graph::Graph g = dp_graph();
  InjectionEnv env{&g, 8, 3, 99, {}};
  std::unique_ptr<Injector> make(const std::string& yaml) {
    return InjectorRegistry::instance().create(YAML::Load(yaml), "t.yaml", env);
  }
  chip::FaultSite site(std::uint32_t rank, std::uint32_t step = 0) {
    chip::FaultSite s;
    s.rank = rank;
    s.step = step;
    return s;
  }
};

TEST_F(Fixture, RotateGivesEachRankItsOwnOrderAndForcesDirect) {
  auto inj = make("{kind: collective_order, order: rotate, accumulation: fp16}");
  chip::CollectiveOverride o;
  inj->on_collective(site(3), o);
  EXPECT_EQ(o.reduction_order, (std::vector<std::uint32_t>{3, 4, 5, 6, 7, 0, 1, 2}));
  ASSERT_TRUE(o.algorithm.has_value());
  EXPECT_EQ(*o.algorithm, static_cast<std::uint32_t>(spec::CollectiveAlgo::Direct));
  EXPECT_EQ(o.acc_dtype, DType::F16);
  EXPECT_NE(inj->proof()[0].after.find("order=[3,4,5,6,7,0,1,2]"), std::string::npos);
}

// Two faults on one collective: an arrival order imposes none, so a second fault that only adds
// arrival jitter keeps the order the first imposed (it cleared it, and the fault went unseen).
TEST_F(Fixture, AnArrivalOrderKeepsTheOrderAnEarlierFaultImposed) {
  auto reverse = make("{kind: collective_order, order: reverse, rank: 1}");
  auto jitter = make("{kind: collective_order, order: arrival, arrival_jitter_ps: 300000}");
  chip::CollectiveOverride o;
  reverse->on_collective(site(1), o);
  jitter->on_collective(site(1), o);
  EXPECT_EQ(o.reduction_order, (std::vector<std::uint32_t>{7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(o.arrival_jitter_ps, 300000u);
  // The other way round the imposed order is the later fault's, as any later field is.
  chip::CollectiveOverride p;
  jitter->on_collective(site(1), p);
  reverse->on_collective(site(1), p);
  EXPECT_EQ(p.reduction_order, (std::vector<std::uint32_t>{7, 6, 5, 4, 3, 2, 1, 0}));
}

// A fault that gives only arrival jitter imposes no order (rotate, the default otherwise, would
// be a second fault the user did not ask for).
TEST_F(Fixture, AJitterOnlyFaultKeepsTheArrivalOrder) {
  auto jitter = make("{kind: collective_order, arrival_jitter_ps: 300000}");
  chip::CollectiveOverride o;
  jitter->on_collective(site(3), o);
  EXPECT_TRUE(o.reduction_order.empty());
  EXPECT_FALSE(o.algorithm.has_value());
  EXPECT_EQ(o.arrival_jitter_ps, 300000u);
  auto ordered = make("{kind: collective_order, arrival_jitter_ps: 300000, accumulation: fp16}");
  chip::CollectiveOverride p;
  ordered->on_collective(site(3), p);
  EXPECT_EQ(p.reduction_order, (std::vector<std::uint32_t>{3, 4, 5, 6, 7, 0, 1, 2}));  // rotate, as before
}

TEST_F(Fixture, RandomOrderIsASeededPermutationPerRankAndStep) {
  auto a = make("{kind: collective_order, order: random, seed: 5}");
  auto b = make("{kind: collective_order, order: random, seed: 5}");
  chip::CollectiveOverride x, y, z;
  a->on_collective(site(2, 1), x);
  b->on_collective(site(2, 1), y);
  b->on_collective(site(2, 2), z);
  EXPECT_EQ(x.reduction_order, y.reduction_order);
  auto sorted = x.reduction_order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_NE(x.reduction_order, z.reduction_order);
}

TEST_F(Fixture, ExplicitOrdersMustBePermutations) {
  EXPECT_THROW(make("{kind: collective_order, order: explicit, orders: [[0, 1]]}"), InjectorError);
  std::string rows = "[";
  for (int r = 0; r < 8; ++r) rows += std::string(r ? "," : "") + "[7,6,5,4,3,2,1,0]";
  auto inj = make("{kind: collective_order, order: explicit, orders: " + rows + "]}");
  chip::CollectiveOverride o;
  inj->on_collective(site(0), o);
  EXPECT_EQ(o.reduction_order.front(), 7u);
}

TEST_F(Fixture, HbmBitflipSchedulesTheElementsWordAndFlipsTheBit) {
  env.placement = [](std::uint32_t, const std::string& t) -> std::optional<TensorPlacement> {
    if (t != "w") return std::nullopt;
    return TensorPlacement{0x1000, {DType::F16, {4, 4}}};
  };
  auto inj = make("{kind: bitflip, target: hbm, tensor: w, element: 5, bits: [14], cycle: 777, rank: 1}");
  EXPECT_TRUE(inj->hbm_fault_schedule(0).empty());
  auto pts = inj->hbm_fault_schedule(1);
  ASSERT_EQ(pts.size(), 1u);
  EXPECT_EQ(pts[0].cycle, 777u);
  EXPECT_EQ(pts[0].addr, 0x1008u);  // element 5 of FP16 at 0x100A lies in the word at 0x1008
  std::uint64_t word = 0x3C003C003C003C00ull;
  inj->on_hbm_word(site(1), 0x1008, word);
  EXPECT_EQ(word, 0x3C003C007C003C00ull);  // element 5 = bits 16..31 of the word: 0x3C00 -> 0x7C00
  EXPECT_EQ(inj->proof()[0].before, "0x3c00");
  EXPECT_EQ(inj->proof()[0].after, "0x7c00");
}

TEST_F(Fixture, BufferBitflipAppliesOncePerOpExecution) {
  auto inj = make("{kind: bitflip, target: accumulator, op: grad/allreduce, byte: 2, bits: [0, 1]}");
  std::vector<std::byte> buf(16, std::byte{0});
  inj->on_core_buffer(site(0), chip::CoreBuffer::UB, buf);  // other buffer
  EXPECT_EQ(buf[2], std::byte{0});
  inj->on_core_buffer(site(0), chip::CoreBuffer::L0C, buf);
  inj->on_core_buffer(site(0), chip::CoreBuffer::L0C, buf);  // second tile of the same op: no more flips
  EXPECT_EQ(buf[2], std::byte{3});
  EXPECT_EQ(inj->applications(), 1u);
}

TEST_F(Fixture, StuckAtForcesOneLane) {
  auto inj = make("{kind: stuck_at, lane: 1, bit: 15, value: 1, step: all}");
  std::vector<std::uint16_t> v(8, 0x3C00);
  inj->on_vector_lanes(site(0), {DType::F16, {8}}, 2, 4, std::as_writable_bytes(std::span(v)));
  // Elements 2..9 through 4 lanes: lane 1 holds elements 5 and 9 -> local indices 3 and 7.
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], (i == 3 || i == 7) ? 0xBC00 : 0x3C00) << i;
}

TEST_F(Fixture, InterruptDropsOnlyTheNamedOccurrence) {
  auto inj = make("{kind: interrupt, line: exception, occurrence: 1}");
  EXPECT_FALSE(inj->on_interrupt(site(0), spec::kIrqException).drop);
  EXPECT_FALSE(inj->on_interrupt(site(0), spec::kIrqCaptureFull).drop);
  EXPECT_TRUE(inj->on_interrupt(site(0), spec::kIrqException).drop);
  EXPECT_FALSE(inj->on_interrupt(site(0), spec::kIrqException).drop);
  auto delay = make("{kind: interrupt, line: capture_full, action: delay, delay_ps: 5000}");
  EXPECT_EQ(delay->on_interrupt(site(0), spec::kIrqCaptureFull).extra_delay_ps, 5000u);
}

TEST_F(Fixture, CaptureCorruptFlipsAPayloadBit) {
  auto inj = make("{kind: capture_corrupt, record: 1, bit: 3}");
  std::vector<std::byte> rec(sizeof(spec::CaptureRecordHeader) + 8, std::byte{0});
  inj->on_capture_record(site(0), rec);
  EXPECT_EQ(rec[sizeof(spec::CaptureRecordHeader)], std::byte{0});
  inj->on_capture_record(site(0), rec);
  EXPECT_EQ(rec[sizeof(spec::CaptureRecordHeader)], std::byte{8});
}

TEST_F(Fixture, InjectionSetForwardsInOrderAndReportsNeverFired) {
  InjectionSet set({YAML::Load("{kind: nan, op: grad/scale, element: 0}"),
                    YAML::Load("{kind: interrupt, line: breakpoint}")},
                   {"a.yaml:3", "a.yaml:9"}, env);
  EXPECT_EQ(set.sites(), chip::kFaultOpOutput | chip::kFaultInterrupt);
  std::vector<std::uint16_t> v(16, 0);
  chip::FaultSite at = site(0);
  at.op_id = g.find_op("grad/scale")->id;
  set.on_op_output(at, 0, {DType::F16, {16}}, 0, std::as_writable_bytes(std::span(v)));
  const auto r = set.report();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(r[0]["fired"]);
  EXPECT_EQ(r[0]["proof"][0]["after"], "0x7e00");
  EXPECT_FALSE(r[1]["fired"]);
  EXPECT_TRUE(r[1].contains("note"));
  EXPECT_EQ(r[1]["index"], 1);
}

// The collective engine reads a collective's input from HBM itself (no core loads it): an input
// fault there would never fire. Bad input naming op; its result is a site; a glob that also
// matches a core's op is fine.
TEST_F(Fixture, InputFaultsOnCollectivesOnlyAreBadInput) {
  EXPECT_THROW(make("{kind: nan, op: grad/allreduce, tensor: input}"), InjectorError);
  EXPECT_THROW(make("{kind: value, op: 'grad/all*', tensor: input, value: 3}"), InjectorError);
  EXPECT_NO_THROW(make("{kind: nan, op: grad/allreduce}"));
  EXPECT_NO_THROW(make("{kind: inf, op: 'grad/*', tensor: input}"));
}

TEST(Registry, EveryInjectorDocumentsItsParameters) {
  const auto& all = InjectorRegistry::instance().all();
  for (const char* k : {"nan", "inf", "value", "fp16_accumulation", "collective_order", "bitflip", "stuck_at",
                        "interrupt", "capture_corrupt"}) {
    ASSERT_TRUE(all.count(k)) << k;
    EXPECT_FALSE(all.at(k).doc.empty());
    for (const auto& p : all.at(k).params) EXPECT_FALSE(p.doc.empty()) << k << "." << p.name;
  }
}

}  // namespace
}  // namespace probelab::inject
