// The scenario's normal inputs and the model files' normal and kaiming initialisers, drawn with
// num::box_muller, hold the values that the C library's log, cos and sin give for the same streams.
#include "sim/scenario/data_gen.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "graph/init.h"

namespace probelab::sim {
namespace {

double unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

TEST(DataGen, NormalInputsEqualTheCLibrarysBoxMuller) {
  DataSpec spec;
  spec.seed = 77;
  spec.mean = -0.5;
  spec.std = 4.0;
  const DataGenerator gen(spec);
  const graph::TensorDesc desc{graph::DType::F32, {301, 677}, graph::Format::ND};  // an odd count: a lone cosine at the end
  for (std::uint32_t rank : {0u, 5u}) {
    const std::vector<float> got = gen.make_float("x", desc, 3, rank).to_f32();
    std::mt19937_64 rng(stream_seed(spec.seed, "x", 3, rank));
    std::size_t differ = 0;
    for (std::size_t i = 0; i < got.size(); i += 2) {
      const double u1 = 1.0 - unit(rng), u2 = unit(rng);
      const double r = std::sqrt(-2.0 * std::log(u1));
      differ += got[i] != static_cast<float>(spec.mean + spec.std * r * std::cos(2 * M_PI * u2));
      if (i + 1 < got.size()) differ += got[i + 1] != static_cast<float>(spec.mean + spec.std * r * std::sin(2 * M_PI * u2));
    }
    EXPECT_EQ(differ, 0u) << "rank " << rank;
  }
}

// FP16 and BF16 inputs are the FP32 samples of the whole tensor rounded once to the dtype, at
// counts that are not a multiple of the generator's pieces, odd ones included.
TEST(DataGen, HalfInputsAreTheFp32SamplesRounded) {
  DataSpec spec;
  spec.seed = 78;
  spec.mean = 0.25;
  spec.std = 3.0;
  const DataGenerator gen(spec);
  for (const graph::DType t : {graph::DType::F16, graph::DType::BF16}) {
    for (const graph::Shape& shape : {graph::Shape{1}, graph::Shape{3, 5}, graph::Shape{4096}, graph::Shape{3, 4099}}) {
      const graph::Tensor got = gen.make_float("x", graph::TensorDesc{t, shape, graph::Format::ND}, 2, 1);
      const graph::Tensor fp32 = gen.make_float("x", graph::TensorDesc{graph::DType::F32, shape, graph::Format::ND}, 2, 1);
      EXPECT_EQ(got, graph::Tensor::from_f32(shape, fp32.data<float>(), t)) << graph::dtype_name(t) << " " << shape.back();
    }
  }
}

TEST(DataGen, NormalAndKaimingInitialisersEqualTheCLibrarysBoxMuller) {
  const graph::TensorDesc desc{graph::DType::F32, {256, 513}, graph::Format::ND};
  for (const char* text : {"normal(0.1, 0.02)", "kaiming"}) {
    const graph::InitSpec spec = graph::parse_init(text);
    const std::vector<float> got = graph::make_init(spec, desc, 99).to_f32();
    const double scale = spec.kind == graph::InitSpec::Kind::Kaiming ? std::sqrt(2.0 / 256) : spec.b;
    const double shift = spec.kind == graph::InitSpec::Kind::Kaiming ? 0.0 : spec.a;
    std::mt19937_64 rng(99);
    std::size_t differ = 0;
    for (float g : got) {
      double u1 = unit(rng);
      while (u1 <= 0.0) u1 = unit(rng);
      const double u2 = unit(rng);
      differ += g != static_cast<float>(shift + scale * (std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2)));
    }
    EXPECT_EQ(differ, 0u) << text;
  }
}

// 8-bit inputs are raw bytes: every value of the dtype appears, seeded per input, step and rank;
// other integer inputs without an initialiser stay zero.
TEST(DataGen, ByteInputsCoverTheirRangeAndIntegerInputsStayZero) {
  DataSpec spec;
  spec.seed = 5;
  const DataGenerator gen(spec);
  for (const auto& [t, lo] : {std::pair{graph::DType::U8, 0.0}, std::pair{graph::DType::I8, -128.0}}) {
    const graph::TensorDesc desc{t, {4, 3, 32, 32}, graph::Format::ND};
    const std::vector<double> v = gen.make_input("image", desc, 1, 0, nullptr).to_f64();
    std::vector<int> seen(256, 0);
    for (double x : v) ++seen.at(static_cast<std::size_t>(x - lo));
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 0), 0) << graph::dtype_name(t);
    EXPECT_NE(gen.make_input("image", desc, 2, 0, nullptr), gen.make_input("image", desc, 1, 0, nullptr));
    EXPECT_EQ(gen.make_input("image", desc, 1, 0, nullptr), gen.make_input("image", desc, 1, 0, nullptr));
  }
  const graph::TensorDesc ids{graph::DType::I64, {2, 8}, graph::Format::ND};
  EXPECT_EQ(gen.make_input("ids", ids, 0, 0, nullptr), graph::Tensor(ids));
}

}  // namespace
}  // namespace probelab::sim
