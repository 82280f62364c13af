// canonicalize_nans: every NaN pattern of a format, and nothing else, becomes the default NaN.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <vector>

#include "numerics/bulk.h"
#include "numerics/types.h"

namespace num = probelab::num;

TEST(CanonicalNan, EveryFp16AndBf16PatternExhaustively) {
  std::vector<num::f16> h(65536);
  std::vector<num::bf16> b(65536);
  for (std::uint32_t i = 0; i < 65536; ++i) {
    h[i] = num::f16{static_cast<std::uint16_t>(i)};
    b[i] = num::bf16{static_cast<std::uint16_t>(i)};
  }
  EXPECT_EQ(num::canonicalize_nans(h), 2 * 1023);  // each sign: 2^10 - 1 fractions
  EXPECT_EQ(num::canonicalize_nans(b), 2 * 127);
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const bool nan16 = (i & 0x7C00u) == 0x7C00u && (i & 0x03FFu) != 0;
    const bool nanb = (i & 0x7F80u) == 0x7F80u && (i & 0x007Fu) != 0;
    ASSERT_EQ(h[i].bits, nan16 ? 0x7E00u : i) << i;
    ASSERT_EQ(b[i].bits, nanb ? 0x7FC0u : i) << i;
  }
}

TEST(CanonicalNan, Fp32NansOfEverySignPayloadAndQuietness) {
  const std::vector<std::uint32_t> nans{0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu, 0xFFFFFFFFu, 0x7FC12345u};
  const std::vector<std::uint32_t> others{0x7F800000u, 0xFF800000u, 0u, 0x80000000u, 0x7F7FFFFFu, 0x00000001u, 0x3F800000u};
  std::vector<float> x;
  for (std::size_t i = 0; i < nans.size(); ++i) {
    x.push_back(std::bit_cast<float>(nans[i]));
    x.push_back(std::bit_cast<float>(others[i]));
  }
  EXPECT_EQ(num::canonicalize_nans(x), static_cast<std::int64_t>(nans.size()));
  for (std::size_t i = 0; i < nans.size(); ++i) {
    EXPECT_EQ(std::bit_cast<std::uint32_t>(x[2 * i]), num::kF32DefaultNaNBits);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(x[2 * i + 1]), others[i]);
  }
  EXPECT_EQ(num::canonicalize_nans(std::span<float>()), 0);
}
