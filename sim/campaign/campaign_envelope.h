// The golden envelope of a campaign: the element-wise range of every output tensor over the
// fault-free runs (which may legitimately differ, e.g. with arrival-order collectives). A trial's
// output "differs" only when some element lies outside that range (widened by atol + rtol * |x|)
// or is NaN where no fault-free run had NaN; bit-identity to the first fault-free run is reported
// beside it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/tensor.h"

namespace probelab::sim {

/// Output tensors of one run, keyed "rank<r>/<tensor file stem>".
using RunOutputs = std::map<std::string, graph::Tensor>;

/// Reads <run_dir>/outputs/rank<r>/*.npy (as written by simulate() with save_outputs).
RunOutputs read_run_outputs(const std::filesystem::path& run_dir);

struct OutputCheck {
  bool checked = false;        // the outputs were compared
  bool identical = false;      // bit-identical to the first fault-free run
  bool within = true;          // every element inside the envelope
  std::uint64_t outside = 0;   // elements outside
  double max_deviation = 0.0;  // largest distance outside the envelope (infinite for NaN/Inf)
  /// Severity of the deviation: the largest ULP distance (in the output's dtype) and relative
  /// deviation |x - bound| / |bound| of an element outside the envelope from the nearest bound
  /// (UINT64_MAX / infinite for NaN/Inf where the fault-free runs had numbers, missing outputs).
  std::uint64_t max_ulp = 0;
  double max_rel = 0.0;
  std::string note;            // why something could not be compared
  nlohmann::json to_json() const;
  static OutputCheck from_json(const nlohmann::json& j);
};

class GoldenEnvelope {
 public:
  GoldenEnvelope(double atol = 0.0, double rtol = 0.0) : atol_(atol), rtol_(rtol) {}

  /// Widens the envelope by one fault-free run. Throws std::runtime_error when the outputs'
  /// names or shapes differ from the first run's.
  void add_run(const RunOutputs& outputs);
  std::size_t runs() const { return runs_; }
  /// Whether every fault-free run was bit-identical to the first.
  bool deterministic() const { return deterministic_; }
  std::size_t tensors() const { return outs_.size(); }

  OutputCheck check(const RunOutputs& outputs) const;

  /// Lossless serialisation (CBOR keeps NaN/Inf and raw bytes), for MPI broadcast.
  std::vector<std::uint8_t> to_cbor() const;
  static GoldenEnvelope from_cbor(const std::vector<std::uint8_t>& data);

 private:
  struct Out {
    graph::Tensor reference;               // the first run's tensor
    std::vector<double> lo, hi;            // numeric range per element
    std::vector<std::uint8_t> nan, num;    // a run had NaN / a number at the element
  };
  double atol_, rtol_;
  std::size_t runs_ = 0;
  bool deterministic_ = true;
  std::map<std::string, Out> outs_;
};

}  // namespace probelab::sim
