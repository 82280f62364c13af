// Einsum on the device: a batched matrix product runs on the Cube bit for bit like numerics::gemm
// on its permuted operands, in every accumulation mode; any other equation runs the Vector kernel
// on graph's reference.
#include <gtest/gtest.h>

#include "chip_model/kernels/kernel.h"
#include "graph/op_registry.h"
#include "graph/ops/einsum.h"
#include "numerics/fp16.h"
#include "numerics/gemm.h"
#include "tests/chip_model/kernel_test_util.h"

namespace pc = probelab::chip;
namespace pg = probelab::graph;
namespace ps = probelab::spec;
namespace num = probelab::num;
using pc::testing::f16p;
using pc::testing::fetch;
using pc::testing::MemStore;
using pc::testing::op_args;
using pc::testing::Placer;
using pc::testing::random_f16;
using pc::testing::run_op;

namespace {

TEST(EinsumKernel, BatchedProductRunsOnTheCubeLikeGemmOnPermutedOperands) {
  MemStore mem;
  Placer place(mem);
  // A is [k, b, m]: its summed label first, so the MTE must permute it to [b, m, k].
  const std::int64_t B = 2, M = 5, K = 260, N = 7;
  const pg::Tensor a = random_f16({K, B, M}, 11, 0.0f, 1.0f), b = random_f16({B, K, N}, 12, 0.0f, 1.0f);
  const pg::Tensor ap = pg::ops::permuted(a, {1, 2, 0});
  const ps::OpAttrs eq{{"equation", std::string("kbm,bkn->bmn")}};
  for (auto [accum, mode] : {std::pair{ps::AccumDType::FP32, num::Accum::Fp32},
                             std::pair{ps::AccumDType::FP16_RN, num::Accum::Fp16Rn},
                             std::pair{ps::AccumDType::FP16_VIA_FP32, num::Accum::Fp16ViaFp32}}) {
    const auto out = place.out(pg::DType::F16, {B, M, N});
    auto args = op_args("Einsum", {place.put(a), place.put(b)}, {out}, eq);
    args.accum = accum;
    EXPECT_TRUE(pc::kernels::KernelRegistry::instance().get(args).uses_cube(args));
    run_op(mem, args);
    const pg::Tensor y = fetch(mem, out);
    num::GemmOptions opt;
    opt.accum = mode;
    for (std::int64_t i = 0; i < B; ++i) {
      std::vector<num::f16> expect(static_cast<std::size_t>(M * N));
      num::gemm(M, N, K, f16p(ap) + i * M * K, f16p(b) + i * K * N, expect.data(), opt);
      for (std::int64_t j = 0; j < M * N; ++j)
        ASSERT_EQ(y.data<std::uint16_t>()[static_cast<std::size_t>(i * M * N + j)], expect[static_cast<std::size_t>(j)].bits)
            << "accum " << int(accum) << " batch " << i << " element " << j;
    }
  }
}

TEST(EinsumKernel, OtherEquationsRunTheVectorReference) {
  MemStore mem;
  Placer place(mem);
  const pg::Tensor a = random_f16({2, 3, 3}, 13);
  // A diagonal and a product whose output is not in (batch, M, N) order stay on the Vector unit.
  for (const char* e : {"bii->bi", "bij,bjk->bki"}) {
    const bool two = std::string(e).find(',') != std::string::npos;
    const pg::Shape shape = two ? pg::Shape{2, 3, 3} : pg::Shape{2, 3};
    const auto out = place.out(pg::DType::F16, shape);
    std::vector<ps::TensorRef> in{place.put(a)};
    if (two) in.push_back(place.put(a));
    const auto args = op_args("Einsum", in, {out}, {{"equation", std::string(e)}});
    EXPECT_FALSE(pc::kernels::KernelRegistry::instance().get(args).uses_cube(args)) << e;
    run_op(mem, args);
    pg::Op op;
    op.type = "Einsum";
    op.name = "ref";
    op.attrs = {{"equation", std::string(e)}};
    op.inputs = two ? std::vector<std::string>{"a", "b"} : std::vector<std::string>{"a"};
    op.outputs = {"y"};
    std::vector<const pg::Tensor*> ins{&a};
    if (two) ins.push_back(&a);
    const pg::Tensor ref = pg::run_reference(op, ins, pg::RefPrecision::F32)[0];
    EXPECT_EQ(fetch(mem, out), pg::Tensor::from_f32(shape, ref.to_f32(), pg::DType::F16)) << e;
  }
}

}  // namespace
