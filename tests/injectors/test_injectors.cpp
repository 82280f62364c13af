// Unit tests of the injectors: each hook applies exactly where its descriptor says, logs proof,
// is deterministic for a seed, and bad descriptors are rejected with the key named.
#include <gtest/gtest.h>

#include <cstring>

#include "injectors/injection_set.h"
#include "injectors/injector.h"
#include "injectors/site.h"

namespace probelab::inject {
namespace {

using graph::DType;

graph::Graph small_graph() {
  graph::Graph g("t");
  g.add_tensor({"x", {DType::F16, {2, 8}}, graph::TensorKind::Input});
  g.add_tensor({"w", {DType::F16, {8, 4}}, graph::TensorKind::Weight});
  g.add_tensor({"mm:0", {DType::F16, {2, 4}}, graph::TensorKind::Activation});
  g.add_tensor({"sm:0", {DType::F16, {2, 4}}, graph::TensorKind::Activation});
  g.mark_input("x");
  graph::Op mm;
  mm.name = "layer0/matmul";
  mm.type = "MatMul";
  mm.inputs = {"x", "w"};
  mm.outputs = {"mm:0"};
  g.add_op(mm);
  graph::Op sm;
  sm.name = "layer0/softmax";
  sm.type = "Softmax";
  sm.inputs = {"mm:0"};
  sm.outputs = {"sm:0"};
  g.add_op(sm);
  g.mark_output("sm:0");
  return g;
}

struct Fixture : ::testing::Test {
  graph::Graph g = small_graph();
  InjectionEnv env{&g, 8, 4, 1234, {}};
  std::unique_ptr<Injector> make(const std::string& yaml) {
    return InjectorRegistry::instance().create(YAML::Load(yaml), "test.yaml:1:1: injections[0]", env);
  }
  chip::FaultSite site(std::uint32_t op, std::uint32_t step, std::uint32_t rank = 0) {
    chip::FaultSite s;
    s.op_id = op;
    s.step = step;
    s.rank = rank;
    s.cycle = 1000 + step;
    return s;
  }
};

std::vector<std::uint16_t> ones_f16(std::size_t n) { return std::vector<std::uint16_t>(n, 0x3C00); }
std::span<std::byte> as_bytes(std::vector<std::uint16_t>& v) { return std::as_writable_bytes(std::span(v)); }

TEST_F(Fixture, NanHitsExactlyTheNamedElementAtTheNamedStep) {
  auto inj = make("{kind: nan, op: layer0/softmax, element: [1, 2], step: 2}");
  graph::TensorDesc d{DType::F16, {2, 4}};
  auto buf = ones_f16(8);
  inj->on_op_output(site(1, 1), 0, d, 0, as_bytes(buf));  // wrong step
  inj->on_op_output(site(0, 2), 0, d, 0, as_bytes(buf));  // wrong op
  EXPECT_EQ(buf, ones_f16(8));
  EXPECT_FALSE(inj->fired());
  inj->on_op_output(site(1, 2), 0, d, 0, as_bytes(buf));
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(buf[i], i == 6 ? 0x7E00 : 0x3C00) << i;
  ASSERT_EQ(inj->proof().size(), 1u);
  EXPECT_EQ(inj->proof()[0].op, "layer0/softmax");
  EXPECT_EQ(inj->proof()[0].before, "0x3c00");
  EXPECT_EQ(inj->proof()[0].after, "0x7e00");
  EXPECT_NE(inj->proof()[0].location.find("element 6 [1, 2]"), std::string::npos);
  EXPECT_EQ(inj->descriptor()["kind"], "nan");
  EXPECT_EQ(inj->descriptor()["step"], 2);
}

TEST_F(Fixture, NanRespectsTheElementOffsetOfAPartialOutput) {
  auto inj = make("{kind: nan, op: layer0/softmax, element: 5}");
  graph::TensorDesc d{DType::F16, {2, 4}};
  auto first = ones_f16(4), second = ones_f16(4);
  inj->on_op_output(site(1, 0), 0, d, 0, as_bytes(first));
  inj->on_op_output(site(1, 0), 0, d, 4, as_bytes(second));
  EXPECT_EQ(first, ones_f16(4));
  EXPECT_EQ(second[1], 0x7E00);
  EXPECT_EQ(inj->applications(), 1u);
}

TEST_F(Fixture, InfAndValueWriteTheRoundedPattern) {
  auto inf = make("{kind: inf, op: layer0/matmul, sign: '-', element: 0}");
  auto val = make("{kind: value, op: layer0/matmul, value: 70000.0, element: 1}");
  graph::TensorDesc d{DType::F16, {2, 4}};
  auto buf = ones_f16(8);
  inf->on_op_output(site(0, 0), 0, d, 0, as_bytes(buf));
  val->on_op_output(site(0, 0), 0, d, 0, as_bytes(buf));
  EXPECT_EQ(buf[0], 0xFC00);
  EXPECT_EQ(buf[1], 0x7C00);  // 70000 rounds to +Inf in FP16
}

TEST_F(Fixture, RandomElementIsDeterministicForASeed) {
  auto a = make("{kind: nan, op: layer0/softmax, element: random, seed: 7}");
  auto b = make("{kind: nan, op: layer0/softmax, element: random, seed: 7}");
  graph::TensorDesc d{DType::F16, {2, 4}};
  auto x = ones_f16(8), y = ones_f16(8);
  a->on_op_output(site(1, 0), 0, d, 0, as_bytes(x));
  b->on_op_output(site(1, 0), 0, d, 0, as_bytes(y));
  EXPECT_EQ(x, y);
  EXPECT_EQ(a->descriptor()["seed"], 7);
}

TEST_F(Fixture, InputTargetCorruptsTheLoadedInput) {
  auto inj = make("{kind: nan, op: layer0/matmul, tensor: input, index: 1, element: 3}");
  graph::TensorDesc d{DType::F16, {8, 4}};
  auto w = ones_f16(32);
  inj->on_op_input(site(0, 0), 0, d, as_bytes(w));  // input 0: untouched
  EXPECT_EQ(w, ones_f16(32));
  inj->on_op_input(site(0, 0), 1, d, as_bytes(w));
  EXPECT_EQ(w[3], 0x7E00);
}

TEST_F(Fixture, BadDescriptorsNameTheKey) {
  auto msg = [&](const std::string& y) {
    try {
      make(y);
    } catch (const InjectorError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };

  EXPECT_NE(msg("{kind: nan, op: nope}").find("key 'op'"), std::string::npos);
  EXPECT_NE(msg("{kind: nan, op: nope}").find("matches no op"), std::string::npos);
  EXPECT_NE(msg("{kind: nan, op: layer0/softmax, element: 8}").find("key 'element'"), std::string::npos);
  EXPECT_NE(msg("{kind: nan, op: layer0/softmax, element: [2, 0]}").find("outside shape"), std::string::npos);
  EXPECT_NE(msg("{kind: nan, op: layer0/softmax, rank: 9}").find("key 'rank'"), std::string::npos);
  EXPECT_NE(msg("{kind: nan, op: layer0/softmax, step: 4}").find("never reached"), std::string::npos);
  EXPECT_NE(msg("{kind: nan, op: layer0/softmax, colour: red}").find("unknown key 'colour'"), std::string::npos);
  EXPECT_NE(msg("{kind: nan}").find("missing required key 'op'"), std::string::npos);
  EXPECT_NE(msg("{kind: gremlin, op: x}").find("unknown injector kind 'gremlin'"), std::string::npos);
  EXPECT_NE(msg("{kind: nan, op: 'layer[0'}").find("key 'op'"), std::string::npos);
  EXPECT_NE(msg("{kind: fp16_accumulation, op: '*', accumulator: fp32}").find("changes nothing"), std::string::npos);
  EXPECT_NE(msg("{kind: collective_order, op: layer0/matmul}").find("AllReduce"), std::string::npos);
  EXPECT_NE(msg("{kind: bitflip, target: hbm, tensor: w}").find("key 'cycle'"), std::string::npos);
  EXPECT_NE(msg("{kind: bitflip, target: hbm, tensor: w, cycle: 5, element: 32}").find("key 'element'"), std::string::npos);
  EXPECT_NE(msg("{kind: stuck_at, lane: 1, bit: 3, value: 2}").find("key 'value'"), std::string::npos);
  EXPECT_NE(msg("{kind: interrupt, line: doorbell}").find("key 'line'"), std::string::npos);
  EXPECT_NE(msg("just-a-scalar").find("needs a 'kind'"), std::string::npos);
  EXPECT_EQ(msg("{kind: nan, op: 'layer0/*', step: [0, \"2-3\"], rank: all}"), "no error");
}

TEST_F(Fixture, Fp16AccumulationOverridesTheModeAndLogsIt) {
  auto inj = make("{kind: fp16_accumulation, op: 'layer0/matmul', rounding: fp32_then_round, split_k: 64, input_scale: 1024}");
  chip::AccumulationMode m;
  inj->on_gemm_accumulation(site(1, 0), m);  // softmax is not matched
  EXPECT_EQ(m.acc_dtype, DType::F32);
  inj->on_gemm_accumulation(site(0, 3, 5), m);
  EXPECT_EQ(m.acc_dtype, DType::F16);
  EXPECT_TRUE(m.f16_double_rounding);
  EXPECT_EQ(m.split_k_chunk, 64u);
  EXPECT_EQ(m.input_scale, 1024.0);
  ASSERT_EQ(inj->proof().size(), 1u);
  EXPECT_EQ(inj->proof()[0].before, "acc=float32");
}

}  // namespace
}  // namespace probelab::inject
