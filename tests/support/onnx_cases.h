// ONNX conformance cases of the Debian package libonnx-testdata, shared by the CPU-reference
// conformance test (tests/graph) and the chip conformance test (tests/sim/run): listing the cases
// of a kind, loading one data set (inputs that must be known at import are bound, the others
// fed), comparing outputs with ONNX's backend-test tolerances (rtol 1e-3, atol 1e-7, NaN == NaN,
// dtypes and shapes equal) and tallying ran / passed / skipped per op type.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "graph/onnx/onnx_import.h"
#include "graph/op_registry.h"

namespace probelab::testing {

namespace fs = std::filesystem;

inline const char* const kOnnxDataDir = "/usr/share/libonnx-testdata/data";

/// Case directories (holding a model.onnx) under `root`, sorted.
inline std::vector<fs::path> onnx_cases_in(const fs::path& root) {
  std::vector<fs::path> cases;
  if (!fs::is_directory(root)) return cases;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx")) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  return cases;
}

/// Case directories of a kind (node, pytorch-converted, ...), sorted.
inline std::vector<fs::path> onnx_cases(const std::string& kind) { return onnx_cases_in(fs::path(kOnnxDataDir) / kind); }

inline std::vector<fs::path> data_sets(const fs::path& dir) {
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().starts_with("test_data_set_")) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  return sets;
}

/// One data set: the imported graph, its feeds and the expected outputs.
struct CaseData {
  graph::Graph graph;
  std::map<std::string, graph::Tensor> feeds;
  std::vector<graph::Tensor> expected;
  bool f64 = false;  // a float64 input or output
};

/// Binds the inputs that must be known at import, imports the model (so that inputs of
/// unsupported value types are reported as such), then reads the other inputs and the outputs.
inline CaseData load_data_set(const fs::path& model, const graph::OnnxModelIo& io, const fs::path& set) {
  graph::OnnxImportOptions opts;
  for (std::size_t i = 0; i < io.inputs.size(); ++i) {
    const fs::path p = set / fmt::format("input_{}.pb", i);
    if (io.shape_inputs.count(io.inputs[i]) && fs::exists(p))
      opts.bind_inputs.emplace(io.inputs[i], graph::read_onnx_tensor(p.string()));
  }
  CaseData c;
  c.graph = graph::import_onnx(model.string(), opts);
  for (std::size_t i = 0; i < io.inputs.size(); ++i) {
    const fs::path p = set / fmt::format("input_{}.pb", i);
    if (io.shape_inputs.count(io.inputs[i]) || !fs::exists(p)) continue;  // bound, or an omitted optional input
    graph::Tensor t = graph::read_onnx_tensor(p.string());
    c.f64 = c.f64 || t.dtype() == graph::DType::F64;
    c.feeds.emplace(io.inputs[i], std::move(t));
  }
  for (std::size_t i = 0; i < io.outputs.size(); ++i) {
    c.expected.push_back(graph::read_onnx_tensor((set / fmt::format("output_{}.pb", i)).string()));
    c.f64 = c.f64 || c.expected.back().dtype() == graph::DType::F64;
  }
  return c;
}

inline bool close(double actual, double expected) {
  if (std::isnan(expected) || std::isnan(actual)) return std::isnan(expected) && std::isnan(actual);
  if (std::isinf(expected) || std::isinf(actual)) return actual == expected;
  return std::fabs(actual - expected) <= 1e-7 + 1e-3 * std::fabs(expected);
}

/// "" when `actual` matches `expected`, else what differs.
inline std::string compare(const std::string& name, const graph::Tensor& actual, const graph::Tensor& expected) {
  using graph::is_float;
  if (is_float(expected.dtype()) != is_float(actual.dtype()) ||
      (!is_float(expected.dtype()) && expected.dtype() != actual.dtype()))
    return fmt::format("output '{}' is {}, expected {}", name, graph::dtype_name(actual.dtype()),
                       graph::dtype_name(expected.dtype()));
  if (actual.shape() != expected.shape())
    return fmt::format("output '{}' has shape {}, expected {}", name, graph::shape_str(actual.shape()),
                       graph::shape_str(expected.shape()));
  const std::vector<double> a = actual.to_f64(), e = expected.to_f64();
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < e.size(); ++i)
    if (!close(a[i], e[i]) && bad++ == 0) first = i;
  if (bad == 0) return {};
  return fmt::format("output '{}': {} of {} elements differ, first at {}: {} vs expected {}", name, bad, e.size(), first,
                     a[first], e[first]);
}

/// Outcome of one case.
struct Outcome {
  enum Kind { Passed, Failed, Skipped } kind = Passed;
  std::string detail;  // failure message, or the skip reason ("unsupported value types: uint8")
};

/// Counts of one kind of cases on one executor, printed as a table.
struct Tally {
  std::string title;  // e.g. "ONNX node conformance on the CPU reference"
  std::size_t cases = 0, ran = 0, passed = 0, skipped_ops = 0;
  std::map<std::string, std::size_t> skipped;         // reason -> cases
  std::map<std::string, std::size_t> missing_ops;     // op type -> cases skipped because of it
  std::map<std::string, std::pair<std::size_t, std::size_t>> per_op;  // op type -> (ran, passed)
  std::vector<std::string> failures;

  void add(const std::string& name, const graph::OnnxModelIo& io, const Outcome& o) {
    if (o.kind == Outcome::Skipped) {
      ++skipped[o.detail];
      return;
    }
    ++ran;
    const bool ok = o.kind == Outcome::Passed;
    passed += ok;
    if (!ok) failures.push_back(fmt::format("{}: {}", name, o.detail));
    for (const std::string& type : io.op_types) {
      ++per_op[type].first;
      per_op[type].second += ok;
    }
  }
  std::size_t skipped_count() const {
    std::size_t n = skipped_ops;
    for (const auto& [r, k] : skipped) n += k;
    return n;
  }
  void print() const {
    std::cout << fmt::format("{}: {} cases, ran {}, passed {}, failed {}, skipped {} ({} unsupported ops", title, cases,
                             ran, passed, ran - passed, skipped_count(), skipped_ops);
    for (const auto& [reason, n] : skipped) std::cout << fmt::format("; {} {}", n, reason);
    std::cout << ")\n";
    for (const auto& [type, counts] : per_op)
      std::cout << fmt::format("  {:<28} {:>3}/{:<3} passed\n", type, counts.second, counts.first);
    std::vector<std::pair<std::size_t, std::string>> top;
    for (const auto& [op, n] : missing_ops) top.emplace_back(n, op);
    std::sort(top.rbegin(), top.rend());
    if (!top.empty()) {
      std::cout << "  most frequent unsupported op types:";
      for (std::size_t i = 0; i < std::min<std::size_t>(top.size(), 12); ++i)
        std::cout << fmt::format(" {} ({})", top[i].second, top[i].first);
      std::cout << "\n";
    }
    for (const std::string& f : failures) std::cout << "  FAILED " << f << "\n";
  }
};

/// Runs `run(case dir, io)` on every case of `kind` whose op types are all registered; the others
/// count as skipped for their unsupported ops.
template <class F>
Tally run_onnx_cases(const std::vector<fs::path>& cases, const std::string& title, F&& run) {
  Tally t;
  t.title = title;
  t.cases = cases.size();
  for (const fs::path& dir : cases) {
    const std::vector<std::string> bad = graph::onnx_unsupported_ops((dir / "model.onnx").string());
    if (!bad.empty()) {
      ++t.skipped_ops;
      for (const std::string& op : bad) ++t.missing_ops[op];
      continue;
    }
    const graph::OnnxModelIo io = graph::onnx_model_io((dir / "model.onnx").string());
    t.add(dir.filename().string(), io, run(dir, io));
  }
  return t;
}

template <class F>
Tally run_onnx_kind(const std::string& kind, const std::string& title, F&& run) {
  return run_onnx_cases(onnx_cases(kind), fmt::format("ONNX {} conformance {}", kind, title), std::forward<F>(run));
}

/// Skip outcome of an import that failed for value types or unmodelled features; nullopt for a
/// real failure.
inline std::optional<Outcome> skip_of(const graph::OnnxUnsupportedError& e) {
  if (e.kind() == graph::OnnxUnsupportedError::Kind::OpTypes) return std::nullopt;
  const char* what = e.kind() == graph::OnnxUnsupportedError::Kind::ValueTypes ? "unsupported value types"
                                                                               : "unmodelled features";
  return Outcome{Outcome::Skipped, fmt::format("{}: {}", what, fmt::join(e.items(), ", "))};
}

}  // namespace probelab::testing
