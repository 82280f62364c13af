#include "chip_model/collective/collective_math.h"

#include <map>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "chip_model/collective/collective_values.h"

namespace probelab::chip {
namespace {

using graph::DType;

class Evaluator {
 public:
  Evaluator(const CollectivePlan& plan, const std::vector<std::span<const std::byte>>& inputs,
            const std::vector<num::Mode>& modes, std::vector<num::BulkReport>& reports)
      : plan_(plan), inputs_(inputs), modes_(modes), reports_(reports) {}

  /// Value of exprs[e] over input elements [begin, begin + n), in the data dtype.
  Value run(const ReductionExpr& e, std::uint64_t begin, std::uint64_t n) {
    const auto& terms = e.terms;
    if (terms.size() == 1) return load_value(inputs_[terms[0].position], plan_.data_dtype, begin, n);
    std::vector<std::size_t> last_use(terms.size(), 0);
    for (std::size_t i = 0; i < terms.size(); ++i)
      if (terms[i].kind == PlanTerm::Kind::Add) last_use[terms[i].lhs] = last_use[terms[i].rhs] = i;
    std::vector<std::optional<Value>> vals(terms.size());
    auto take = [&](std::uint32_t idx, std::size_t at) -> Value {
      if (!vals[idx]) {
        const auto& t = terms[idx];
        return load_value(inputs_[t.position], plan_.data_dtype, begin, n);  // leaf, loaded on use
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
      Value a = convert_value(take(t.lhs, i), acc, mode, rep);
      Value b = convert_value(take(t.rhs, i), acc, mode, rep);
      add_values(a, b, mode, rep);
      reports_[t.position].merge(rep, static_cast<std::int64_t>(begin));
      vals[i] = std::move(a);
    }
    const num::Mode& mode = mode_of(e.final_at);
    num::BulkReport rep;
    Value result = finish_value(std::move(*vals.back()), plan_.data_dtype, plan_.reduction == spec::ReduceOp::Mean,
                                plan_.divisor ? plan_.divisor : plan_.size(), mode, rep);
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
      store_value(it->second, out.outputs[q], c.dst_begin);
    }
  }
  return out;
}

}  // namespace probelab::chip
