// ONNX conformance on the simulated chip: the libonnx-testdata cases (tests/support/onnx_cases.h)
// imported as they are (FP32 compute) and executed by the host executor on one simulated chip -
// HBM, streams, AI cores, the Cube and Vector kernels with their detection circuits - then read
// back and compared with the expected outputs. One platform per test process runs every case of a
// kind in sequence. Float64 cases are skipped (the device stores no float64); the CPU-reference
// run of the same cases is tests/graph/test_onnx_conformance.cpp.
#include <gtest/gtest.h>

#include "sim/platform/executor.h"
#include "tests/sim/one_chip.h"
#include "tests/support/onnx_cases.h"

namespace probelab::sim {
namespace {

using testing::Outcome;

// Runs one data set on the chip and compares its outputs; "" when they match.
std::string run_on_chip(probes::Device& dev, const testing::CaseData& c, const graph::OnnxModelIo& io) {
  ExecutorConfig ec;
  ec.steps = 1;
  ec.feeds = [&c](std::uint32_t) { return c.feeds; };
  ec.fetch_at_end = io.outputs;
  Executor ex(c.graph, dev, nullptr, ec);
  const ExecutorResult r = ex.run();
  for (std::size_t i = 0; i < io.outputs.size(); ++i) {
    auto it = r.final_values.find(io.outputs[i]);
    if (it == r.final_values.end()) return fmt::format("output '{}' was not fetched", io.outputs[i]);
    std::string diff = testing::compare(io.outputs[i], it->second, c.expected[i]);
    if (!diff.empty()) return diff;
  }
  return {};
}

Outcome run_case(probes::Device& dev, const testing::fs::path& dir, const graph::OnnxModelIo& io) {
  try {
    const auto sets = testing::data_sets(dir);
    if (sets.empty()) return {Outcome::Failed, "no test_data_set_* directory"};
    for (const auto& s : sets) {
      const testing::CaseData c = testing::load_data_set(dir / "model.onnx", io, s);
      if (c.f64) return {Outcome::Skipped, "float64 (not a device dtype)"};
      const std::string diff = run_on_chip(dev, c, io);
      if (!diff.empty()) return {Outcome::Failed, fmt::format("{}: {}", s.filename().string(), diff)};
    }
    return {Outcome::Passed, {}};
  } catch (const graph::OnnxUnsupportedError& e) {
    if (auto skip = testing::skip_of(e)) return *skip;
    return {Outcome::Failed, e.what()};
  } catch (const std::exception& e) {
    return {Outcome::Failed, e.what()};
  }
}

testing::Tally run_cases_on_chip(const std::vector<testing::fs::path>& cases, const std::string& title) {
  testing::Tally t;
  run_on_one_chip([&](probes::Device& dev) {
    t = testing::run_onnx_cases(cases, title, [&](const testing::fs::path& dir, const graph::OnnxModelIo& io) {
      return run_case(dev, dir, io);
    });
  });
  t.print();
  EXPECT_TRUE(t.failures.empty()) << t.failures.size() << " supported cases failed on the chip";
  return t;
}

testing::Tally run_kind_on_chip(const std::string& kind) {
  EXPECT_FALSE(testing::onnx_cases(kind).empty()) << kind << " cases are missing: apt-get install libonnx-testdata";
  return run_cases_on_chip(testing::onnx_cases(kind), fmt::format("ONNX {} conformance on the simulated chip", kind));
}

TEST(OnnxChipConformance, EverySupportedNodeCasePassesOnTheChip) {
  const testing::Tally t = run_kind_on_chip("node");
  // A case of a supported op is skipped only for a value type the chip does not hold.
  for (const auto& [reason, n] : t.skipped)
    EXPECT_TRUE(reason.starts_with("unsupported value types") || reason.starts_with("float64")) << n << " " << reason;
  EXPECT_GE(t.ran * 2, t.cases) << "fewer than half of the node cases ran on the chip";
}

TEST(OnnxChipConformance, PytorchConvertedCasesPassOnTheChip) {
  const testing::Tally t = run_kind_on_chip("pytorch-converted");
  EXPECT_GE(t.passed * 10, t.cases * 9);
}

TEST(OnnxChipConformance, PytorchOperatorCasesPassOnTheChip) {
  const testing::Tally t = run_kind_on_chip("pytorch-operator");
  EXPECT_GE(t.passed * 10, t.cases * 8);
}

TEST(OnnxChipConformance, EverySupportedSimpleCasePassesOnTheChip) { run_kind_on_chip("simple"); }

// The recurrent cases with onnxruntime's outputs (tests/graph/test_onnx_conformance.cpp) on the
// chip: Cube GEMMs per step, Vector gate arithmetic.
TEST(OnnxChipConformance, RecurrentCasesMatchOnnxruntimeOnTheChip) {
  const auto cases = testing::onnx_cases_in(testing::fs::path(PROBELAB_SOURCE_DIR) / "tests/graph/data/recurrent_cases");
  ASSERT_EQ(cases.size(), 8u);
  const testing::Tally t = run_cases_on_chip(cases, "recurrent cases (onnxruntime) on the simulated chip");
  EXPECT_EQ(t.passed, cases.size());
}

}  // namespace
}  // namespace probelab::sim
