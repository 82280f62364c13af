// Which NaN the chip delivers: an op that computes its outputs (Vector arithmetic, activations,
// norms, the Cube's GEMM) delivers the default NaN whatever NaNs its inputs held and whichever
// the host arithmetic passed on; an op that only moves elements (Transpose, Concat, Gather,
// Reshape, Where, Cast) keeps a NaN's sign and payload. Detection is the same either way.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "numerics/fp16.h"
#include "tests/chip_model/kernel_test_util.h"

namespace pc = probelab::chip;
namespace pg = probelab::graph;
namespace ps = probelab::spec;
using pc::testing::fetch;
using pc::testing::MemStore;
using pc::testing::op_args;
using pc::testing::Placer;
using pc::testing::random_f16;
using pc::testing::run_op;
using pc::testing::set_bits;

namespace {

// Negative quiet NaNs with payloads, and a positive one with another payload.
constexpr std::uint16_t kNegNaN = 0xFE01, kNegNaN2 = 0xFE40, kPosNaN = 0x7E07;

bool is_nan16(std::uint16_t b) { return probelab::num::is_nan(probelab::num::f16{b}); }

// Every NaN of t (FP16) is the default NaN; returns how many there are.
int expect_default_nans(const pg::Tensor& t) {
  int n = 0;
  for (std::uint16_t b : t.data<std::uint16_t>())
    if (is_nan16(b)) {
      EXPECT_EQ(b, 0x7E00u);
      ++n;
    }
  return n;
}

}  // namespace

TEST(NanDelivery, ComputedNansAreTheDefaultNanWhateverTheInputsHeld) {
  MemStore mem;
  Placer place(mem);
  pg::Tensor a = random_f16({4, 16}, 1), bias = random_f16({16}, 2);
  set_bits(a, 3, kNegNaN);
  set_bits(a, 20, kPosNaN);
  set_bits(bias, 3, kNegNaN2);  // element 3 of every row: NaN + NaN of the other sign and payload
  set_bits(bias, 9, kNegNaN);
  const auto ra = place.put(a), rb = place.put(bias);
  for (const char* type : {"Add", "Mul", "Sub"}) {
    const auto out = place.out(pg::DType::F16, {4, 16});
    auto r = run_op(mem, op_args(type, {ra, rb}, {out}));
    // rows 0-3 at columns 3 and 9, and element 20
    EXPECT_EQ(expect_default_nans(fetch(mem, out)), 9) << type;
    EXPECT_EQ(r.detection().nan_input, 0) << type;
    EXPECT_EQ(r.detection().inputs.first_elem(), 3) << type;
  }
  for (const char* type : {"Gelu", "Sigmoid", "Relu", "Softmax"}) {
    const auto out = place.out(pg::DType::F16, {4, 16});
    run_op(mem, op_args(type, {ra}, {out}));
    EXPECT_GE(expect_default_nans(fetch(mem, out)), 1) << type;
  }
  // The Cube's GEMM gave the default NaN before this rule: unchanged.
  pg::Tensor w = random_f16({16, 8}, 3);
  set_bits(w, 5, kNegNaN);
  const auto out = place.out(pg::DType::F16, {4, 8});
  run_op(mem, op_args("MatMul", {ra, place.put(w)}, {out}));
  EXPECT_EQ(expect_default_nans(fetch(mem, out)), 2 * 8 + 2);  // rows 0 and 1 of A, column 5 of W
}

TEST(NanDelivery, AnInvalidOperationRaisesInvalidAndDeliversThePositiveDefaultNan) {
  // inf - inf on the host gives x86's negative "indefinite" NaN; the chip delivers +NaN.
  MemStore mem;
  Placer place(mem);
  pg::Tensor a = random_f16({2, 8}, 4), b = random_f16({2, 8}, 5);
  set_bits(a, 6, 0x7C00);
  set_bits(b, 6, 0x7C00);
  const auto out = place.out(pg::DType::F16, {2, 8});
  auto r = run_op(mem, op_args("Sub", {place.put(a), place.put(b)}, {out}));
  const pg::Tensor y = fetch(mem, out);
  EXPECT_EQ(y.data<std::uint16_t>()[6], 0x7E00u);
  EXPECT_EQ(expect_default_nans(y), 1);
  EXPECT_TRUE(r.detection().outputs[0].kinds[ps::kExcInvalid].hit());
  EXPECT_EQ(r.detection().outputs[0].kinds[ps::kExcInvalid].first, 6);
}

TEST(NanDelivery, Fp32AndBf16OutputsGetTheirFormatsDefaultNan) {
  MemStore mem;
  Placer place(mem);
  std::vector<float> v(12, 1.5f);
  v[2] = std::bit_cast<float>(0xFFC00123u);  // negative quiet NaN with a payload
  v[7] = -std::numeric_limits<float>::infinity();
  const pg::Tensor x = pg::Tensor::from_f32({3, 4}, v, pg::DType::F32);
  const auto rx = place.put(x);
  const auto o32 = place.out(pg::DType::F32, {3, 4});
  run_op(mem, op_args("Add", {rx, rx}, {o32}));  // element 7: -inf + -inf is -inf, not NaN
  const pg::Tensor y = fetch(mem, o32);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(y.data<float>()[2]), 0x7FC00000u);
  EXPECT_TRUE(std::isinf(y.data<float>()[7]));

  const pg::Tensor xb = pg::Tensor::from_f32({3, 4}, v, pg::DType::BF16);
  const auto ob = place.out(pg::DType::BF16, {3, 4});
  run_op(mem, op_args("Mul", {place.put(xb), place.put(xb)}, {ob}));
  EXPECT_EQ(fetch(mem, ob).data<std::uint16_t>()[2], 0x7FC0u);
}

TEST(NanDelivery, OpsThatMoveElementsKeepEachNansSignAndPayload) {
  MemStore mem;
  Placer place(mem);
  pg::Tensor x = random_f16({4, 6}, 6);
  set_bits(x, 1, kNegNaN);
  set_bits(x, 10, kPosNaN);
  set_bits(x, 23, kNegNaN2);
  const auto rx = place.put(x);
  auto check = [&](const pg::Tensor& y, const char* what) {
    std::vector<std::uint16_t> want{kNegNaN, kPosNaN, kNegNaN2}, got;
    for (std::uint16_t b : y.data<std::uint16_t>())
      if (is_nan16(b)) got.push_back(b);
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want) << what;
  };
  {
    const auto out = place.out(pg::DType::F16, {6, 4});
    auto r = run_op(mem, op_args("Transpose", {rx}, {out}, {{"perm", std::vector<std::int64_t>{1, 0}}}));
    check(fetch(mem, out), "Transpose");
    EXPECT_EQ(r.detection().nan_input, 0);
  }
  {
    const auto out = place.out(pg::DType::F16, {24});
    run_op(mem, op_args("Reshape", {rx}, {out}, {{"shape", std::vector<std::int64_t>{24}}}));
    check(fetch(mem, out), "Reshape");
  }
  {
    const auto out = place.out(pg::DType::F16, {4, 6});
    run_op(mem, op_args("Identity", {rx}, {out}));
    check(fetch(mem, out), "Identity");
  }
  {
    const pg::Tensor idx = pg::Tensor::from_f32({4}, std::vector<float>{3, 2, 1, 0}, pg::DType::I64);
    const auto out = place.out(pg::DType::F16, {4, 6});
    run_op(mem, op_args("Gather", {rx, place.put(idx)}, {out}, {{"axis", std::int64_t{0}}}));
    check(fetch(mem, out), "Gather");
  }
  {
    const auto out = place.out(pg::DType::F32, {4, 6});
    run_op(mem, op_args("Cast", {rx}, {out}, {{"to", std::int64_t{1}}}));
    // FP16 -> FP32 keeps sign and payload (fraction << 13), as F16C's VCVTPH2PS does.
    const pg::Tensor y = fetch(mem, out);
    const auto f = y.data<float>();
    EXPECT_EQ(std::bit_cast<std::uint32_t>(f[1]), 0xFFC02000u);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(f[10]), 0x7FC0E000u);
  }
}
