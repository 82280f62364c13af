// Mt19937_64 gives std::mt19937_64's outputs for the same seed, across several refills.
#include <concepts>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "numerics/detail/avx512.h"
#include "numerics/mt19937.h"

namespace {

static_assert(std::uniform_random_bit_generator<probelab::num::Mt19937_64>);

TEST(Mt19937_64, SameOutputsAsTheStandardEngine) {
  std::mt19937_64 seeds(99);
  std::vector<std::uint64_t> cases = {0, 1, 5489, 0xFFFFFFFFFFFFFFFFULL, 0x8000000000000000ULL};
  for (int i = 0; i < 20; ++i) cases.push_back(seeds());
  for (std::uint64_t seed : cases) {
    std::mt19937_64 want(seed);
    probelab::num::Mt19937_64 got(seed);
    for (int i = 0; i < 10 * 312 + 7; ++i) ASSERT_EQ(got(), want()) << "seed " << seed << ", output " << i;
  }
}

// Both state updates, AVX2 and (where the CPU has it) AVX-512, give the standard engine's outputs.
TEST(Mt19937_64, BothInstructionSetsGiveTheStandardOutputs) {
  for (const bool avx512 : {false, true}) {
    probelab::num::detail::set_avx512_kernels(avx512);
    for (std::uint64_t seed : {0ULL, 5489ULL, 0xFFFFFFFFFFFFFFFFULL, 123456789ULL}) {
      std::mt19937_64 want(seed);
      probelab::num::Mt19937_64 got(seed);
      for (int i = 0; i < 10 * 312 + 7; ++i) ASSERT_EQ(got(), want()) << avx512 << " seed " << seed << ", output " << i;
    }
  }
  probelab::num::detail::set_avx512_kernels(true);
}

TEST(Mt19937_64, GenerateEqualsSingleDraws) {
  std::mt19937_64 want(3);
  probelab::num::Mt19937_64 got(3);
  std::vector<std::uint64_t> buf;
  for (const std::size_t n : {0, 1, 5, 311, 312, 313, 700, 2000, 3}) {
    buf.assign(n, 0);
    got.generate(buf);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(buf[i], want()) << n << " " << i;
    ASSERT_EQ(got(), want());  // and single draws go on from there
  }
}

// The first block is made a piece at a time as it is drawn: every length of a first draw, then
// single draws past the block, and a copy taken part-way through, give the standard outputs.
TEST(Mt19937_64, FirstBlockMadeAsDrawnGivesTheStandardOutputs) {
  for (const bool avx512 : {false, true}) {
    probelab::num::detail::set_avx512_kernels(avx512);
    for (std::size_t first = 0; first <= 2 * 312 + 1; ++first) {
      const std::uint64_t seed = 1000 + first;
      std::mt19937_64 want(seed);
      probelab::num::Mt19937_64 got(seed);
      std::vector<std::uint64_t> buf(first);
      got.generate(buf);
      for (std::size_t i = 0; i < first; ++i) ASSERT_EQ(buf[i], want()) << avx512 << " " << first << " " << i;
      probelab::num::Mt19937_64 copy = got;
      std::mt19937_64 want_copy = want;
      for (int i = 0; i < 400; ++i) ASSERT_EQ(got(), want()) << avx512 << " " << first << " then " << i;
      for (int i = 0; i < 400; ++i) ASSERT_EQ(copy(), want_copy()) << avx512 << " copy at " << first << " then " << i;
    }
  }
  probelab::num::detail::set_avx512_kernels(true);
}

TEST(Mt19937_64, WorksWithStandardDistributions) {
  std::mt19937_64 want(7);
  probelab::num::Mt19937_64 got(7);
  std::uniform_int_distribution<int> d(0, 1000);
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(d(got), d(want));
}

}  // namespace
