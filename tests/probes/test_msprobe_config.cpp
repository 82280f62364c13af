// msprobe's config.json as the probe config: recognised, translated key by key, selecting the
// ops msprobe would, with keys that have no equivalent named (probes/msprobe_config.h).
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "probes/insertion_pass.h"
#include "probes/msprobe_config.h"
#include "tests/probes/probe_test_util.h"

using namespace probe_test;
using probes::CaptureMode;
using probes::ConfigError;
using probes::ProbeConfig;

namespace {

// msprobe's default config.json, as msprobe ships it (python/msprobe/config.json).
constexpr const char* kDefault = R"({
    "task": "statistics",
    "dump_path": "./dump_path",
    "rank": [],
    "step": [],
    "level": "L1",
    "extra_info": true,
    "async_dump": false,
    "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"},
    "tensor": {"scope": [], "list": [], "data_mode": ["all"]},
    "acc_check": {"white_list": [], "black_list": [], "error_data_path": "./"}
})";

std::vector<std::string> selected_ops(const graph::Graph& g, const probes::WatchPoint& wp) {
  std::vector<std::string> v;
  for (const auto& e : probes::select_edges(g, wp)) {
    const std::string& n = g.op(e.op_id).name;
    if (std::find(v.begin(), v.end(), n) == v.end()) v.push_back(n);
  }
  return v;
}

// The one watch point of a translation with no warnings, capturing the inputs and outputs of its ops.
const probes::WatchPoint& inputs_and_outputs(const ProbeConfig& c) {
  EXPECT_EQ(c.format, "msprobe");
  EXPECT_TRUE(c.load_warnings.empty());
  EXPECT_EQ(c.watch_points.size(), 1u);
  const auto& wp = c.watch_points.at(0);
  EXPECT_TRUE(wp.capture_inputs);
  EXPECT_TRUE(wp.capture_outputs);
  return wp;
}

bool mapped(const ProbeConfig& c, const std::string& from_prefix, const std::string& to_part) {
  for (const auto& m : c.mapping)
    if (m.from.rfind(from_prefix, 0) == 0 && m.to.find(to_part) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(Msprobe, DefaultConfigJsonSelectsEveryOpsInputsAndOutputs) {
  const ProbeConfig c = ProbeConfig::from_string(kDefault, "config.json");
  const auto& wp = inputs_and_outputs(c);
  EXPECT_EQ(wp.mode, CaptureMode::Statistics);
  EXPECT_TRUE(wp.steps.is_all());
  EXPECT_TRUE(wp.ranks.is_all());
  EXPECT_EQ(c.output.dir, "dump_path");
  EXPECT_EQ(selected_ops(mlp(), wp).size(), 5u);
  for (const char* key : {"task", "dump_path", "rank", "step", "level", "extra_info", "async_dump", "statistics.list",
                          "statistics.scope", "statistics.data_mode", "statistics.summary_mode", "tensor", "acc_check"}) {
    bool seen = false;
    for (const auto& m : c.mapping) seen = seen || m.from.rfind(key, 0) == 0;
    EXPECT_TRUE(seen) << "no mapping entry for " << key;
  }
}

TEST(Msprobe, KeysTheIssueSawRejectedAreTranslated) {
  // dump_path, level, list, task overflow_check, a [start, end] scope, data_mode forward, rank []
  const ProbeConfig t = ProbeConfig::from_string(R"({
      "task": "tensor", "dump_path": "/abs/where", "level": "mix", "rank": [], "step": [0, "2-3"],
      "tensor": {"scope": ["add1", "fc2"], "list": [], "data_mode": ["forward"]}})");
  ASSERT_EQ(t.watch_points.size(), 1u);
  const auto& wp = t.watch_points[0];
  EXPECT_EQ(wp.mode, CaptureMode::Full);
  EXPECT_EQ(wp.direction, probes::DirectionFilter::Forward);
  EXPECT_TRUE(wp.steps.contains(0) && !wp.steps.contains(1) && wp.steps.contains(3));
  EXPECT_EQ(t.output.dir, "where") << "an absolute dump_path stays inside the output directory";
  EXPECT_EQ(selected_ops(mlp(), wp), (std::vector<std::string>{"add1", "relu1", "fc2"}));
  EXPECT_TRUE(mapped(t, "tensor.scope", "range"));

  const ProbeConfig o = ProbeConfig::from_string(
      R"({"task": "overflow_check", "dump_path": "d", "overflow_check": {"overflow_nums": 2, "check_mode": "all"}})");
  EXPECT_EQ(o.exceptions.enable_mask, (1u << spec::kExcOverflow) | (1u << spec::kExcInvalid) | (1u << spec::kExcNanInput));
  ASSERT_EQ(o.rules.size(), 1u);
  EXPECT_EQ(o.rules[0].expr.text(), "anomaly_count >= 2");
  ASSERT_EQ(o.watch_points.size(), 1u);
  ASSERT_EQ(o.watch_points[0].conditions.size(), 1u);
  EXPECT_TRUE(o.watch_points[0].has_action(probes::Action::FullDump));
}

TEST(Msprobe, ListNamesModulesApisAndTypes) {
  const ProbeConfig c = ProbeConfig::from_string(R"({"task": "statistics", "dump_path": "d",
      "statistics": {"list": ["Module.layer2.Linear.forward.0", "softmax"], "tensor_list": ["relu"]}})");
  ASSERT_EQ(c.watch_points.size(), 2u);
  graph::Graph g = mlp();
  // no op is named "layer2": the module glob matches nothing by name, so only the softmax type
  EXPECT_EQ(selected_ops(g, c.watch_points[0]), (std::vector<std::string>{"softmax"}));
  EXPECT_EQ(c.watch_points[1].mode, CaptureMode::Full);
  EXPECT_EQ(selected_ops(g, c.watch_points[1]), (std::vector<std::string>{"relu1"}));
  // an API name picks the n-th op of its type, in execution order
  const ProbeConfig r = ProbeConfig::from_string(R"({"task": "statistics", "dump_path": "d",
      "statistics": {"scope": ["Tensor.matmul.1.forward", "Functional.softmax.0.forward"]}})");
  EXPECT_EQ(selected_ops(g, r.watch_points[0]), (std::vector<std::string>{"fc2", "softmax"}));
}

TEST(Msprobe, ScopeOfTwoModulesSpansTheirForwardOps) {
  // x -> layer1/{fc, relu} -> layer2/{fc, relu} -> head/softmax, then a backward op under layer2
  graph::Graph g("modules");
  g.add_tensor({"x", {graph::DType::F16, {2, 8}, graph::Format::ND}, graph::TensorKind::Input});
  g.mark_input("x");
  g.add_initializer("w1", f16({8, 8}, ramp(64, 0.05f)));
  g.add_initializer("w2", f16({8, 8}, ramp(64, 0.05f)));
  g.add_op(make_op("layer1/fc", "MatMul", {"x", "w1"}, {"l1fc"}));
  g.add_op(make_op("layer1/relu", "Relu", {"l1fc"}, {"l1"}));
  g.add_op(make_op("layer2/fc", "MatMul", {"l1", "w2"}, {"l2fc"}));
  g.add_op(make_op("layer2/relu", "Relu", {"l2fc"}, {"l2"}));
  g.add_op(make_op("head/softmax", "Softmax", {"l2"}, {"probs"}));
  graph::Op back = make_op("layer2/relu/grad", "Relu", {"probs"}, {"g2"});
  back.direction = graph::Direction::Backward;
  g.add_op(back);
  g.mark_output("probs");
  g.mark_output("g2");
  const ProbeConfig c = ProbeConfig::from_string(R"({"task": "statistics", "dump_path": "d",
      "statistics": {"scope": ["Module.layer1.Linear.forward.0", "Module.layer2.Linear.forward.0"]}})");
  ASSERT_EQ(c.watch_points.size(), 1u);
  // from the first forward op under layer1 to the last forward op under layer2
  EXPECT_EQ(selected_ops(g, c.watch_points[0]),
            (std::vector<std::string>{"layer1/fc", "layer1/relu", "layer2/fc", "layer2/relu"}));
}

TEST(Msprobe, RangeEndOfGlobsIsCheckedLikeAnyGlob) {
  const ProbeConfig c = ProbeConfig::from_string(
      "watch_points: [{range: [{match: [fc1, 'fc1/*'], direction: forward}, {match: fc2}]}]");
  EXPECT_EQ(selected_ops(mlp(), c.watch_points[0]), (std::vector<std::string>{"fc1", "add1", "relu1", "fc2"}));
  EXPECT_THROW((void)ProbeConfig::from_string("watch_points: [{range: [{match: [], type: Relu}, fc2]}]"), ConfigError);
  EXPECT_THROW((void)ProbeConfig::from_string("watch_points: [{range: [{match: []}, fc2]}]"), ConfigError);
}

TEST(Msprobe, KeysWithoutEquivalentAreWarningsNamingWhatToUse) {
  const ProbeConfig c = ProbeConfig::from_string(R"({"task": "tensor", "dump_path": "d", "risk_level": "CORE",
      "tensor": {"bench_path": "./bench", "summary_mode": "md5", "diff_nums": 5, "file_format": "bin"}})");
  ASSERT_EQ(c.load_warnings.size(), 4u);
  std::string all;
  for (const auto& w : c.load_warnings) all += w + "\n";
  EXPECT_NE(all.find("probelab compare RUN_A RUN_B"), std::string::npos) << all;
  EXPECT_NE(all.find("use npy"), std::string::npos) << all;
  EXPECT_NE(all.find("risk_level"), std::string::npos) << all;
}

TEST(Msprobe, TasksWithoutEquivalentAndBadValuesAreErrorsWithTheLine) {
  auto message = [](const std::string& text) {
    try {
      (void)ProbeConfig::from_string(text, "cfg.json");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("{\"task\": \"structure\", \"dump_path\": \"d\"}").find("probelab show MODEL"), std::string::npos);
  EXPECT_NE(message("{\"task\": \"acc_check\", \"dump_path\": \"d\"}").find("compare"), std::string::npos);
  const std::string bad_key = message("{\n\"dump_path\": \"d\",\n\"dump_pth\": 1}");
  EXPECT_NE(bad_key.find("cfg.json:3: dump_pth: unknown msprobe config.json key"), std::string::npos) << bad_key;
  const std::string bad_scope = message("{\"dump_path\": \"d\", \"statistics\": {\"scope\": [\"a\"]}}");
  EXPECT_NE(bad_scope.find("exactly two names"), std::string::npos) << bad_scope;
  const std::string bad_mode = message("{\"dump_path\": \"d\", \"statistics\": {\"data_mode\": [\"all\", \"input\"]}}");
  EXPECT_NE(bad_mode.find("cannot be combined"), std::string::npos) << bad_mode;
  EXPECT_NE(message("{\"level\": \"L3\"}").find("unknown level 'L3'"), std::string::npos);
}

TEST(Msprobe, ProbelabConfigsAreNotMistakenForMsprobe) {
  EXPECT_FALSE(probes::is_msprobe_config(YAML::Load("{mode: statistics, watch_points: ['*']}")));
  EXPECT_FALSE(probes::is_msprobe_config(YAML::Load("{task: tensor, step: [0], watch_points: ['*']}")));
  EXPECT_FALSE(probes::is_msprobe_config(YAML::Load("{task: tensor, steps: [0]}")));  // steps: probelab's key
  EXPECT_FALSE(probes::is_msprobe_config(YAML::Load("{task: full, step: [0]}")));     // full: probelab's mode
  EXPECT_FALSE(probes::is_msprobe_config(YAML::Load("{seed: 3}")));
  EXPECT_FALSE(probes::is_msprobe_config(YAML::Load("{}")));
  EXPECT_TRUE(probes::is_msprobe_config(YAML::Load("{task: tensor, dump_path: x}")));
  EXPECT_TRUE(probes::is_msprobe_config(YAML::Load("{task: overflow_check}")));
  EXPECT_TRUE(probes::is_msprobe_config(YAML::Load("{statistics: {list: []}}")));
}

TEST(Msprobe, AConfigOfKeysBothFormatsHaveIsMsprobesWithItsDefaults) {
  for (const char* text : {R"({"task": "tensor", "step": [1]})", "{task: statistics}", "{step: [1], rank: [0], seed: 3}"})
    EXPECT_TRUE(probes::is_msprobe_config(YAML::Load(text))) << text;
  // msprobe's defaults: level L1, every rank, no list or scope (every op), data_mode all
  const ProbeConfig c = ProbeConfig::from_string(R"({"task": "tensor", "step": [1]})", "config.json");
  const auto& wp = inputs_and_outputs(c);
  EXPECT_EQ(wp.mode, CaptureMode::Full);
  EXPECT_EQ(wp.steps.str(), "[1]");
  EXPECT_TRUE(wp.ranks.is_all());
  EXPECT_EQ(c.output.dir, "dump");
  EXPECT_EQ(selected_ops(mlp(), wp).size(), 5u);
  for (const char* from : {"level (absent: msprobe's default \"L1\")", "rank (absent: msprobe's default [])",
                           "tensor.list, tensor.scope (absent: msprobe's default [])", "dump_path (absent)"}) {
    bool seen = false;
    for (const auto& m : c.mapping) seen = seen || m.from == from;
    EXPECT_TRUE(seen) << "no mapping entry " << from;
  }
  EXPECT_TRUE(mapped(c, "tensor.list, tensor.scope", "match: [\"*\"]"));
  // task absent: statistics
  const ProbeConfig s = ProbeConfig::from_string("{step: [0]}", "config.json");
  ASSERT_EQ(s.watch_points.size(), 1u);
  EXPECT_EQ(s.watch_points[0].mode, CaptureMode::Statistics);
  EXPECT_TRUE(mapped(s, "task (absent: msprobe's default \"statistics\")", "mode: statistics"));
}

TEST(Msprobe, OpTypesMatchPytorchApiNames) {
  EXPECT_TRUE(probes::op_type_matches("layer_norm", "LayerNormalization"));
  EXPECT_TRUE(probes::op_type_matches("conv2d", "Conv"));
  EXPECT_TRUE(probes::op_type_matches("linear", "MatMul"));
  EXPECT_TRUE(probes::op_type_matches("Softmax", "softmax"));
  EXPECT_FALSE(probes::op_type_matches("add", "AdamUpdate"));
  EXPECT_FALSE(probes::op_type_matches("softmax", "SoftmaxGrad"));
}

TEST(Msprobe, ProbesMayNameAConfigFile) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "msprobe_file";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << kDefault;
  const ProbeConfig c = ProbeConfig::from_yaml(YAML::Node("config.json"), (dir / "scenario.yaml").string());
  EXPECT_EQ(c.format, "msprobe");
  EXPECT_EQ(c.source, (dir / "config.json").string());
  EXPECT_THROW(ProbeConfig::from_yaml(YAML::Node("missing.json"), (dir / "scenario.yaml").string()), ConfigError);
}
