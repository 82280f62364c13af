// Device kernels: what the detection circuit is told (kind, first element in the documented scan
// order), overflow/saturation/FTZ modes, and the fault hook sites.
#include <gtest/gtest.h>

#include <cmath>

#include "numerics/fp16.h"
#include "tests/chip_model/kernel_test_util.h"

namespace pc = probelab::chip;
namespace pg = probelab::graph;
namespace ps = probelab::spec;
namespace num = probelab::num;
using pc::testing::fetch;
using pc::testing::MemStore;
using pc::testing::op_args;
using pc::testing::Placer;
using pc::testing::random_f16;
using pc::testing::run_op;
using pc::testing::set_bits;

namespace {

constexpr std::uint16_t kNaN = 0x7E00, kInf = 0x7C00;

std::vector<std::uint16_t> bits(const pg::Tensor& t) {
  auto v = t.data<std::uint16_t>();
  return {v.begin(), v.end()};
}

pg::Tensor filled(const pg::Shape& shape, float v, pg::DType dt = pg::DType::F16) {
  return pg::Tensor::from_f32(shape, std::vector<float>(static_cast<std::size_t>(pg::numel(shape)), v), dt);
}

}  // namespace

TEST(KernelDetection, NanInputLatchesFirstNanInScanOrder) {
  MemStore mem;
  Placer place(mem);
  pg::Tensor a = random_f16({8, 16}, 1), b = random_f16({16, 8}, 2);
  set_bits(b, 37, kNaN);  // only input 1 has NaNs
  set_bits(b, 90, kNaN);
  auto r = run_op(mem, op_args("MatMul", {place.put(a), place.put(b)}, {place.out(pg::DType::F16, {8, 8})}));
  EXPECT_EQ(r.detection().nan_input, 1);
  EXPECT_EQ(r.detection().inputs.first_kind(), ps::kExcNanInput);
  EXPECT_EQ(r.detection().inputs.first_elem(), 37);
  EXPECT_EQ(r.detection().inputs.kinds[ps::kExcNanInput].count, 2u);
  EXPECT_TRUE(r.detection().inputs.status & ps::kFsNanInput);
  // NaN outputs propagated from a NaN input are not "invalid".
  EXPECT_FALSE(r.detection().outputs[0].kinds[ps::kExcInvalid].hit());

  // Inputs are scanned in argument order: a NaN in input 0 wins over an earlier index in input 1.
  set_bits(a, 100, kNaN);
  auto r2 = run_op(mem, op_args("MatMul", {place.put(a), place.put(b)}, {place.out(pg::DType::F16, {8, 8})}));
  EXPECT_EQ(r2.detection().nan_input, 0);
  EXPECT_EQ(r2.detection().inputs.first_elem(), 100);
}

TEST(KernelDetection, NanInputScanIsLogicalRowMajorForPrivateFormats) {
  MemStore mem;
  Placer place(mem);
  pg::Tensor x = random_f16({1, 20, 2, 3}, 3);
  const std::size_t e = ((0 * 20 + 17) * 2 + 1) * 3 + 2;  // channel 17: second C1 block in NC1HWC0
  set_bits(x, e, kNaN);
  auto r = run_op(mem, op_args("Relu", {place.put(x, pg::Format::NC1HWC0)}, {place.out(pg::DType::F16, {1, 20, 2, 3})}));
  EXPECT_EQ(r.detection().nan_input, 0);
  EXPECT_EQ(r.detection().inputs.first_elem(), static_cast<std::int64_t>(e));
}

TEST(KernelDetection, OverflowFromLargeValuesInfNanAndSaturation) {
  MemStore mem;
  Placer place(mem);
  // Row 0 of A small, row 1 large: 300 * 300 * 2 = 180000 > 65504 overflows in the output conversion.
  pg::Tensor a = filled({3, 2}, 0.5f), b = filled({2, 4}, 300.0f);
  const std::vector<float> av{0.5f, 0.5f, 300.0f, 300.0f, 1.0f, 1.0f};
  a = pg::Tensor::from_f32({3, 2}, av, pg::DType::F16);
  const auto ra = place.put(a), rb = place.put(b);

  const auto o1 = place.out(pg::DType::F16, {3, 4});
  auto r = run_op(mem, op_args("MatMul", {ra, rb}, {o1}));
  const auto& f = r.detection().outputs[0];
  EXPECT_EQ(f.first_kind(), ps::kExcOverflow);
  EXPECT_EQ(f.first_elem(), 4);  // (1, 0) in row-major order
  EXPECT_EQ(f.kinds[ps::kExcOverflow].count, 4u);
  EXPECT_TRUE(f.status & ps::kFsOverflow);
  const auto y = bits(fetch(mem, o1));
  EXPECT_EQ(y[4], kInf);
  EXPECT_EQ(y[0], num::to_f16(300.0f).value.bits);

  const auto o2 = place.out(pg::DType::F16, {3, 4});
  auto s = run_op(mem, op_args("MatMul", {ra, rb}, {o2}), num::kSaturationMode);
  EXPECT_EQ(s.detection().outputs[0].first_kind(), ps::kExcOverflow);
  EXPECT_EQ(s.detection().outputs[0].first_elem(), 4);
  const auto ys = bits(fetch(mem, o2));
  EXPECT_EQ(ys[4], num::kF16Max.bits);  // saturated to 65504, flag still raised
  EXPECT_EQ(ys[7], num::kF16Max.bits);
}

TEST(KernelDetection, Fp16AccumulationOverflowIsReportedAtTheElement) {
  MemStore mem;
  Placer place(mem);
  // Partial sums exceed 65504 only in the FP16 accumulator; the exact result (0) fits.
  const std::vector<float> av{0.0f, 0.0f, 0.0f, 256.0f, -256.0f, 0.0f};
  const pg::Tensor a = pg::Tensor::from_f32({2, 3}, av, pg::DType::F16);
  const pg::Tensor b = filled({3, 2}, 256.0f);
  auto args = op_args("MatMul", {place.put(a), place.put(b)}, {place.out(pg::DType::F16, {2, 2})});
  auto fp32 = run_op(mem, args);
  EXPECT_FALSE(fp32.detection().outputs[0].any_kind());
  args.accum = ps::AccumDType::FP16_RN;
  auto fp16 = run_op(mem, args);
  EXPECT_EQ(fp16.detection().outputs[0].first_kind(), ps::kExcOverflow);
  EXPECT_EQ(fp16.detection().outputs[0].first_elem(), 2);  // row 1, column 0
}

TEST(KernelDetection, InvalidIsNanProducedFromNonNanInputs) {
  MemStore mem;
  Placer place(mem);
  pg::Tensor a = filled({2, 2}, 1.0f), b = filled({2, 2}, 1.0f);
  set_bits(a, 2, kInf);  // row 1 has Inf ...
  set_bits(b, 1, 0);     // ... times a zero in column 1: 0 * Inf -> NaN at (1, 1)
  auto r = run_op(mem, op_args("MatMul", {place.put(a), place.put(b)}, {place.out(pg::DType::F16, {2, 2})}));
  EXPECT_EQ(r.detection().nan_input, -1);
  const auto& f = r.detection().outputs[0];
  EXPECT_TRUE(f.kinds[ps::kExcInvalid].hit());
  EXPECT_EQ(f.kinds[ps::kExcInvalid].first, 3);
  EXPECT_TRUE(f.status & ps::kFsInvalid);
  // In saturation mode the NaN is delivered as 0 but still reported.
  const auto o = place.out(pg::DType::F16, {2, 2});
  auto s = run_op(mem, op_args("MatMul", {place.put(a), place.put(b)}, {o}), num::kSaturationMode);
  EXPECT_EQ(s.detection().outputs[0].kinds[ps::kExcInvalid].first, 3);
  EXPECT_EQ(bits(fetch(mem, o))[3], 0);
}

TEST(KernelDetection, Fp32VectorOverflowAndUnderflowToFp16) {
  MemStore mem;
  Placer place(mem);
  // FP32 Mul producing Inf from finite inputs: overflow at the first Inf.
  const std::vector<float> x{1.0f, 3e38f, -2.0f, 3e38f};
  const pg::Tensor xa = pg::Tensor::from_f32({4}, x, pg::DType::F32), xb = filled({4}, 10.0f, pg::DType::F32);
  auto r = run_op(mem, op_args("Mul", {place.put(xa), place.put(xb)}, {place.out(pg::DType::F32, {4})}));
  EXPECT_EQ(r.detection().outputs[0].first_kind(), ps::kExcOverflow);
  EXPECT_EQ(r.detection().outputs[0].first_elem(), 1);
  EXPECT_EQ(r.detection().outputs[0].kinds[ps::kExcOverflow].count, 2u);

  // A tiny FP16 product: 1e-4 * 1e-4 = 1e-8 underflows FP16 (min subnormal 6e-8).
  const pg::Tensor t = pg::Tensor::from_f32({3}, std::vector<float>{1.0f, 1e-4f, 1e-4f}, pg::DType::F16);
  auto u = run_op(mem, op_args("Mul", {place.put(t), place.put(t)}, {place.out(pg::DType::F16, {3})}));
  EXPECT_EQ(u.detection().outputs[0].first_kind(), ps::kExcUnderflow);
  EXPECT_EQ(u.detection().outputs[0].first_elem(), 1);
  EXPECT_TRUE(u.detection().outputs[0].status & ps::kFsUnderflow);

  // Flush-to-zero: a subnormal FP16 result becomes +0 and is reported as underflow.
  const pg::Tensor s = pg::Tensor::from_f32({2}, std::vector<float>{1.0f, 3e-3f}, pg::DType::F16);
  const auto o = place.out(pg::DType::F16, {2});
  const num::Mode ftz{num::OverflowMode::InfNan, num::DenormalMode::FlushToZero};
  auto z = run_op(mem, op_args("Mul", {place.put(s), place.put(s)}, {o}), ftz);
  EXPECT_EQ(z.detection().outputs[0].first_elem(), 1);
  EXPECT_EQ(bits(fetch(mem, o))[1], 0);
}

namespace {

/// Records every hook call and injects a NaN into output element 5 and forces the accumulator.
class RecordingHooks final : public pc::FaultHooks {
 public:
  std::uint32_t sites() const override {
    return pc::kFaultOpInput | pc::kFaultOpOutput | pc::kFaultGemmAccumulation | pc::kFaultVectorLanes;
  }
  void on_op_input(const pc::FaultSite&, std::uint16_t index, const pg::TensorDesc&, std::span<std::byte>) override {
    inputs.push_back(index);
  }
  void on_op_output(const pc::FaultSite&, std::uint16_t index, const pg::TensorDesc& d, std::uint64_t,
                    std::span<std::byte> bytes) override {
    outputs.push_back(index);
    if (d.dtype == pg::DType::F16) reinterpret_cast<std::uint16_t*>(bytes.data())[5] = kNaN;
  }
  void on_gemm_accumulation(const pc::FaultSite&, pc::AccumulationMode& m) override {
    ++gemms;
    m.acc_dtype = pg::DType::F16;
  }
  void on_vector_lanes(const pc::FaultSite&, const pg::TensorDesc&, std::uint64_t, std::uint32_t lanes,
                       std::span<std::byte>) override {
    lane_calls.push_back(lanes);
  }
  std::vector<std::uint16_t> inputs, outputs;
  std::vector<std::uint32_t> lane_calls;
  int gemms = 0;
};

}  // namespace

TEST(KernelDetection, FaultHooksAreCalledAtTheirSites) {
  MemStore mem;
  Placer place(mem);
  const pg::Tensor a = random_f16({4, 8}, 10), b = random_f16({8, 6}, 11);
  RecordingHooks hooks;
  auto r = run_op(mem, op_args("MatMul", {place.put(a), place.put(b)}, {place.out(pg::DType::F16, {4, 6})}), {},
                  &hooks);
  EXPECT_EQ(hooks.inputs, (std::vector<std::uint16_t>{0, 1}));
  EXPECT_EQ(hooks.outputs, (std::vector<std::uint16_t>{0}));
  EXPECT_EQ(hooks.gemms, 1);
  EXPECT_EQ(r.accumulation().acc_dtype, pg::DType::F16);
  EXPECT_TRUE(hooks.lane_calls.empty());  // plain Cube results do not pass the Vector unit
  // The NaN injected before the store is seen by detection as produced by this op.
  EXPECT_EQ(r.detection().outputs[0].first_kind(), ps::kExcInvalid);
  EXPECT_EQ(r.detection().outputs[0].first_elem(), 5);

  run_op(mem, op_args("Relu", {place.put(a)}, {place.out(pg::DType::F16, {4, 8})}), {}, &hooks);
  EXPECT_EQ(hooks.lane_calls, (std::vector<std::uint32_t>{64}));
  EXPECT_EQ(hooks.gemms, 1);  // no accumulation hook for Vector ops
}

namespace {

/// Writes -Inf into output element 7 after the op computed it (a fault on the output).
class OutputInfHook final : public pc::FaultHooks {
 public:
  std::uint32_t sites() const override { return pc::kFaultOpOutput; }
  void on_op_output(const pc::FaultSite&, std::uint16_t, const pg::TensorDesc&, std::uint64_t,
                    std::span<std::byte> bytes) override {
    reinterpret_cast<std::uint16_t*>(bytes.data())[7] = 0xFC00;
  }
};

}  // namespace

TEST(KernelDetection, AnOverflowLatchHoldsTheDeliveredInfinityOfAFaultAndTheComputedValueOfAConversion) {
  MemStore mem;
  Placer place(mem);
  const pg::Tensor a = random_f16({2, 8}, 12);
  OutputInfHook hook;
  for (const char* type : {"Relu", "Sigmoid"}) {
    auto r = run_op(mem, op_args(type, {place.put(a)}, {place.out(pg::DType::F16, {2, 8})}), {}, &hook);
    const auto& h = r.detection().outputs[0].kinds[ps::kExcOverflow];
    ASSERT_TRUE(h.hit()) << type;
    EXPECT_EQ(h.first, 7) << type;
    // The element was computed finite (within FP16's range): the latch holds the -Inf delivered.
    EXPECT_TRUE(std::isinf(h.value) && h.value < 0) << type << " " << h.value;
  }
  // A result beyond FP16's range overflows in the conversion: the latch keeps the computed value.
  const std::vector<float> av{0.5f, 0.5f, 300.0f, 300.0f};
  const pg::Tensor x = pg::Tensor::from_f32({2, 2}, av, pg::DType::F16);
  auto r = run_op(mem, op_args("MatMul", {place.put(x), place.put(filled({2, 4}, 300.0f))}, {place.out(pg::DType::F16, {2, 4})}));
  const auto& h = r.detection().outputs[0].kinds[ps::kExcOverflow];
  ASSERT_TRUE(h.hit());
  EXPECT_EQ(h.first, 4);  // row 1: 300 * 300 * 2 = 180000
  EXPECT_FLOAT_EQ(h.value, 180000.0f);
}
