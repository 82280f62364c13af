// The arithmetic of collectives on real values: blocks of elements of one dtype, conversions
// between the data and accumulation dtypes and elementwise additions, each returning the flags it
// raised. Shared by the chips' engines (collective_engine.h) and the reference evaluation of a
// whole plan (collective_math.h), so both compute the same bits. Pure C++, no SystemC.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "graph/dtype.h"
#include "numerics/bulk.h"
#include "numerics/fp16.h"
#include "numerics/bf16.h"
#include "numerics/mode.h"

namespace probelab::chip {

/// Elements of one dtype (F32, F16 or BF16); only the vector of `dt` is used.
struct Value {
  graph::DType dt = graph::DType::F32;
  std::vector<float> f;
  std::vector<num::f16> h;
  std::vector<num::bf16> b;
  std::size_t size() const {
    return dt == graph::DType::F32 ? f.size() : dt == graph::DType::F16 ? h.size() : b.size();
  }
  std::vector<std::byte> bytes() const;
  /// The elements' bytes, in place.
  std::span<const std::byte> view() const;
};

/// `n` elements of `dt` starting at element `begin` of `bytes`. Throws std::invalid_argument for
/// another dtype.
Value load_value(std::span<const std::byte> bytes, graph::DType dt, std::uint64_t begin, std::uint64_t n);
/// The same into `v`, reusing its storage (no allocation when it held as many elements before).
void load_value_into(Value& v, std::span<const std::byte> bytes, graph::DType dt, std::uint64_t begin, std::uint64_t n);
/// Writes `v` into `out` at element `dst_begin`.
void store_value(const Value& v, std::span<std::byte> out, std::uint64_t dst_begin);
/// `v` in `target` (through FP32, which holds FP16 and BF16 exactly; narrowing rounds to nearest
/// even with flags into `rep`).
Value convert_value(Value v, graph::DType target, const num::Mode& mode, num::BulkReport& rep);
/// The same in place: the same bits and flags, `v`'s storage reused (a block converted at every
/// message of a collective allocates nothing once its vectors have grown).
void convert_in_place(Value& v, graph::DType target, const num::Mode& mode, num::BulkReport& rep);
/// a += b elementwise in a.dt (both in that dtype).
void add_values(Value& a, const Value& b, const num::Mode& mode, num::BulkReport& rep);
/// A partial sum as the result: divided by `divisor` in its dtype when `mean`, then converted to
/// the data dtype `data`.
Value finish_value(Value acc, graph::DType data, bool mean, std::uint32_t divisor, const num::Mode& mode,
                   num::BulkReport& rep);

}  // namespace probelab::chip
