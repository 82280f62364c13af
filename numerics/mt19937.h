// Mt19937_64: the sequence of std::mt19937_64 (the same seed gives the same outputs; the tests
// compare them), computed 312 outputs at a time with AVX2 (the state update and the tempering four
// lanes at a time; eight with AVX-512 where the CPU has it). The first 312 are made as they are
// drawn, 32 at a time, from only the seed words they need (output i of the first block reads seed
// words i, i + 1 and i + 156): a generator seeded for a small tensor (a step's batch of inputs, a
// few labels) does not pay for the whole state. Drawing costs about a quarter of libstdc++'s engine on the machines here, which
// is most of the cost of generating a scenario's input tensors. Satisfies
// std::uniform_random_bit_generator.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <span>

namespace probelab::num {

class Mt19937_64 {
 public:
  using result_type = std::uint64_t;
  static constexpr std::size_t kStateSize = 312;

  explicit Mt19937_64(std::uint64_t seed);

  std::uint64_t operator()() {
    if (next_ == ready_) more();
    return out_[next_++];
  }
  /// The next out.size() outputs, as that many calls of operator() would return them.
  void generate(std::span<std::uint64_t> out);
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return std::numeric_limits<result_type>::max(); }

 private:
  void more();    // outputs from next_ on: the rest of the first block a piece at a time, then refill()
  void refill();  // the next 312 state words, and their tempered outputs
  void seed_to(std::size_t words);  // the seeding of state words [seeded_, words)

  // Not value-initialised: words are written before they are read (the padding in the constructor).
  alignas(32) std::array<std::uint64_t, kStateSize + 4> state_;  // 4 words of padding for vector loads
  alignas(32) std::array<std::uint64_t, kStateSize> out_;
  std::size_t next_ = 0;     // the next output to return
  std::size_t ready_ = 0;    // outputs [0, ready_) of the current block are made
  std::size_t seeded_ = 1;   // state words seeded (the first block only)
};

/// A uniform double in [0, 1) from the top 53 bits of a draw (exact: (draw >> 11) * 2^-53).
inline double unit_interval(std::uint64_t draw) { return static_cast<double>(draw >> 11) * 0x1.0p-53; }

}  // namespace probelab::num
