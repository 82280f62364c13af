#include "probes/consistency.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "probes/anomaly.h"

namespace probelab::probes {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

using Key = std::tuple<std::uint32_t, std::uint32_t, std::string, bool, std::uint16_t>;  // step, order, op, in, index

struct Diff {
  double value = 0;   // NaN: differs, size unknown
  std::string basis;
};

Diff diff(const SyncSample& r, const SyncSample& ref) {
  if (r.data && ref.data) {
    if (r.data->bytes().size() == ref.data->bytes().size() &&
        std::equal(r.data->bytes().begin(), r.data->bytes().end(), ref.data->bytes().begin()))
      return {0, "tensor"};
    auto a = r.data->to_f64(), b = ref.data->to_f64();
    if (a.size() != b.size()) return {kInf, "tensor"};
    double m = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (std::isnan(a[i]) && std::isnan(b[i])) continue;
      double d = std::fabs(a[i] - b[i]);
      if (std::isnan(d)) d = kInf;  // NaN on one side, or Inf - Inf of opposite signs
      m = std::max(m, d);
    }
    return {m, "tensor"};
  }
  if (r.stats && ref.stats) {
    const auto &x = *r.stats, &y = *ref.stats;
    if (x.nan_count != y.nan_count || x.inf_count != y.inf_count || x.count != y.count) return {kInf, "statistics"};
    // equal NaN/Inf counts: compare the finite parts (the numpy statistics are NaN/Inf alike)
    double m = std::max({std::fabs(x.finite_min - y.finite_min), std::fabs(x.finite_max - y.finite_max),
                         std::fabs(x.finite_mean - y.finite_mean), std::fabs(x.finite_max_abs - y.finite_max_abs)});
    return {m, "statistics"};
  }
  if (r.hash && ref.hash) return {*r.hash == *ref.hash ? 0.0 : kNaN, "hash"};
  return {kNaN, "none"};
}

bool diverges(const Diff& d, double tol) { return std::isnan(d.value) || d.value > tol; }

std::string edge(bool in, std::uint16_t i) { return fmt::format("{}{}", in ? "in" : "out", i); }

nlohmann::json num(double v) { return json_number(v); }

}  // namespace

ConsistencyResult check_consistency(std::span<const SyncSample> samples, const ConsistencyOptions& opts) {
  ConsistencyResult res;
  res.reference_rank = opts.reference_rank;
  // edge -> group -> rank -> sample
  std::map<Key, std::map<std::uint32_t, std::map<std::uint32_t, const SyncSample*>>> edges;
  std::map<std::uint32_t, std::set<std::uint32_t>> members;
  std::set<std::uint32_t> ranks;
  for (const auto& s : samples) {
    if (!opts.steps.contains(s.step) || (s.is_input && !opts.compare_inputs)) continue;
    edges[{s.step, s.order, s.op, s.is_input, s.index}][s.group][s.rank] = &s;
    members[s.group].insert(s.rank);
    ranks.insert(s.rank);
  }
  res.ranks.assign(ranks.begin(), ranks.end());
  std::set<std::pair<std::uint32_t, std::string>> ops;  // (order, op)
  for (const auto& e : edges) ops.emplace(std::get<1>(e.first), std::get<2>(e.first));
  for (const auto& o : ops)
    if (res.ops.empty() || res.ops.back() != o.second) res.ops.push_back(o.second);
  if (edges.empty()) return res;
  res.checked = true;
  if (!ranks.count(opts.reference_rank)) {
    res.missing.push_back(fmt::format("reference rank {} has no samples", opts.reference_rank));
    return res;
  }
  auto reference_of = [&](std::uint32_t group) {
    const auto& m = members.at(group);
    return m.count(opts.reference_rank) ? opts.reference_rank : *m.begin();
  };
  // Worst difference of an edge over its groups (NaN: bits differ, size unknown). With
  // `diverging`: over the ranks beyond the tolerance, which it receives.
  auto compare_edge = [&](const Key& key, const auto& by_group, std::vector<std::uint32_t>* diverging,
                          std::vector<double>* diffs, std::vector<std::uint32_t>* refs, std::string* basis, bool count) {
    const auto& [step, order, op, in, index] = key;
    double worst = 0;
    bool unknown = false;
    for (const auto& [group, by_rank] : by_group) {
      const std::uint32_t ref_rank = reference_of(group);
      auto ref = by_rank.find(ref_rank);
      if (ref == by_rank.end()) {
        if (count)
          res.missing.push_back(fmt::format("reference rank {} has no sample for step {} op {} {}", ref_rank, step, op,
                                            edge(in, index)));
        continue;
      }
      std::vector<std::uint32_t> away;  // this group's ranks beyond the tolerance from the reference
      std::vector<double> away_diffs;
      std::size_t compared = 0;
      for (std::uint32_t r : members.at(group)) {
        if (r == ref_rank) continue;
        auto it = by_rank.find(r);
        if (it == by_rank.end()) {
          if (count) res.missing.push_back(fmt::format("rank {} has no sample for step {} op {} {}", r, step, op, edge(in, index)));
          continue;
        }
        ++compared;
        if (count) ++res.comparisons;
        Diff df = diff(*it->second, *ref->second);
        if (basis) *basis = df.basis;
        if (diverging) {  // the divergence: only ranks beyond the tolerance; growth: every rank
          if (!diverges(df, opts.tolerance)) continue;
          away.push_back(r);
          away_diffs.push_back(df.value);
        }
        if (std::isnan(df.value)) unknown = true;
        else worst = std::max(worst, df.value);
      }
      if (!diverging) continue;
      // Every other member (two or more) away from the reference and within the tolerance of each
      // other: the reference is the one that diverges, by the largest of those differences.
      bool agree = compared >= 2 && away.size() == compared;
      for (std::size_t i = 1; agree && i < away.size(); ++i)
        agree = !diverges(diff(*by_rank.at(away[i]), *by_rank.at(away[0])), opts.tolerance);
      if (agree) {
        const bool nan = std::any_of(away_diffs.begin(), away_diffs.end(), [](double v) { return std::isnan(v); });
        away_diffs = {nan ? kNaN : *std::max_element(away_diffs.begin(), away_diffs.end())};
        away = {ref_rank};
      }
      diverging->insert(diverging->end(), away.begin(), away.end());
      diffs->insert(diffs->end(), away_diffs.begin(), away_diffs.end());
      refs->insert(refs->end(), away.size(), ref_rank);
    }
    return unknown && worst == 0 ? kNaN : worst;
  };
  for (const auto& [key, by_group] : edges) {
    const auto& [step, order, op, in, index] = key;
    Divergence d;
    d.step = step;
    d.op = op;
    d.tensor = by_group.begin()->second.begin()->second->tensor;
    d.is_input = in;
    d.index = index;
    std::vector<std::uint32_t> rs, refs;
    std::vector<double> ds;
    d.max_abs_diff = compare_edge(key, by_group, &rs, &ds, &refs, &d.basis, true);
    if (rs.empty()) continue;
    std::vector<std::size_t> idx(rs.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return rs[a] < rs[b]; });
    for (std::size_t i : idx) {
      d.ranks.push_back(rs[i]);
      d.rank_diffs.push_back(ds[i]);
      d.references.push_back(refs[i]);
    }
    res.divergences.push_back(d);
  }
  if (res.divergences.empty()) return res;
  res.consistent = false;
  res.first = res.divergences.front();
  // growth of the first divergent edge over all steps
  const Divergence& f = *res.first;
  for (const auto& [key, by_group] : edges) {
    const auto& [step, order, op, in, index] = key;
    if (op != f.op || in != f.is_input || index != f.index) continue;
    res.growth.emplace_back(step, compare_edge(key, by_group, nullptr, nullptr, nullptr, nullptr, false));
  }
  std::vector<double> tail;
  for (auto [s, v] : res.growth)
    if (s >= f.step) tail.push_back(v);
  res.growing = tail.size() >= 2 && !std::isnan(tail.front()) && !std::isnan(tail.back()) && tail.back() > tail.front();
  for (std::size_t i = 1; res.growing && i < tail.size(); ++i)
    if (std::isnan(tail[i]) || tail[i] < tail[i - 1]) res.growing = false;
  return res;
}

nlohmann::json to_json(const Divergence& d) {
  nlohmann::json j = {{"step", d.step},   {"op", d.op},       {"tensor", d.tensor}, {"edge", edge(d.is_input, d.index)},
          {"ranks", d.ranks}, {"max_abs_diff", num(d.max_abs_diff)}, {"basis", d.basis}};
  nlohmann::json per_rank = nlohmann::json::array();
  for (double v : d.rank_diffs) per_rank.push_back(num(v));
  j["rank_diffs"] = per_rank;
  return j;
}

nlohmann::json to_json(const ConsistencyResult& r) {
  nlohmann::json j = {{"checked", r.checked},     {"consistent", r.consistent}, {"reference_rank", r.reference_rank},
                      {"ranks", r.ranks},         {"comparisons", r.comparisons}, {"growing", r.growing},
                      {"ops", r.ops},             {"missing", r.missing}};
  j["first_divergence"] = r.first ? to_json(*r.first) : nlohmann::json(nullptr);
  j["divergences"] = nlohmann::json::array();
  for (const auto& d : r.divergences) j["divergences"].push_back(to_json(d));
  j["growth"] = nlohmann::json::array();
  for (auto [s, v] : r.growth) j["growth"].push_back({{"step", s}, {"max_abs_diff", num(v)}});
  return j;
}

}  // namespace probelab::probes
