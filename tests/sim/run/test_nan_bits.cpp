// The NaNs a run delivers do not depend on how the host's compiler ordered an instruction's
// operands: every NaN an op computes is the default NaN (an Inf - Inf in a softmax gives x86's
// negative "indefinite" NaN on the host; the chip delivers +NaN), so the dumps, the report's
// capture fingerprint and a rerun built another way agree bit for bit; the report's texts say
// "nan" whatever the sign of the host's NaN.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "graph/npy.h"
#include "tests/sim/cli/cli_test_util.h"
#include "tests/sim/sim_test_util.h"

namespace probelab::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::TempDir;

// +Inf in one score of the attention at step 1: that row's softmax computes Inf - Inf.
constexpr const char* kScenario = R"(name: inf_softmax
model: transformer_block
chip: tiny
mode: training
training: {optimizer: {type: sgd, lr: 0.01}}
steps: 3
seed: 12
probes:
  watch_points: ["*"]
  mode: full
  compare: {enabled: true}
injections:
  - {kind: inf, op: attn/scale, step: 1, element: 13}
)";

TEST(NanBits, EveryDumpedNanOfARunIsTheDefaultNan) {
  const TempDir dir;
  dir.write("inf_softmax.yaml", kScenario);
  const test::CmdResult r = test::run("run inf_softmax.yaml --out out --no-trace --no-baseline", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const fs::path root = dir.path() / "out" / "inf_softmax";
  const json report = json::parse(test::slurp(root / "report.json"));
  int files = 0, with_nans = 0;
  std::int64_t nans = 0;
  for (const auto& e : fs::recursive_directory_iterator(root / "dump")) {
    if (e.path().extension() != ".npy") continue;
    ++files;
    const graph::Tensor t = graph::read_npy(e.path().string());
    std::int64_t here = 0;
    if (t.dtype() == graph::DType::F16) {
      for (std::uint16_t b : t.data<std::uint16_t>())
        if ((b & 0x7C00u) == 0x7C00u && (b & 0x03FFu) != 0) {
          ASSERT_EQ(b, 0x7E00u) << e.path();
          ++here;
        }
    } else if (t.dtype() == graph::DType::F32) {
      for (float f : t.data<float>()) {
        const auto b = std::bit_cast<std::uint32_t>(f);
        if ((b & 0x7F800000u) == 0x7F800000u && (b & 0x007FFFFFu) != 0) {
          ASSERT_EQ(b, 0x7FC00000u) << e.path();
          ++here;
        }
      }
    }
    nans += here;
    with_nans += here > 0;
  }
  EXPECT_GT(files, 40);
  // The softmax row, the context, the output projection, both norms and the loss: NaN from step
  // 1 on (the update spreads it into the weights).
  EXPECT_GT(with_nans, 10) << report.dump(2);
  EXPECT_GT(nans, 1000);
  EXPECT_EQ(report.at("fingerprints").size(), 1u);

  // The report's words do not carry the host's NaN sign either: the CPU replay of the softmax
  // gives a NaN (x86: a negative one), written "nan"; the injected element is latched with the
  // value delivered, +Inf (its computed value was finite).
  int nan_replays = 0;
  for (const json& rp : report.at("replays")) {
    const std::string d = rp.at("detail");
    EXPECT_EQ(d.find("-nan"), std::string::npos) << d;
    nan_replays += d.find("FP32 nan") != std::string::npos;
  }
  EXPECT_GE(nan_replays, 1) << report.at("replays").dump(2);
  bool latched = false;
  for (const json& a : report.at("anomalies"))
    if (a.at("op") == "attn/scale" && a.at("kind") == "overflow" && a.at("step") == 1) {
      EXPECT_EQ(a.at("element"), 13);
      EXPECT_EQ(a.at("value"), "inf");
      latched = true;
    }
  EXPECT_TRUE(latched);
}

}  // namespace
}  // namespace probelab::sim
