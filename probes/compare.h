// Reference comparison: metrics between a device tensor and a reference, msprobe-style verdicts,
// replay of a captured op on the CPU reference (FP64), first-divergence localization and fused-op
// decomposition.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/graph.h"
#include "probes/probe_config.h"

namespace probelab::probes {

/// Metrics of `actual` (device) against `golden` (reference), over the logical elements.
/// Relative error of one element: |a - g| / |g| (0 when a == g, +inf when g == 0 != a).
/// Non-finite elements: matching NaN/Inf positions count as equal; a mismatch sets
/// nonfinite_mismatch and makes cosine NaN-free metrics use only the finite pairs.
struct Metrics {
  std::uint64_t count = 0;
  double cosine = 1.0;          // dot(a,g)/(|a||g|); 1 when both are all-zero, 0 when one is
  double max_abs_err = 0;
  double max_rel_err = 0;
  double mean_rel_err = 0;
  double rmse = 0;
  std::uint64_t max_ulp = 0;    // ULP distance in `device_dtype` (golden rounded to it)
  double mean_ulp = 0;
  double within_0_1pct = 1;     // share of elements with rel err <= 0.001 (msprobe "One Thousandth")
  double within_0_5pct = 1;     // <= 0.005 (msprobe "Five Thousandths")
  std::uint64_t nonfinite_mismatch = 0;
  std::uint64_t worst_element = 0;  // linear index of the max abs error
};

/// Computes the metrics; throws std::invalid_argument when element counts differ.
Metrics compute_metrics(const graph::Tensor& actual, const graph::Tensor& golden, graph::DType device_dtype);
/// Same on plain values (device values already widened to double).
Metrics compute_metrics(std::span<const double> actual, std::span<const double> golden, graph::DType device_dtype);

/// ULP distance of two values of `dtype` (F16, BF16, F32, F64), on the ordered bit lattice
/// (+0 and -0 are 0 apart; NaN against anything but NaN: UINT64_MAX).
std::uint64_t ulp_distance(double a, double b, graph::DType dtype);

struct Verdict {
  bool pass = true;
  std::vector<std::string> reasons;  // each violated criterion, e.g. "cosine 0.93 < 0.99 and ..."
};
/// `noise_floor` (rounding_noise_floor()): the absolute error that rounding in the device dtype
/// alone makes at the magnitude of the op's operands. An output whose max_abs_err is within it
/// agrees with the reference as closely as the dtype can, whatever its values: where they cancel
/// to that level (x @ (I - 1/n), a centred sum), cosine and relative errors measure the rounding
/// noise, so those checks do not fail it (the absolute and non-finite checks still apply).
Verdict judge(const Metrics& m, graph::DType device_dtype, const CompareCriteria& c, double noise_floor = 0);
/// 16 units in the last place of `device_dtype` (F16, BF16, F32, F64; 0 for other dtypes) at the
/// largest finite magnitude among the op's float inputs and its reference output.
double rounding_noise_floor(std::span<const graph::Tensor* const> inputs, const graph::Tensor& golden,
                            graph::DType device_dtype);

/// Per inner op of a fused op.
struct InnerComparison {
  std::string op;            // inner op name
  std::string type;
  std::string tensor;        // inner output compared
  std::string basis;         // "partial_dump" | "emulated_fp16" (device precision emulation)
  Metrics metrics;
  bool pass = true;
  std::vector<std::string> reasons;
};

struct OpComparison {
  std::string op;
  std::uint32_t op_id = 0;
  std::string op_type;
  std::uint32_t step = 0, rank = 0;
  std::uint32_t output_index = 0;
  std::string tensor;
  graph::DType device_dtype = graph::DType::F32;
  Metrics metrics;
  bool pass = true;
  std::vector<std::string> reasons;
  std::vector<InnerComparison> inner;  // fused ops only
  std::string culprit_inner_op;        // fused op: inner op that introduced the error ("" if none)
  std::string culprit_basis;
  std::string skipped;                 // non-empty: why the op could not be compared
};

/// Replays `op` on the CPU reference in FP64 on the captured device `inputs` (in op input order;
/// nullptr for omitted optional inputs) and compares every output with the captured device
/// `outputs`. For a fused op with `decompose`, also runs the fused body (see decompose_fused).
/// Returns one OpComparison per output.
std::vector<OpComparison> compare_op(const graph::Op& op, std::span<const graph::Tensor* const> inputs,
                                     std::span<const graph::Tensor* const> outputs, const CompareCriteria& c,
                                     bool decompose = true,
                                     const std::map<std::string, graph::Tensor>* partial_dumps = nullptr);

/// Decomposes fused op `op` (Op::fused_body, inner tensor names as in graph/op.h): runs the body
/// op by op in FP64 (the golden chain) and, per inner op, either compares the captured partial
/// dump of its output (when `partial_dumps` has it: the inner op is re-run in FP64 on the device's
/// own partial inputs, so the error it *adds* is measured) or emulates the device precision (its
/// inputs rounded to the device dtype, run in FP32, output rounded to the device dtype) and
/// compares with the golden chain. The culprit is the first inner op (execution order) that fails
/// the criteria; when none fails but the fused output does, the inner op with the largest growth
/// of max abs error. Fills out.inner / culprit_inner_op / culprit_basis.
void decompose_fused(const graph::Op& op, std::span<const graph::Tensor* const> inputs,
                     const graph::Tensor& device_output, const CompareCriteria& c, OpComparison& out,
                     const std::map<std::string, graph::Tensor>* partial_dumps = nullptr);

/// First failing comparison in (step, topological position) order; nullptr when all pass.
const OpComparison* first_divergence(std::span<const OpComparison> comparisons, const graph::Graph& g);

nlohmann::json to_json(const Metrics& m);
nlohmann::json to_json(const OpComparison& c);

}  // namespace probelab::probes
