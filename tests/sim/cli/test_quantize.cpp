// `probelab quantize`: the bundled INT8 CNN keeps exactly conv3 (the layer with outlier weights);
// per-channel weights need no kept layer; a quantized tiny MLP in another format and target;
// bad input exits with 2.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/cli/cli_test_util.h"

namespace probelab::sim {
namespace {

using test::TempDir;
namespace fs = std::filesystem;

const std::string kCnn = (test::source_root() / "scenarios" / "quantization" / "int8_cnn.yaml").string();

TEST(Quantize, Int8CnnKeepsExactlyTheOutlierLayer) {
  TempDir dir;
  const test::CmdResult r = test::run("quantize '" + kCnn + "' --out out --jobs 2", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const nlohmann::json j = test::read_json(dir.path() / "out" / "int8_cnn" / "quantize.json");
  EXPECT_EQ(j["keep"], nlohmann::json::array({"conv3"}));
  EXPECT_EQ(j["sensitivity_order"][0], "conv3");
  EXPECT_EQ(j["candidates"].size(), 5u);
  EXPECT_EQ(j["evaluations"], 5 + 2 + 1);  // reference, all, five alone, one greedy step
  EXPECT_FALSE(j["search"][0]["meets"].get<bool>());
  EXPECT_TRUE(j["search"][1]["meets"].get<bool>());
  // Per-layer error of the all-quantized run: SQNR drops at conv3 and stays low after it.
  double sqnr_conv2 = 0, sqnr_conv3 = 0;
  for (const auto& l : j["layers"]) {
    ASSERT_TRUE(l.contains("error")) << l.dump();
    if (l["op"] == "conv2") sqnr_conv2 = l["error"]["sqnr_db"];
    if (l["op"] == "conv3") sqnr_conv3 = l["error"]["sqnr_db"];
    EXPECT_LT(l["alone"]["cosine"].get<double>(), 1.0) << l.dump();
  }
  EXPECT_GT(sqnr_conv2 - sqnr_conv3, 6.0);
  EXPECT_NE(r.out.find("keep in the compute dtype: [conv3]"), std::string::npos) << r.out;

  // Per-channel weight scales absorb the outliers: nothing needs keeping, so expect_keep fails.
  const test::CmdResult pc = test::run("quantize '" + kCnn + "' --out out2 --set quantization.weights.per_channel=true", dir);
  EXPECT_EQ(pc.code, 1) << pc.out << pc.err;
  EXPECT_EQ(test::read_json(dir.path() / "out2" / "int8_cnn" / "quantize.json")["keep"], nlohmann::json::array());
}

TEST(Quantize, Fp8MlpWithAnSqnrTarget) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("q.yaml", R"(name: fp8
model: tinynet.yaml
chip: tiny
seed: 4
quantization:
  ops: ["fc*"]
  weights: e5m2
  activations: e5m2
)");
  test::CmdResult r = test::run("quantize q.yaml --out out --target 'sqnr>=200'", dir);
  EXPECT_EQ(r.code, 0) << r.out << r.err;  // met by keeping both layers (then equal: sqnr inf)
  nlohmann::json j = test::read_json(dir.path() / "out" / "fp8" / "quantize.json");
  EXPECT_EQ(j["keep"].size(), 2u);
  EXPECT_EQ(j["evaluations"], 2 + 2 + 2);
  r = test::run("quantize q.yaml --out out --target 'sqnr>=10'", dir);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  j = test::read_json(dir.path() / "out" / "fp8" / "quantize.json");
  EXPECT_TRUE(j["keep"].empty());
  EXPECT_EQ(j["evaluations"], 4);
}

TEST(Quantize, BadInputExitsWithTwo) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  const std::string base = "name: q\nmodel: tinynet.yaml\nchip: tiny\n";
  dir.write("none.yaml", base);
  dir.write("glob.yaml", base + "quantization: {ops: [\"conv*\"], weights: int8}\n");
  dir.write("fmt.yaml", base + "quantization: {ops: [\"fc*\"], weights: int3}\n");
  dir.write("asym.yaml", base + "quantization: {ops: [\"fc*\"], weights: {format: e4m3, symmetric: false}}\n");
  dir.write("ok.yaml", base + "quantization: {ops: [\"fc*\"], weights: int8}\n");
  for (const char* f : {"none.yaml", "glob.yaml", "fmt.yaml", "asym.yaml"}) {
    const test::CmdResult r = test::run(std::string("quantize ") + f + " --target 'cosine>=0.9'", dir);
    EXPECT_EQ(r.code, 2) << f << ": " << r.out << r.err;
    EXPECT_NE(r.err.find(f), std::string::npos) << r.err;
  }
  EXPECT_EQ(test::run("quantize ok.yaml", dir).code, 2);                            // no target anywhere
  EXPECT_EQ(test::run("quantize ok.yaml --target 'cosine<=0.9'", dir).code, 2);     // wrong direction
  EXPECT_EQ(test::run("quantize ok.yaml --target 'snr>=3'", dir).code, 2);
  const test::CmdResult cos = test::run("quantize ok.yaml --target 'cosine>=2'", dir);  // never met
  EXPECT_EQ(cos.code, 2);
  EXPECT_NE(cos.err.find("a cosine bound from -1 to 1"), std::string::npos) << cos.err;
  EXPECT_EQ(test::run("run glob.yaml", dir).code, 2);  // `run` validates the section too
  // loss_delta needs a loss (training); delayed-scaling keys need scaling: delayed.
  const test::CmdResult ld = test::run("quantize ok.yaml --target 'loss_delta<=0.1'", dir);
  EXPECT_EQ(ld.code, 2) << ld.out << ld.err;
  EXPECT_NE(ld.err.find("training"), std::string::npos) << ld.err;
  EXPECT_EQ(test::run("quantize ok.yaml --target 'loss_delta>=0.1'", dir).code, 2);
  dir.write("hist.yaml", base + "quantization: {ops: [\"fc*\"], activations: {format: e4m3, amax_history: 4}}\n");
  dir.write("dpc.yaml", base + "quantization: {ops: [\"fc*\"], weights: {format: e4m3, scaling: delayed, per_channel: true}}\n");
  dir.write("alg.yaml", base + "quantization: {ops: [\"fc*\"], activations: {format: e4m3, scaling: delayed, algorithm: mean}}\n");
  for (const char* f : {"hist.yaml", "dpc.yaml", "alg.yaml"}) {
    const test::CmdResult r = test::run(std::string("run ") + f, dir);
    EXPECT_EQ(r.code, 2) << f << ": " << r.out << r.err;
    EXPECT_NE(r.err.find(f), std::string::npos) << r.err;
  }
}

TEST(Quantize, LossDeltaTargetOnATrainingScenario) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("t.yaml", R"(name: train8
model: tinynet.yaml
chip: tiny
mode: training
training: {loss: mse, optimizer: {type: sgd, lr: 0.1}}
steps: 4
seed: 9
quantization:
  ops: ["fc*"]
  weights: int4
  activations: int8
)");
  // A loose bound holds with everything quantized; a bound of 0 needs every layer kept.
  test::CmdResult r = test::run("quantize t.yaml --out out --target 'loss_delta<=10'", dir);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  nlohmann::json j = test::read_json(dir.path() / "out" / "train8" / "quantize.json");
  EXPECT_TRUE(j["keep"].empty());
  const double all = j["search"][0]["output"]["loss_delta"].get<double>();
  EXPECT_GT(all, 0.0);
  for (const auto& l : j["layers"]) EXPECT_TRUE(l["alone"].contains("loss_delta")) << l.dump();
  r = test::run("quantize t.yaml --out out --target 'loss_delta<=0'", dir);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  j = test::read_json(dir.path() / "out" / "train8" / "quantize.json");
  EXPECT_EQ(j["keep"].size(), 2u);
  EXPECT_EQ(j["output"]["loss_delta"], 0.0);
  // Keeping the more sensitive layer alone lands between the two.
  ASSERT_GE(j["search"].size(), 2u);
  const double one = j["search"][1]["output"]["loss_delta"].get<double>();
  EXPECT_LT(one, all);
  EXPECT_NE(r.out.find("loss delta"), std::string::npos) << r.out;
}

TEST(Quantize, ReportHoldsPerLayerSaturationAmaxAndChannelScales) {
  TempDir dir;
  const test::CmdResult r = test::run("run '" + kCnn + "' --out out", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const nlohmann::json q = test::read_json(dir.path() / "out" / "int8_cnn" / "report.json")["quantization"];
  ASSERT_TRUE(q.is_object());
  ASSERT_EQ(q["layers"].size(), 5u);
  double conv3_spread = 0, conv2_spread = 0;
  for (const auto& l : q["layers"]) {
    const auto& a = l["activations"];
    EXPECT_EQ(a["format"], "int8");
    EXPECT_EQ(a["scaling"], "current");
    EXPECT_EQ(a["saturated"], 0);  // scales from the current amax never saturate
    EXPECT_GT(a["amax"]["max"].get<double>(), 0.0);
    EXPECT_EQ(l["weights"]["format"], "int8");
    if (l["op"] == "conv2") conv2_spread = a["channels"]["spread"];
    if (l["op"] == "conv3") {
      conv3_spread = a["channels"]["spread"];
      EXPECT_EQ(a["channels"]["axis_size"], 16);
      // each channel's symmetric INT8 scale: its amax / 127
      EXPECT_FLOAT_EQ(a["channels"]["scale"][3].get<float>(), a["channels"]["amax"][3].get<float>() / 127.0f);
    }
  }
  // Per-channel amax of each layer's input: conv3's input channels spread wider than conv2's
  // (measured 4.3x vs 2.1x), yet far less than its weights' outliers (what the search finds).
  EXPECT_GT(conv2_spread, 1.0);
  EXPECT_GT(conv3_spread, 1.5 * conv2_spread);
  EXPECT_NE(test::slurp(dir.path() / "out" / "int8_cnn" / "summary.txt").find("quantization: 5 layers"), std::string::npos);
}

}  // namespace
}  // namespace probelab::sim
