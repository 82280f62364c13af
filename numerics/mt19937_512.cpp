// Mt19937_64's refill with AVX-512 (detail/avx512.h): the steps of mt19937.cpp's twist4 and
// temper4 on eight words at a time, the same integer operations, so the same outputs. Compiled
// with AVX-512 F (numerics/CMakeLists.txt); used only where the CPU has it.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wuninitialized reports.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "numerics/detail/avx512.h"

namespace probelab::num::detail {
namespace {

constexpr std::size_t kN = Mt19937_64::kStateSize, kM = 156;
constexpr std::uint64_t kUpper = 0xFFFFFFFF80000000ULL, kLower = 0x7FFFFFFFULL, kMatrix = 0xB5026F5AA96619E9ULL;

inline __m512i i64(std::uint64_t x) { return _mm512_set1_epi64(static_cast<long long>(x)); }

// Words i..i+7 from i, i + 1 and far (i + m or i + m - n), as std::mersenne_twister_engine.
inline __m512i twist8(__m512i x, __m512i next, __m512i far) {
  const __m512i y = _mm512_or_si512(_mm512_and_si512(x, i64(kUpper)), _mm512_and_si512(next, i64(kLower)));
  const __m512i mag = _mm512_maskz_mov_epi64(_mm512_test_epi64_mask(y, i64(1)), i64(kMatrix));
  return _mm512_xor_si512(_mm512_xor_si512(far, _mm512_srli_epi64(y, 1)), mag);
}

inline __m512i temper8(__m512i z) {
  z = _mm512_xor_si512(z, _mm512_and_si512(_mm512_srli_epi64(z, 29), i64(0x5555555555555555ULL)));
  z = _mm512_xor_si512(z, _mm512_and_si512(_mm512_slli_epi64(z, 17), i64(0x71D67FFFEDA60000ULL)));
  z = _mm512_xor_si512(z, _mm512_and_si512(_mm512_slli_epi64(z, 37), i64(0xFFF7EEE000000000ULL)));
  return _mm512_xor_si512(z, _mm512_srli_epi64(z, 43));
}

__m512i load(const std::uint64_t* p) { return _mm512_loadu_si512(p); }
void store(std::uint64_t* p, __m512i v) { _mm512_storeu_si512(p, v); }

std::uint64_t twist_one(std::uint64_t x, std::uint64_t next, std::uint64_t far) {
  const std::uint64_t y = (x & kUpper) | (next & kLower);
  return far ^ (y >> 1) ^ ((y & 1) != 0 ? kMatrix : 0);
}

}  // namespace

void mt19937_refill_avx512(std::uint64_t* mt, std::uint64_t* out) {
  // Words 0 .. n - m - 1 read i + m (not yet updated); the rest read i + m - n (updated, 156 words
  // back, so eight at a time read only finished words). n - m = 156 = 19 * 8 + 4.
  std::size_t i = 0;
  for (; i + 8 <= kN - kM; i += 8) store(mt + i, twist8(load(mt + i), load(mt + i + 1), load(mt + i + kM)));
  for (; i < kN - kM; ++i) mt[i] = twist_one(mt[i], mt[i + 1], mt[i + kM]);
  for (; i + 8 < kN; i += 8) store(mt + i, twist8(load(mt + i), load(mt + i + 1), load(mt + i + kM - kN)));
  for (; i < kN - 1; ++i) mt[i] = twist_one(mt[i], mt[i + 1], mt[i + kM - kN]);
  mt[kN - 1] = twist_one(mt[kN - 1], mt[0], mt[kM - 1]);
  for (std::size_t j = 0; j < kN; j += 8) store(out + j, temper8(load(mt + j)));
}

}  // namespace probelab::num::detail
