// External conformance: ONNX's own node test cases (Debian package libonnx-testdata) run through
// the ONNX importer and the FP32 reference kernels (FP64 where the case is float64), compared
// with the expected outputs using ONNX's backend-test tolerances (rtol 1e-3, atol 1e-7, NaN ==
// NaN, dtypes and shapes equal). A case runs when every op type of its model is in the op
// registry; the others are counted as skipped. Every case that runs must pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "graph/onnx/onnx_import.h"
#include "graph/op_registry.h"

namespace probelab::graph {
namespace {

namespace fs = std::filesystem;

const char* const kDataDir = "/usr/share/libonnx-testdata/data";

// Cases whose op types are all registered but which are not run, with the reason. Keep short.
const std::map<std::string, std::string> kExcluded = {};

struct Outcome {
  enum Kind { Passed, Failed, SkippedTypes } kind;
  std::string detail;
};

bool close(double actual, double expected) {
  if (std::isnan(expected) || std::isnan(actual)) return std::isnan(expected) && std::isnan(actual);
  if (std::isinf(expected) || std::isinf(actual)) return actual == expected;
  return std::fabs(actual - expected) <= 1e-7 + 1e-3 * std::fabs(expected);
}

std::string compare(const std::string& name, const Tensor& actual, const Tensor& expected) {
  if (is_float(expected.dtype()) != is_float(actual.dtype()) ||
      (!is_float(expected.dtype()) && expected.dtype() != actual.dtype()))
    return fmt::format("output '{}' is {}, expected {}", name, dtype_name(actual.dtype()), dtype_name(expected.dtype()));
  if (actual.shape() != expected.shape())
    return fmt::format("output '{}' has shape {}, expected {}", name, shape_str(actual.shape()),
                       shape_str(expected.shape()));
  const std::vector<double> a = actual.to_f64(), e = expected.to_f64();
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < e.size(); ++i)
    if (!close(a[i], e[i]) && bad++ == 0) first = i;
  if (bad == 0) return {};
  return fmt::format("output '{}': {} of {} elements differ, first at {}: {} vs expected {}", name, bad, e.size(), first,
                     a[first], e[first]);
}

Outcome run_data_set(const fs::path& model, const OnnxModelIo& io, const fs::path& set) {
  // Shape-determining inputs are bound at import; the model is imported before the other inputs
  // are read, so that inputs of unsupported value types (sequences, ...) are reported as such.
  OnnxImportOptions opts;
  bool f64 = false;
  for (std::size_t i = 0; i < io.inputs.size(); ++i) {
    const fs::path p = set / fmt::format("input_{}.pb", i);
    if (io.shape_inputs.count(io.inputs[i]) && fs::exists(p)) opts.bind_inputs.emplace(io.inputs[i], read_onnx_tensor(p.string()));
  }
  const Graph g = import_onnx(model.string(), opts);
  std::map<std::string, Tensor> feeds;
  for (std::size_t i = 0; i < io.inputs.size(); ++i) {
    const fs::path p = set / fmt::format("input_{}.pb", i);
    if (io.shape_inputs.count(io.inputs[i]) || !fs::exists(p)) continue;  // bound, or an omitted optional input
    Tensor t = read_onnx_tensor(p.string());
    f64 = f64 || t.dtype() == DType::F64;
    feeds.emplace(io.inputs[i], std::move(t));
  }
  std::vector<Tensor> expected;
  for (std::size_t i = 0; i < io.outputs.size(); ++i) {
    expected.push_back(read_onnx_tensor((set / fmt::format("output_{}.pb", i)).string()));
    f64 = f64 || expected.back().dtype() == DType::F64;
  }
  const auto values = run_graph_reference(g, feeds, f64 ? RefPrecision::F64 : RefPrecision::F32);
  for (std::size_t i = 0; i < io.outputs.size(); ++i) {
    const std::string diff = compare(io.outputs[i], values.at(io.outputs[i]), expected[i]);
    if (!diff.empty()) return {Outcome::Failed, fmt::format("{}: {}", set.filename().string(), diff)};
  }
  return {Outcome::Passed, {}};
}

Outcome run_case(const fs::path& dir, const OnnxModelIo& io) {
  const fs::path model = dir / "model.onnx";
  try {
    std::vector<fs::path> sets;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && e.path().filename().string().starts_with("test_data_set_")) sets.push_back(e.path());
    std::sort(sets.begin(), sets.end());
    if (sets.empty()) return {Outcome::Failed, "no test_data_set_* directory"};
    for (const fs::path& s : sets)
      if (Outcome o = run_data_set(model, io, s); o.kind != Outcome::Passed) return o;
    return {Outcome::Passed, {}};
  } catch (const OnnxUnsupportedError& e) {
    if (e.kind() == OnnxUnsupportedError::Kind::ValueTypes)
      return {Outcome::SkippedTypes, fmt::format("{}", fmt::join(e.items(), ", "))};
    return {Outcome::Failed, e.what()};
  } catch (const std::exception& e) {
    return {Outcome::Failed, e.what()};
  }
}

// Runs every case of one kind directory (node, pytorch-converted, ...); returns the passed count.
std::size_t run_kind(const std::string& kind) {
  const fs::path root = fs::path(kDataDir) / kind;
  EXPECT_TRUE(fs::is_directory(root)) << root << " is missing: apt-get install libonnx-testdata";
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx")) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());

  std::size_t ran = 0, passed = 0, skipped_ops = 0, skipped_types = 0;
  std::map<std::string, std::size_t> missing_ops;  // op type -> cases skipped because of it
  std::map<std::string, std::size_t> skipped_type_names;
  std::vector<std::string> failures;
  std::map<std::string, std::pair<std::size_t, std::size_t>> per_op;  // op type -> (ran, passed)
  for (const fs::path& dir : cases) {
    const std::string name = dir.filename().string();
    const std::vector<std::string> bad = onnx_unsupported_ops((dir / "model.onnx").string());
    if (!bad.empty()) {
      ++skipped_ops;
      for (const std::string& op : bad) ++missing_ops[op];
      continue;
    }
    if (kExcluded.count(name)) continue;
    const OnnxModelIo io = onnx_model_io((dir / "model.onnx").string());
    const Outcome o = run_case(dir, io);
    if (o.kind == Outcome::SkippedTypes) {
      ++skipped_types;
      ++skipped_type_names[o.detail];
      continue;
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

  std::cout << fmt::format("ONNX {} conformance: {} cases, ran {}, passed {}, failed {}, skipped {} (unsupported ops)"
                           ", {} (unsupported value types), excluded {}\n",
                           kind, cases.size(), ran, passed, ran - passed, skipped_ops, skipped_types, kExcluded.size());
  for (const auto& [type, counts] : per_op) std::cout << fmt::format("  {:<28} {:>3}/{:<3} passed\n", type, counts.second, counts.first);
  for (const auto& [types, n] : skipped_type_names) std::cout << fmt::format("  skipped ({}): {} cases\n", types, n);
  std::vector<std::pair<std::size_t, std::string>> top;
  for (const auto& [op, n] : missing_ops) top.emplace_back(n, op);
  std::sort(top.rbegin(), top.rend());
  std::cout << "  most frequent unsupported op types:";
  for (std::size_t i = 0; i < std::min<std::size_t>(top.size(), 12); ++i)
    std::cout << fmt::format(" {} ({})", top[i].second, top[i].first);
  std::cout << "\n";
  for (const std::string& f : failures) std::cout << "  FAILED " << f << "\n";

  EXPECT_TRUE(failures.empty()) << failures.size() << " supported cases failed";
  return passed;
}

TEST(OnnxConformance, EverySupportedNodeCasePasses) {
  EXPECT_GE(run_kind("node"), 200u) << "far fewer cases ran than the registry supports";
}

TEST(OnnxConformance, EverySupportedPytorchConvertedCasePasses) { run_kind("pytorch-converted"); }
TEST(OnnxConformance, EverySupportedPytorchOperatorCasePasses) { run_kind("pytorch-operator"); }
TEST(OnnxConformance, EverySupportedSimpleCasePasses) { run_kind("simple"); }

}  // namespace
}  // namespace probelab::graph
