// Bulk (array) conversions, elementwise operations and NaN/Inf/denormal scans, vectorised with
// F16C/AVX2. Every bulk function gives, element by element, exactly the value and flags of the
// scalar operation (fp16.h, bf16.h, arith.h) — the tests prove it bit for bit — and reports the
// union of the flags plus, per flag, the index of the first element that raised it. This is what
// the chip's exception circuits latch ("first offending element").
//
// Spans: `out` must have the size of the inputs (std::invalid_argument otherwise); outputs may
// alias inputs of the same type exactly (in-place), not partially overlap.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <span>

#include "numerics/flags.h"
#include "numerics/mode.h"
#include "numerics/types.h"

namespace probelab::num {

struct BulkReport {
  Flags flags;
  // first[int(f)]: index of the first element that raised flag f, or -1.
  std::array<std::int64_t, kFlagCount> first{-1, -1, -1, -1, -1, -1, -1};

  std::int64_t first_index(Flag f) const noexcept { return first[static_cast<int>(f)]; }
  // Records flags raised by element `index` (keeps the lowest index per flag).
  void raise(Flags f, std::int64_t index) noexcept {
    flags |= f;
    for (unsigned b = f.bits; b != 0; b &= b - 1) {
      std::int64_t& slot = first[static_cast<std::size_t>(std::countr_zero(b))];
      if (slot < 0 || index < slot) slot = index;
    }
  }
  // Merges a report whose indices are relative to `offset`.
  void merge(const BulkReport& other, std::int64_t offset = 0) noexcept {
    // A report with no flag and no index (the common case of a clean operation) changes nothing.
    std::int64_t all = -1;
    for (std::int64_t i : other.first) all &= i;
    if (other.flags.none() && all < 0) return;
    merge_indices(other, offset);
  }

 private:
  void merge_indices(const BulkReport& other, std::int64_t offset) noexcept;
};

// Conversions (values and flags exactly those of to_f16 / to_f32 / to_bf16 of each element).
BulkReport convert(std::span<const float> in, std::span<f16> out, const Mode& mode = {});
BulkReport convert(std::span<const f16> in, std::span<float> out, const Mode& mode = {});
BulkReport convert(std::span<const float> in, std::span<bf16> out, const Mode& mode = {});
BulkReport convert(std::span<const bf16> in, std::span<float> out, const Mode& mode = {});

enum class BinaryOp : std::uint8_t { Add = 0, Sub = 1, Mul = 2, Div = 3, Min = 4, Max = 5 };
const char* to_string(BinaryOp op);

// out[i] = op(a[i], b[i]) with the scalar semantics of arith.h (Min/Max = minimum/maximum).
BulkReport elementwise(BinaryOp op, std::span<const f16> a, std::span<const f16> b, std::span<f16> out,
                       const Mode& mode = {});
BulkReport elementwise(BinaryOp op, std::span<const bf16> a, std::span<const bf16> b, std::span<bf16> out,
                       const Mode& mode = {});
BulkReport elementwise(BinaryOp op, std::span<const float> a, std::span<const float> b, std::span<float> out,
                       const Mode& mode = {});

// What a detection circuit sees when it watches a tensor go by.
struct ScanReport {
  std::int64_t nan_count = 0;
  std::int64_t inf_count = 0;
  std::int64_t subnormal_count = 0;  // non-zero subnormals
  std::int64_t first_nan = -1;
  std::int64_t first_inf = -1;
  std::int64_t first_subnormal = -1;

  bool clean() const noexcept { return nan_count == 0 && inf_count == 0 && subnormal_count == 0; }
};

ScanReport scan(std::span<const f16> x);
ScanReport scan(std::span<const bf16> x);
ScanReport scan(std::span<const float> x);

/// scan(x) and, in the same pass, the finite elements of magnitude >= `limit` (a positive finite
/// float): how many and the first (FP32 results a narrower output format cannot hold).
struct LimitScan {
  ScanReport scan;
  std::int64_t beyond_count = 0;
  std::int64_t first_beyond = -1;
};
LimitScan scan(std::span<const float> x, float limit);

/// convert(in, out, mode) to FP16 and, in the same pass, what a detection circuit watching both
/// sides sees: `in` = scan(in, 65520) (the values' NaNs, infinities, subnormals and the finite
/// ones FP16 cannot hold) and `out` = scan(out) after the conversion. Identical to the three
/// separate calls; a block of 8 inputs that are all zero or of FP16-normal magnitude below 65520
/// holds none of those and is not scanned.
struct ConvertScan {
  BulkReport flags;
  LimitScan in;
  ScanReport out;
};
ConvertScan convert_scanned(std::span<const float> in, std::span<f16> out, const Mode& mode = {});

/// Replaces every NaN of x (whatever its sign and payload, signaling or quiet) by the format's
/// default NaN (types.h); returns how many there were. No flag: the NaNs were already delivered.
std::int64_t canonicalize_nans(std::span<float> x);
std::int64_t canonicalize_nans(std::span<f16> x);
std::int64_t canonicalize_nans(std::span<bf16> x);

}  // namespace probelab::num
