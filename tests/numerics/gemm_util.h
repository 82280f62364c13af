// Shared helpers of the GEMM tests: logical matrices over raw FP16/BF16 storage (optionally
// transposed, with padded leading dimensions) and a runner that checks C's padding stays untouched.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "numerics/bf16.h"
#include "numerics/fp16.h"
#include "numerics/gemm.h"

namespace probelab::num::testing {

struct Mat {
  std::int64_t rows, cols, ld;
  bool trans;
  InType type;
  std::vector<std::uint16_t> data;
  // logical element (r, c)
  std::uint16_t at(std::int64_t r, std::int64_t c) const {
    return trans ? data[static_cast<std::size_t>(c * ld + r)] : data[static_cast<std::size_t>(r * ld + c)];
  }
  std::uint16_t& at(std::int64_t r, std::int64_t c) {
    return trans ? data[static_cast<std::size_t>(c * ld + r)] : data[static_cast<std::size_t>(r * ld + c)];
  }
  GemmOperand op() const { return {data.data(), type, ld, trans}; }
};

inline Mat random_mat(std::int64_t rows, std::int64_t cols, InType type, bool trans, std::uint64_t seed,
                      float scale = 1.0f, std::int64_t pad = 3) {
  Mat m{rows, cols, (trans ? rows : cols) + pad, trans, type, {}};
  m.data.assign(static_cast<std::size_t>((trans ? cols : rows) * m.ld), 0xFFFF);  // padding = NaN: must be unused
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      const float x = nd(rng);
      m.at(r, c) = type == InType::F16 ? to_f16(x).value.bits : to_bf16(x).value.bits;
    }
  }
  return m;
}

struct GemmRun {
  std::vector<std::uint32_t> out;
  GemmReport rep;
};

inline GemmRun run(const Mat& A, const Mat& B, OutType ot, const GemmOptions& o) {
  const std::int64_t M = A.rows, N = B.cols, ldc = N + 5;
  GemmRun r;
  std::vector<float> c32(static_cast<std::size_t>(M * ldc), -1.0f);
  std::vector<std::uint16_t> c16(static_cast<std::size_t>(M * ldc), 0xABCD);
  void* data = ot == OutType::F32 ? static_cast<void*>(c32.data()) : static_cast<void*>(c16.data());
  r.rep = gemm(M, N, A.cols, A.op(), B.op(), GemmOutput{data, ot, ldc}, o);
  for (std::int64_t m = 0; m < M; ++m) {
    for (std::int64_t n = 0; n < N; ++n) {
      const auto i = static_cast<std::size_t>(m * ldc + n);
      r.out.push_back(ot == OutType::F32 ? std::bit_cast<std::uint32_t>(c32[i]) : c16[i]);
    }
    for (std::int64_t n = N; n < ldc; ++n) {  // the padding of C is untouched
      const auto i = static_cast<std::size_t>(m * ldc + n);
      EXPECT_TRUE(ot == OutType::F32 ? c32[i] == -1.0f : c16[i] == 0xABCD);
    }
  }
  return r;
}

inline void expect_report(const GemmReport& got, const GemmReport& want, const std::string& what) {
  EXPECT_EQ(got.flags, want.flags) << what << ": " << to_string(got.flags) << " vs " << to_string(want.flags);
  for (Flag f : kAllFlags) EXPECT_EQ(got.first_index(f), want.first_index(f)) << what << " first " << flag_name(f);
}

}  // namespace probelab::num::testing
