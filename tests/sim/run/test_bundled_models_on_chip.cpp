// The bundled real-size ONNX models (scripts/gen_models.py) executed on the simulated chip in FP32
// - imported with their shape subgraphs folded, uploaded, run by the host executor through HBM,
// streams, AI cores and the Cube and Vector kernels with their detection circuits, read back -
// reproduce what an independent executor, onnxruntime (npm onnxruntime-node), computed for the
// same input (tests/graph/data/onnxruntime/*.npy; the input is x[i] = ((i * 7919) mod 2003) /
// 1001.5 - 1 in float32, as in tests/graph/test_bundled_onnx_models.cpp, which checks the CPU
// reference against the same files). One platform runs every model in sequence.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "graph/npy.h"
#include "graph/onnx/onnx_import.h"
#include "sim/platform/executor.h"
#include "tests/sim/one_chip.h"

namespace probelab::sim {
namespace {

const std::string kModels = std::string(PROBELAB_SOURCE_DIR) + "/scenarios/models/";
const std::string kOrt = std::string(PROBELAB_SOURCE_DIR) + "/tests/graph/data/onnxruntime/";

struct ModelCase {
  std::string model, input, output, expected;
  std::vector<std::pair<std::string, std::int64_t>> dims;
  graph::Shape shape;
  std::size_t compared = 0;  // leading output elements onnxruntime's file holds (0: all)
};

graph::Tensor formula_input(const graph::Shape& s) {
  std::vector<double> v(static_cast<std::size_t>(graph::numel(s)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 7919) % 2003) / 1001.5 - 1.0;
  return graph::Tensor::from_f64(s, v, graph::DType::F32);
}

// "" when every element is within 1e-5 + 1e-4 |expected|, else the worst element.
std::string compare(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() < want.size()) return fmt::format("{} elements read back, {} expected", got.size(), want.size());
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double r = std::fabs(double(got[i]) - want[i]) / (1e-5 + 1e-4 * std::fabs(want[i]));
    if (!(r <= worst)) worst = r, at = i;
  }
  if (worst <= 1.0) return {};
  return fmt::format("element {}: chip {} onnxruntime {} ({:.1f}x the tolerance)", at, got[at], want[at], worst);
}

std::string run_model(probes::Device& dev, ModelCase& c) {
  graph::OnnxImportOptions o;
  for (const auto& [name, v] : c.dims) o.dim_params[name] = v;
  const graph::Graph g = graph::import_onnx(kModels + c.model + ".onnx", o);
  ExecutorConfig ec;
  ec.steps = 1;
  const graph::Tensor x = formula_input(c.shape);
  ec.feeds = [&](std::uint32_t) { return std::map<std::string, graph::Tensor>{{c.input, x}}; };
  ec.fetch_at_end = {c.output};
  Executor ex(g, dev, nullptr, ec);
  const ExecutorResult r = ex.run();
  const auto it = r.final_values.find(c.output);
  if (it == r.final_values.end()) return fmt::format("output '{}' was not fetched", c.output);
  const std::vector<float> want = graph::read_npy(kOrt + c.expected).to_f32();
  std::vector<float> got = it->second.to_f32();
  c.compared = want.size();
  return compare(got, want);
}

TEST(BundledModelsOnChip, FloatModelsMatchOnnxruntimeInFp32) {
  std::vector<ModelCase> cases = {
      {"gpt2_block", "x", "hidden_states", "gpt2_block_hidden_b2_s8.npy", {{"batch", 2}, {"seq", 8}}, {2, 8, 768}},
      {"llama_block", "x", "hidden_states", "llama_block_hidden_b2_s16.npy", {{"batch", 2}, {"seq", 16}}, {2, 16, 256}},
      {"mobilenetv2_stack", "input", "logits", "mobilenetv2_stack_logits.npy", {{"batch", 1}}, {1, 16, 112, 112}},
      // onnxruntime's file holds channels 0-3 of image 0: the leading 4 x 56 x 56 elements.
      {"resnet50_stage", "input", "features", "resnet50_stage_features_c0-3.npy", {{"batch", 1}}, {1, 64, 56, 56}},
      {"rnn_encoder", "features", "logits", "rnn_encoder_logits_b2_s5.npy", {{"batch", 2}, {"seq", 5}}, {2, 5, 80}},
  };
  std::vector<std::string> results(cases.size());
  run_on_one_chip([&](probes::Device& dev) {
    for (std::size_t i = 0; i < cases.size(); ++i) {
      try {
        results[i] = run_model(dev, cases[i]);
      } catch (const std::exception& e) {
        results[i] = e.what();
      }
    }
  });
  for (std::size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(results[i], "") << cases[i].model;
    EXPECT_GT(cases[i].compared, 0u) << cases[i].model;
  }
}

}  // namespace
}  // namespace probelab::sim
