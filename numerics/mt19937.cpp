#include "numerics/mt19937.h"

#include <immintrin.h>

#include <algorithm>

#include "numerics/detail/avx512.h"

namespace probelab::num {
namespace {

constexpr std::size_t kN = Mt19937_64::kStateSize, kM = 156;
constexpr std::uint64_t kUpper = 0xFFFFFFFF80000000ULL, kLower = 0x7FFFFFFFULL, kMatrix = 0xB5026F5AA96619E9ULL;

std::uint64_t twist_one(std::uint64_t x, std::uint64_t next, std::uint64_t far) {
  const std::uint64_t y = (x & kUpper) | (next & kLower);
  return far ^ (y >> 1) ^ ((y & 1) != 0 ? kMatrix : 0);
}

// Four words i..i+3 of the state update: far = the words i + m (first part) or i + m - n (second).
inline __m256i twist4(__m256i x, __m256i next, __m256i far) {
  const __m256i y = _mm256_or_si256(_mm256_and_si256(x, _mm256_set1_epi64x(static_cast<long long>(kUpper))),
                                    _mm256_and_si256(next, _mm256_set1_epi64x(static_cast<long long>(kLower))));
  const __m256i one = _mm256_set1_epi64x(1);
  const __m256i odd = _mm256_cmpeq_epi64(_mm256_and_si256(y, one), one);
  const __m256i mag = _mm256_and_si256(odd, _mm256_set1_epi64x(static_cast<long long>(kMatrix)));
  return _mm256_xor_si256(_mm256_xor_si256(far, _mm256_srli_epi64(y, 1)), mag);
}

inline __m256i temper4(__m256i z) {
  z = _mm256_xor_si256(z, _mm256_and_si256(_mm256_srli_epi64(z, 29), _mm256_set1_epi64x(0x5555555555555555LL)));
  z = _mm256_xor_si256(z, _mm256_and_si256(_mm256_slli_epi64(z, 17), _mm256_set1_epi64x(0x71D67FFFEDA60000LL)));
  z = _mm256_xor_si256(z, _mm256_and_si256(_mm256_slli_epi64(z, 37),
                                           _mm256_set1_epi64x(static_cast<long long>(0xFFF7EEE000000000ULL))));
  return _mm256_xor_si256(z, _mm256_srli_epi64(z, 43));
}

__m256i load(const std::uint64_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
void store(std::uint64_t* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }

}  // namespace

Mt19937_64::Mt19937_64(std::uint64_t seed) {
  state_[0] = seed;
  std::fill(state_.begin() + kN, state_.end(), 0);
}

void Mt19937_64::seed_to(std::size_t words) {
  // std::mersenne_twister_engine::seed
  for (std::size_t i = seeded_; i < words; ++i)
    state_[i] = 6364136223846793005ULL * (state_[i - 1] ^ (state_[i - 1] >> 62)) + i;
  seeded_ = std::max(seeded_, words);
}

void Mt19937_64::more() {
  if (ready_ == kN) return refill();
  // The first block, words [a, b): the same updates as refill() in the same order, so the same
  // words. Word i < n - m reads seed words i + 1 and i + m (vector loads: up to b + m - 1); the
  // later ones read words already updated and i + 1 (seeded by then).
  constexpr std::size_t kPiece = 32;  // n - m = 156 and n = 312 are multiples of 4, the pieces too
  const std::size_t a = ready_, b = std::min(kN, a + kPiece);
  seed_to(std::min(kN, b + kM));
  std::uint64_t* mt = state_.data();
  std::size_t i = a;
  for (; i < std::min(b, kN - kM); i += 4) store(mt + i, twist4(load(mt + i), load(mt + i + 1), load(mt + i + kM)));
  for (; i + 4 <= b && i + 4 < kN; i += 4) store(mt + i, twist4(load(mt + i), load(mt + i + 1), load(mt + i + kM - kN)));
  for (; i < b && i < kN - 1; ++i) mt[i] = twist_one(mt[i], mt[i + 1], mt[i + kM - kN]);
  if (b == kN) mt[kN - 1] = twist_one(mt[kN - 1], mt[0], mt[kM - 1]);
  for (std::size_t j = a; j < b; j += 4) store(out_.data() + j, temper4(load(mt + j)));
  ready_ = b;
}

void Mt19937_64::generate(std::span<std::uint64_t> out) {
  std::size_t done = 0;
  while (done < out.size()) {
    if (next_ == ready_) more();
    const std::size_t n = std::min(out.size() - done, ready_ - next_);
    std::copy_n(out_.data() + next_, n, out.data() + done);
    next_ += n;
    done += n;
  }
}

void Mt19937_64::refill() {
  next_ = 0;
  ready_ = kN;
  if (detail::avx512_kernels()) return detail::mt19937_refill_avx512(state_.data(), out_.data());
  std::uint64_t* mt = state_.data();
  // As std::mersenne_twister_engine::_M_gen_rand: word i from i, i + 1 (not yet updated) and
  // i + m (first n - m words; not yet updated) or i + m - n (the rest; already updated, 156 words
  // back, so four at a time read only finished words).
  std::size_t i = 0;
  for (; i < kN - kM; i += 4) store(mt + i, twist4(load(mt + i), load(mt + i + 1), load(mt + i + kM)));
  for (; i + 4 < kN; i += 4) store(mt + i, twist4(load(mt + i), load(mt + i + 1), load(mt + i + kM - kN)));
  for (; i < kN - 1; ++i) mt[i] = twist_one(mt[i], mt[i + 1], mt[i + kM - kN]);
  mt[kN - 1] = twist_one(mt[kN - 1], mt[0], mt[kM - 1]);
  for (std::size_t j = 0; j < kN; j += 4) store(out_.data() + j, temper4(load(mt + j)));
}

}  // namespace probelab::num
