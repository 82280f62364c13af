// External conformance: ONNX's own test cases (Debian package libonnx-testdata) run through the
// ONNX importer and the FP32 reference kernels (FP64 where the case is float64), compared with
// the expected outputs (tests/support/onnx_cases.h). A case runs when every op type of its model
// is in the op registry; the others are counted as skipped. Every case that runs must pass. The
// same cases run on the simulated chip in tests/sim/run/test_onnx_chip_conformance.cpp.
#include <gtest/gtest.h>

#include "tests/support/onnx_cases.h"

namespace probelab::graph {
namespace {

using testing::Outcome;

Outcome run_case(const testing::fs::path& dir, const OnnxModelIo& io) {
  try {
    const auto sets = testing::data_sets(dir);
    if (sets.empty()) return {Outcome::Failed, "no test_data_set_* directory"};
    for (const auto& s : sets) {
      const testing::CaseData c = testing::load_data_set(dir / "model.onnx", io, s);
      const auto values = run_graph_reference(c.graph, c.feeds, c.f64 ? RefPrecision::F64 : RefPrecision::F32);
      for (std::size_t i = 0; i < io.outputs.size(); ++i) {
        const std::string diff = testing::compare(io.outputs[i], values.at(io.outputs[i]), c.expected[i]);
        if (!diff.empty()) return {Outcome::Failed, fmt::format("{}: {}", s.filename().string(), diff)};
      }
    }
    return {Outcome::Passed, {}};
  } catch (const OnnxUnsupportedError& e) {
    if (auto skip = testing::skip_of(e)) return *skip;
    return {Outcome::Failed, e.what()};
  } catch (const std::exception& e) {
    return {Outcome::Failed, e.what()};
  }
}

testing::Tally run_kind(const std::string& kind) {
  EXPECT_FALSE(testing::onnx_cases(kind).empty()) << kind << " cases are missing: apt-get install libonnx-testdata";
  testing::Tally t = testing::run_onnx_kind(kind, "on the CPU reference", run_case);
  t.print();
  EXPECT_TRUE(t.failures.empty()) << t.failures.size() << " supported cases failed";
  return t;
}

TEST(OnnxConformance, EverySupportedNodeCasePasses) {
  const testing::Tally t = run_kind("node");
  // A case of a supported op is skipped only for a value type the model does not hold.
  for (const auto& [reason, n] : t.skipped) EXPECT_TRUE(reason.starts_with("unsupported value types")) << n << " " << reason;
  EXPECT_GE(t.ran * 2, t.cases) << "fewer than half of the node cases ran";
}

TEST(OnnxConformance, PytorchConvertedCasesPass) {
  const testing::Tally t = run_kind("pytorch-converted");
  EXPECT_GE(t.passed * 10, t.cases * 9) << "fewer than 90% of the pytorch-converted cases passed";
}

TEST(OnnxConformance, PytorchOperatorCasesPass) {
  const testing::Tally t = run_kind("pytorch-operator");
  EXPECT_GE(t.passed * 10, t.cases * 8) << "fewer than 80% of the pytorch-operator cases passed";
}

TEST(OnnxConformance, EverySupportedSimpleCasePasses) { run_kind("simple"); }

// LSTM, GRU and RNN features ONNX's node cases leave out (both directions, sequence lengths,
// initial states, clip, peepholes, input_forget, activation lists), expected outputs from
// onnxruntime (scripts/gen_recurrent_cases.py).
TEST(OnnxConformance, RecurrentCasesMatchOnnxruntime) {
  const auto cases = testing::onnx_cases_in(testing::fs::path(PROBELAB_SOURCE_DIR) / "tests/graph/data/recurrent_cases");
  ASSERT_EQ(cases.size(), 8u);
  const testing::Tally t = testing::run_onnx_cases(cases, "recurrent cases (onnxruntime) on the CPU reference", run_case);
  t.print();
  EXPECT_EQ(t.passed, cases.size());
  EXPECT_TRUE(t.failures.empty());
}

}  // namespace
}  // namespace probelab::graph
