// msprobe's compare table for two dumps: one row per tensor present in both, with NPU (run A)
// against Bench (run B) — Cosine, EucDist, MaxAbsErr, MaxRelativeErr, One Thousandth Err Ratio,
// Five Thousandths Err Ratio, the statistics of both sides, and "Accuracy Reached or Not".
//
// Either side may be a probelab run (its dump/rank<r>/dump.json manifests; op types from its
// report.json) or an msprobe dump (dump_path/step<S>/rank<R>/dump.json with "data" and
// dump_tensor_data/; .npy tensors are compared element by element, .pt ones — which need torch —
// by their statistics). Tensors match by (rank, step, op, edge) between probelab dumps; between
// an msprobe and a probelab dump by (rank, step, the n-th forward call of an API = the n-th
// forward op of the matching type, input/output, index), e.g. Functional.softmax.0.forward
// output.0 = the first Softmax's out0.
//
// Verdict (msprobe's "Accuracy Reached or Not", from probes::judge with `criteria`): "No" when
// (Cosine < cosine_min and MaxAbsErr > max_abs_err), Cosine < cosine_hard_min, MaxAbsErr >
// max_abs_err_hard, a per-dtype mean/max relative error bound is exceeded, or NaN/Inf appear on
// one side only; else "Yes". Statistics-only rows: "No" when NaN/Inf appear on one side only (the
// NaN or Inf counts differ; without counts, one side's statistics are non-finite and the other's
// not), else "Warning" when a statistic's relative difference exceeds `stats_rtol` (a NaN
// statistic on both sides agrees), else "Yes".
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "probes/probe_config.h"

namespace probelab::sim {

struct TableStats {
  std::optional<double> max, min, mean, norm;
  std::optional<double> nan_count, inf_count;  // probelab's statistics captures count them
};

struct TableRow {
  std::uint32_t rank = 0, step = 0;
  std::string npu_name, bench_name;  // "attn/softmax out0" | "Functional.softmax.0.forward.output.0"
  std::string npu_dtype, bench_dtype;
  std::vector<std::int64_t> npu_shape, bench_shape;
  std::optional<double> cosine, euc_dist, max_abs_err, max_rel_err, one_thousandth, five_thousandths;
  TableStats npu, bench;
  std::string result;   // "Yes" | "No" | "Warning"
  std::string message;  // why not reached, or how it was compared
};

struct CompareTable {
  std::vector<TableRow> rows;  // run A's order
  std::size_t only_a = 0, only_b = 0;
  bool npu_msprobe = false, bench_msprobe = false;  // which side is an msprobe dump
  std::size_t reached() const;
  std::size_t not_reached() const;  // "No" and "Warning"
  nlohmann::json to_json() const;
  std::string to_csv() const;
};

struct TableOptions {
  probes::CompareCriteria criteria;  // msprobe defaults: 0.99 / 0.001, 0.9, 1.0; no relative bounds
  double stats_rtol = 0.5;
  TableOptions() {
    criteria.mean_rel_err.clear();
  }
};

/// Throws ScenarioError naming the directory or manifest for a missing directory, no manifest,
/// or a manifest that is neither probelab's nor msprobe's.
CompareTable build_compare_table(const std::filesystem::path& a, const std::filesystem::path& b,
                                 const TableOptions& opts = {});

}  // namespace probelab::sim
