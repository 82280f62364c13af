// Op args block: encode/decode round trip and validation of malformed blocks.
#include <gtest/gtest.h>

#include <cstring>

#include "chip_model/spec/op_args.h"

namespace ps = probelab::spec;

namespace {

ps::OpArgs fused_example() {
  ps::OpArgs a;
  a.op_type = "FusedMatMulAddRelu";
  a.op_name = "layer1/fused";
  a.attrs["alpha"] = 0.5;
  a.attrs["axes"] = std::vector<std::int64_t>{0, -1};
  a.attrs["mode"] = std::string("constant");
  a.attrs["names"] = std::vector<std::string>{"a", "", "c"};
  a.attrs["scales"] = std::vector<double>{1.5, -2.25};
  a.attrs["transB"] = std::int64_t{1};
  a.inputs = {ps::make_tensor_ref(0x1000, 1, 0, {4, 8}), ps::make_tensor_ref(0x2000, 1, 4, {8, 16}),
              ps::make_tensor_ref(0x3000, 0, 0, {16})};
  a.outputs = {ps::make_tensor_ref(0x4000, 1, 0, {4, 16})};
  a.accum = ps::AccumDType::FP32;
  a.split_k_chunk = 64;
  a.num_internal = 2;
  a.fused_body = {{"MatMul", "mm", {}, {0, 1}, {4}},
                  {"Add", "add", {{"broadcast", std::int64_t{1}}}, {4, 2}, {5}},
                  {"Relu", "relu", {}, {5}, {3}}};
  return a;
}

}  // namespace

TEST(OpArgs, RoundTripPlainAndFused) {
  ps::OpArgs plain;
  plain.op_type = "Relu";
  plain.inputs = {ps::make_tensor_ref(64, 2, 0, {3, 5, 7})};
  plain.outputs = {ps::make_tensor_ref(4096, 2, 0, {3, 5, 7})};
  auto bytes = ps::encode_op_args(plain);
  EXPECT_EQ(ps::decode_op_args(bytes), plain);

  auto f = fused_example();
  auto fb = ps::encode_op_args(f);
  ps::OpArgs back = ps::decode_op_args(fb);
  EXPECT_EQ(back, f);
  EXPECT_TRUE(back.is_fused());
  EXPECT_EQ(std::get<double>(back.attrs.at("alpha")), 0.5);
  EXPECT_EQ(back.inputs[1].format, 4);
  EXPECT_EQ(back.inputs[1].dims[1], 16);
  EXPECT_EQ(ps::tensor_numel(back.outputs[0]), 64);

  // A padded read (e.g. whole HBM line) decodes too.
  auto padded = fb;
  padded.resize(fb.size() + 37, std::byte{0xAB});
  EXPECT_EQ(ps::decode_op_args(padded), f);
}

TEST(OpArgs, AbsentOptionalInput) {
  ps::OpArgs a;
  a.op_type = "Gemm";
  a.inputs = {ps::make_tensor_ref(0, 1, 0, {2, 2}), ps::make_tensor_ref(64, 1, 0, {2, 2}), ps::TensorRef{}};
  a.inputs[2].dtype = ps::kAbsentTensor;
  a.outputs = {ps::make_tensor_ref(128, 1, 0, {2, 2})};
  EXPECT_EQ(ps::decode_op_args(ps::encode_op_args(a)), a);
  a.outputs[0].dtype = ps::kAbsentTensor;
  EXPECT_THROW(ps::encode_op_args(a), ps::OpArgsError);
}

TEST(OpArgs, EveryTruncationIsAnError) {
  auto bytes = ps::encode_op_args(fused_example());
  for (std::size_t n = 0; n < bytes.size(); ++n)
    EXPECT_THROW(ps::decode_op_args(bytes.data(), n), ps::OpArgsError) << "length " << n;
}

TEST(OpArgs, CorruptHeaderAndFieldsAreNamed) {
  const auto good = ps::encode_op_args(fused_example());
  auto expect_error = [](std::vector<std::byte> b, const std::string& needle) {
    try {
      ps::decode_op_args(b);
      ADD_FAILURE() << "no error, expected one mentioning '" << needle << "'";
    } catch (const ps::OpArgsError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto b = good;
  b[0] = std::byte{0};
  expect_error(b, "bad magic");
  b = good;
  b[4] = std::byte{9};
  expect_error(b, "unsupported version");
  // Bytes after op type (4+18) and op name (4+12) strings: accum at 12 + 22 + 16.
  const std::size_t accum_at = 12 + 4 + 18 + 4 + 12;
  b = good;
  b[accum_at] = std::byte{7};
  expect_error(b, "accumulation mode");
  b = good;
  b[accum_at] = std::byte{1};  // FP16 accumulation together with split-K
  expect_error(b, "split_k_chunk");
  // Trailing garbage inside the declared size.
  b = good;
  b.push_back(std::byte{1});
  std::uint32_t total = static_cast<std::uint32_t>(b.size());
  std::memcpy(b.data() + 8, &total, 4);
  expect_error(b, "trailing bytes");
}

TEST(OpArgs, FusedBodyDataflowIsValidated) {
  auto a = fused_example();
  a.fused_body[1].inputs = {5, 2};  // reads its own output before it is written
  EXPECT_THROW(ps::encode_op_args(a), ps::OpArgsError);
  a = fused_example();
  a.fused_body[2].outputs = {4};  // writes an intermediate twice, never writes the op output
  EXPECT_THROW(ps::encode_op_args(a), ps::OpArgsError);
  a = fused_example();
  a.fused_body[0].outputs = {0};  // writes an op input
  EXPECT_THROW(ps::encode_op_args(a), ps::OpArgsError);
  a = fused_example();
  a.num_internal = 3;  // an intermediate nobody writes
  EXPECT_THROW(ps::encode_op_args(a), ps::OpArgsError);
  a = fused_example();
  a.inputs[0].rank = 9;
  EXPECT_THROW(ps::encode_op_args(a), ps::OpArgsError);
  a = fused_example();
  a.inputs[0].dtype = 9;  // one past uint8
  EXPECT_THROW(ps::encode_op_args(a), ps::OpArgsError);
}
