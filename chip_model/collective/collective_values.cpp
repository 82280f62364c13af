#include "chip_model/collective/collective_values.h"

#include <cstring>
#include <stdexcept>

namespace probelab::chip {
namespace {

using graph::DType;

template <class T>
void load_into(std::vector<T>& v, std::span<const std::byte> bytes, std::uint64_t begin, std::uint64_t n) {
  if ((begin + n) * sizeof(T) > bytes.size()) throw std::invalid_argument("collective: block outside its buffer");
  v.resize(n);
  std::memcpy(v.data(), bytes.data() + begin * sizeof(T), n * sizeof(T));
}

const void* data_of(const Value& v) {
  return v.dt == DType::F32   ? static_cast<const void*>(v.f.data())
         : v.dt == DType::F16 ? static_cast<const void*>(v.h.data())
                              : static_cast<const void*>(v.b.data());
}

/// A value of `n` copies of the integer `k` in dtype dt (exact for k <= 2048 in FP16, 256 in BF16).
Value splat(DType dt, std::size_t n, std::uint32_t k) {
  Value v;
  v.dt = dt;
  const double x = static_cast<double>(k);
  if (dt == DType::F32) v.f.assign(n, static_cast<float>(x));
  if (dt == DType::F16) v.h.assign(n, num::to_f16(x).value);
  if (dt == DType::BF16) v.b.assign(n, num::to_bf16(x).value);
  return v;
}

void apply(num::BinaryOp op, Value& a, const Value& b, const num::Mode& mode, num::BulkReport& rep) {
  switch (a.dt) {
    case DType::F32:
      rep.merge(num::elementwise(op, std::span<const float>(a.f), std::span<const float>(b.f), std::span<float>(a.f), mode));
      break;
    case DType::F16:
      rep.merge(num::elementwise(op, std::span<const num::f16>(a.h), std::span<const num::f16>(b.h),
                                 std::span<num::f16>(a.h), mode));
      break;
    default:
      rep.merge(num::elementwise(op, std::span<const num::bf16>(a.b), std::span<const num::bf16>(b.b),
                                 std::span<num::bf16>(a.b), mode));
      break;
  }
}

}  // namespace

std::vector<std::byte> Value::bytes() const {
  std::vector<std::byte> out(size() * graph::dtype_size(dt));
  if (!out.empty()) std::memcpy(out.data(), data_of(*this), out.size());
  return out;
}

std::span<const std::byte> Value::view() const {
  return std::span<const std::byte>(static_cast<const std::byte*>(data_of(*this)), size() * graph::dtype_size(dt));
}

void load_value_into(Value& v, std::span<const std::byte> bytes, DType dt, std::uint64_t begin, std::uint64_t n) {
  v.dt = dt;
  switch (dt) {
    case DType::F32: load_into(v.f, bytes, begin, n); break;
    case DType::F16: load_into(v.h, bytes, begin, n); break;
    case DType::BF16: load_into(v.b, bytes, begin, n); break;
    default: throw std::invalid_argument("collective: unsupported dtype");
  }
}

Value load_value(std::span<const std::byte> bytes, DType dt, std::uint64_t begin, std::uint64_t n) {
  Value v;
  load_value_into(v, bytes, dt, begin, n);
  return v;
}

void store_value(const Value& v, std::span<std::byte> out, std::uint64_t dst_begin) {
  const std::size_t es = graph::dtype_size(v.dt);
  if ((dst_begin + v.size()) * es > out.size()) throw std::invalid_argument("collective: block outside the output");
  std::memcpy(out.data() + dst_begin * es, data_of(v), v.size() * es);
}

Value convert_value(Value v, DType target, const num::Mode& mode, num::BulkReport& rep) {
  if (v.dt == target) return v;
  std::vector<float> f;
  if (v.dt == DType::F32) {
    f = std::move(v.f);
  } else if (v.dt == DType::F16) {
    f.resize(v.h.size());
    rep.merge(num::convert(std::span<const num::f16>(v.h), std::span<float>(f), mode));
  } else {
    f.resize(v.b.size());
    rep.merge(num::convert(std::span<const num::bf16>(v.b), std::span<float>(f), mode));
  }
  Value out;
  out.dt = target;
  if (target == DType::F32) {
    out.f = std::move(f);
  } else if (target == DType::F16) {
    out.h.resize(f.size());
    rep.merge(num::convert(std::span<const float>(f), std::span<num::f16>(out.h), mode));
  } else {
    out.b.resize(f.size());
    rep.merge(num::convert(std::span<const float>(f), std::span<num::bf16>(out.b), mode));
  }
  return out;
}

void convert_in_place(Value& v, DType target, const num::Mode& mode, num::BulkReport& rep) {
  if (v.dt == target) return;
  if (v.dt == DType::F16) {
    v.f.resize(v.h.size());
    rep.merge(num::convert(std::span<const num::f16>(v.h), std::span<float>(v.f), mode));
  } else if (v.dt == DType::BF16) {
    v.f.resize(v.b.size());
    rep.merge(num::convert(std::span<const num::bf16>(v.b), std::span<float>(v.f), mode));
  }
  v.dt = DType::F32;
  if (target == DType::F16) {
    v.h.resize(v.f.size());
    rep.merge(num::convert(std::span<const float>(v.f), std::span<num::f16>(v.h), mode));
  } else if (target == DType::BF16) {
    v.b.resize(v.f.size());
    rep.merge(num::convert(std::span<const float>(v.f), std::span<num::bf16>(v.b), mode));
  }
  v.dt = target;
}

void add_values(Value& a, const Value& b, const num::Mode& mode, num::BulkReport& rep) {
  if (a.dt != b.dt || a.size() != b.size()) throw std::invalid_argument("collective: adding mismatched blocks");
  apply(num::BinaryOp::Add, a, b, mode, rep);
}

Value finish_value(Value acc, DType data, bool mean, std::uint32_t divisor, const num::Mode& mode,
                   num::BulkReport& rep) {
  if (mean) apply(num::BinaryOp::Div, acc, splat(acc.dt, acc.size(), divisor), mode, rep);
  return convert_value(std::move(acc), data, mode, rep);
}

}  // namespace probelab::chip
