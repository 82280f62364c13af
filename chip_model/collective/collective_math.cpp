#include "chip_model/collective/collective_math.h"

#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "numerics/bf16.h"
#include "numerics/fp16.h"

namespace probelab::chip {
namespace {

using graph::DType;

/// Elements of one dtype; only the vector of `dt` is used.
struct Value {
  DType dt = DType::F32;
  std::vector<float> f;
  std::vector<num::f16> h;
  std::vector<num::bf16> b;
};

template <class T>
void load_into(std::vector<T>& v, std::span<const std::byte> bytes, std::uint64_t begin, std::uint64_t n) {
  v.resize(n);
  std::memcpy(v.data(), bytes.data() + begin * sizeof(T), n * sizeof(T));
}

Value load(std::span<const std::byte> in, DType dt, std::uint64_t begin, std::uint64_t n) {
  Value v;
  v.dt = dt;
  switch (dt) {
    case DType::F32: load_into(v.f, in, begin, n); break;
    case DType::F16: load_into(v.h, in, begin, n); break;
    case DType::BF16: load_into(v.b, in, begin, n); break;
    default: throw std::invalid_argument("collective: unsupported dtype");
  }
  return v;
}

void store(const Value& v, std::span<std::byte> out, std::uint64_t dst_begin) {
  const void* src = v.dt == DType::F32 ? static_cast<const void*>(v.f.data())
                    : v.dt == DType::F16 ? static_cast<const void*>(v.h.data())
                                         : static_cast<const void*>(v.b.data());
  const std::size_t n = v.dt == DType::F32 ? v.f.size() : v.dt == DType::F16 ? v.h.size() : v.b.size();
  const std::size_t es = graph::dtype_size(v.dt);
  std::memcpy(out.data() + dst_begin * es, src, n * es);
}

/// Converts `v` to `target` (through FP32, which holds FP16 and BF16 exactly).
Value convert_to(Value v, DType target, const num::Mode& mode, num::BulkReport& rep) {
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

/// a = op(a, b) elementwise in a.dt (both operands already in that dtype).
void apply(num::BinaryOp op, Value& a, const Value& b, const num::Mode& mode, num::BulkReport& rep) {
  switch (a.dt) {
    case DType::F32:
      rep.merge(num::elementwise(op, std::span<const float>(a.f), std::span<const float>(b.f),
                                 std::span<float>(a.f), mode));
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

/// A value of `n` copies of the integer `k` in dtype dt (exact for k <= 256 in every dtype here).
Value splat(DType dt, std::size_t n, std::uint32_t k) {
  Value v;
  v.dt = dt;
  const double x = static_cast<double>(k);
  if (dt == DType::F32) v.f.assign(n, static_cast<float>(x));
  if (dt == DType::F16) v.h.assign(n, num::to_f16(x).value);
  if (dt == DType::BF16) v.b.assign(n, num::to_bf16(x).value);
  return v;
}

std::size_t size_of(const Value& v) {
  return v.dt == DType::F32 ? v.f.size() : v.dt == DType::F16 ? v.h.size() : v.b.size();
}

class Evaluator {
 public:
  Evaluator(const CollectivePlan& plan, const std::vector<std::span<const std::byte>>& inputs,
            const std::vector<num::Mode>& modes, std::vector<num::BulkReport>& reports)
      : plan_(plan), inputs_(inputs), modes_(modes), reports_(reports) {}

  /// Value of exprs[e] over input elements [begin, begin + n), in the data dtype.
  Value run(const ReductionExpr& e, std::uint64_t begin, std::uint64_t n) {
    const auto& terms = e.terms;
    if (terms.size() == 1) return load(inputs_[terms[0].position], plan_.data_dtype, begin, n);
    std::vector<std::size_t> last_use(terms.size(), 0);
    for (std::size_t i = 0; i < terms.size(); ++i)
      if (terms[i].kind == PlanTerm::Kind::Add) last_use[terms[i].lhs] = last_use[terms[i].rhs] = i;
    std::vector<std::optional<Value>> vals(terms.size());
    auto take = [&](std::uint32_t idx, std::size_t at) -> Value {
      if (!vals[idx]) {
        const auto& t = terms[idx];
        return load(inputs_[t.position], plan_.data_dtype, begin, n);  // leaf, loaded on use
      }
      if (last_use[idx] == at) {
        Value v = std::move(*vals[idx]);
        vals[idx].reset();
        return v;
      }
      return *vals[idx];
    };
    for (std::size_t i = 0; i < terms.size(); ++i) {
      const auto& t = terms[i];
      if (t.kind == PlanTerm::Kind::Leaf) continue;
      const DType acc = plan_.acc_dtypes.at(t.position);
      const num::Mode& mode = mode_of(t.position);
      num::BulkReport rep;
      Value a = convert_to(take(t.lhs, i), acc, mode, rep);
      Value b = convert_to(take(t.rhs, i), acc, mode, rep);
      apply(num::BinaryOp::Add, a, b, mode, rep);
      reports_[t.position].merge(rep, static_cast<std::int64_t>(begin));
      vals[i] = std::move(a);
    }
    Value result = std::move(*vals.back());
    const num::Mode& mode = mode_of(e.final_at);
    num::BulkReport rep;
    if (plan_.reduction == spec::ReduceOp::Mean)
      apply(num::BinaryOp::Div, result, splat(result.dt, size_of(result), plan_.size()), mode, rep);
    result = convert_to(std::move(result), plan_.data_dtype, mode, rep);
    reports_[e.final_at].merge(rep, static_cast<std::int64_t>(begin));
    return result;
  }

 private:
  const num::Mode& mode_of(std::uint32_t pos) const { return modes_.size() == 1 ? modes_[0] : modes_.at(pos); }

  const CollectivePlan& plan_;
  const std::vector<std::span<const std::byte>>& inputs_;
  const std::vector<num::Mode>& modes_;
  std::vector<num::BulkReport>& reports_;
};

}  // namespace

num::Flags CollectiveOutcome::flags() const {
  num::Flags f;
  for (const auto& r : reports) f |= r.flags;
  return f;
}

CollectiveOutcome execute_plan(const CollectivePlan& plan,
                               const std::vector<std::span<const std::byte>>& inputs,
                               const std::vector<num::Mode>& modes) {
  const std::uint32_t n = plan.size();
  const std::size_t es = graph::dtype_size(plan.data_dtype);
  if (inputs.size() != n)
    throw std::invalid_argument(fmt::format("collective: {} inputs for {} ranks", inputs.size(), n));
  for (std::uint32_t q = 0; q < n; ++q)
    if (inputs[q].size() != plan.input_count() * es)
      throw std::invalid_argument(fmt::format("collective: input of rank r{} has {} bytes, expected {}",
                                              plan.group[q], inputs[q].size(), plan.input_count() * es));
  if (modes.size() != 1 && modes.size() != n)
    throw std::invalid_argument(fmt::format("collective: {} modes for {} ranks", modes.size(), n));

  CollectiveOutcome out;
  out.outputs.assign(n, std::vector<std::byte>(plan.output_count() * es));
  out.reports.resize(n);
  Evaluator ev(plan, inputs, modes, out.reports);
  // Each (expression, source range) is evaluated once and copied to every rank that holds it.
  std::map<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t>, Value> done;
  for (std::uint32_t q = 0; q < n; ++q) {
    for (const auto& c : plan.ranks[q].chunks) {
      const auto key = std::make_tuple(c.expr, c.src_begin, c.count);
      auto it = done.find(key);
      if (it == done.end()) it = done.emplace(key, ev.run(plan.exprs.at(c.expr), c.src_begin, c.count)).first;
      store(it->second, out.outputs[q], c.dst_begin);
    }
  }
  return out;
}

}  // namespace probelab::chip
