// Quantization-aware debugging of a scenario (`probelab quantize`): runs it unquantized (the
// reference) and with its `quantization:` section, measures each quantized layer's error against
// the reference and the end-to-end output deviation, ranks the layers by sensitivity and searches
// greedily for the smallest set of layers to keep in the compute dtype so that a target holds.
//
// Evaluations (each one simulation, counted in the result):
//   reference       no quantization, full capture of the candidate layers' outputs
//   all             every candidate quantized, same capture: per-layer error (SQNR, cosine, max
//                   relative error = max |q - r| / max |r|) of each layer's output, compounded
//                   through the layers before it
//   only:<layer>    one layer quantized (sensitivity: the output deviation it causes alone)
//   keep:<set>      the greedy steps: layers added to the kept set in decreasing sensitivity
//                   until the output meets the target (the all-quantized run is the first step)
// Candidates are the MatMul / Gemm / Conv ops `quantization.ops` selects, minus its `keep`. The
// output compared is every tensor the run fetches at the end (the model outputs), concatenated in
// name order; in training also the loss of every step (loss_delta). Runs land in <out>/<scenario>/runs/<evaluation>/; the result in
// <out>/<scenario>/quantize.json.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/scenario/scenario.h"

namespace probelab::sim {

/// "cosine>=0.999", "sqnr>=30" (dB), "max_rel<=0.01", "loss_delta<=0.01" (training: the largest
/// |loss - reference loss| over every step and rank).
struct QuantTarget {
  std::string metric;  // cosine | sqnr | max_rel | loss_delta
  bool at_least = true;
  double value = 0.0;
  std::string text;
};
/// Parses a target; throws ScenarioError naming `where` and the accepted forms.
QuantTarget parse_quant_target(const std::string& text, const std::string& where);

/// Error of `actual` against `reference` (same length).
struct ErrorStats {
  double cosine = 1.0;
  double sqnr_db = 0.0;   // 10 log10(sum r^2 / sum (a - r)^2); +inf when equal
  double max_rel = 0.0;   // max |a - r| / max |r|
  double max_abs = 0.0;
  std::optional<double> loss_delta;  // training runs: max |loss - reference loss| over steps and ranks
  bool meets(const QuantTarget& t) const;
  double metric(const std::string& name) const;
  nlohmann::json to_json() const;
};
ErrorStats error_stats(std::span<const float> actual, std::span<const float> reference);

struct QuantSearchOptions {
  std::filesystem::path out_root = "out";
  LoadOptions load;
  int jobs = 1;
  std::optional<QuantTarget> target;  // overrides quantization.search.target
};

struct QuantSearchResult {
  nlohmann::json report;     // what quantize.json holds
  bool target_met = false;
  bool expectation_met = true;  // quantization.search.expect_keep, when given
  std::filesystem::path out_dir;
};

/// Throws ScenarioError (bad input: no quantization section, no target, bad names) before
/// anything runs; std::runtime_error when a run fails.
QuantSearchResult quantize_search(const std::filesystem::path& scenario, const QuantSearchOptions& opts,
                                  const std::function<void(const std::string&)>& progress = {});

}  // namespace probelab::sim
