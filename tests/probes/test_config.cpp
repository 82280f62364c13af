#include <string>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "probes/probe_config.h"

using namespace probelab::probes;
namespace graph = probelab::graph;

namespace {
std::string data(const char* name) { return std::string(PROBELAB_SOURCE_DIR) + "/tests/probes/data/" + name; }

ConfigError error_of(const std::string& text, const std::string& src = "cfg.yaml") {
  try {
    ProbeConfig::from_string(text, src);
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no ConfigError for:\n" << text;
  return ConfigError("", 0, "", "");
}
}  // namespace

TEST(Config, ArticleJsonCase) {
  auto cfg = ProbeConfig::from_file(data("article_case.json"));
  ASSERT_EQ(cfg.watch_points.size(), 1u);
  const auto& wp = cfg.watch_points[0];
  EXPECT_EQ(wp.id, "wp0");
  EXPECT_EQ(wp.patterns, std::vector<std::string>{"conv*/gradient"});
  ASSERT_EQ(wp.conditions.size(), 1u);
  EXPECT_EQ(wp.conditions[0].expr.text(), "abs_mean < 1e-6");
  EXPECT_EQ(wp.conditions[0].actions, std::vector<Action>{Action::FullDump});
  EXPECT_EQ(wp.mode, CaptureMode::Statistics);
  EXPECT_DOUBLE_EQ(wp.sample_rate, 1.0);
  EXPECT_TRUE(wp.steps.is_all());
}

TEST(Config, FullFileEverySection) {
  auto cfg = ProbeConfig::from_file(data("full.yaml"));
  EXPECT_EQ(cfg.seed, 42u);
  ASSERT_EQ(cfg.watch_points.size(), 2u);
  const auto& g = cfg.watch_points[0];
  EXPECT_EQ(g.direction, DirectionFilter::Backward);
  EXPECT_DOUBLE_EQ(g.sample_rate, 0.5);
  EXPECT_TRUE(g.steps.contains(1));
  EXPECT_FALSE(g.steps.contains(2));
  EXPECT_TRUE(g.steps.contains(5));
  EXPECT_FALSE(g.steps.contains(7));
  EXPECT_EQ(g.steps.str(), "[1, 4-6]");
  ASSERT_EQ(g.conditions.size(), 1u);  // inherited defaults
  EXPECT_TRUE(g.has_action(Action::FullDump));

  const auto& a = cfg.watch_points[1];
  EXPECT_EQ(a.id, "attn");
  EXPECT_EQ(a.patterns.size(), 2u);
  EXPECT_EQ(a.scope, "model/layer[4-6]/.*");
  EXPECT_EQ(a.mode, CaptureMode::Full);
  EXPECT_DOUBLE_EQ(a.sample_rate, 0.1);
  EXPECT_EQ(a.direction, DirectionFilter::Forward);
  EXPECT_TRUE(a.capture_inputs);
  EXPECT_TRUE(a.capture_outputs);
  EXPECT_TRUE(a.halt_on_exception);
  ASSERT_EQ(a.conditions.size(), 2u);
  EXPECT_EQ(a.conditions[0].actions, std::vector<Action>{Action::Break});
  EXPECT_EQ(a.conditions[1].actions, (std::vector<Action>{Action::StatsDump, Action::EnableVerbose}));

  ASSERT_EQ(cfg.rules.size(), 2u);
  EXPECT_EQ(cfg.rules[0].expr.text(), "overflow_count > 3");
  EXPECT_EQ(cfg.rules[0].actions, std::vector<Action>{Action::EnableVerbose});
  EXPECT_EQ(cfg.rules[1].ops, std::vector<std::string>{"fc*"});
  EXPECT_EQ(cfg.exceptions.enable_mask, (1u << 0) | (1u << 2));
  EXPECT_EQ(cfg.capture.buffer_bytes, 65536u);
  EXPECT_FALSE(cfg.capture.ping_pong);
  EXPECT_TRUE(cfg.capture.drop_on_full);
  EXPECT_EQ(cfg.output.dir, "dumps");
  EXPECT_TRUE(cfg.output.zstd);
  EXPECT_EQ(cfg.output.zstd_level, 3);
  EXPECT_TRUE(cfg.output.delta);
  EXPECT_EQ(cfg.output.level, OutputLevel::Triggered);
  EXPECT_TRUE(cfg.consistency.enabled);
  EXPECT_EQ(cfg.consistency.reference_rank, 2u);
  EXPECT_EQ(cfg.consistency.mode, CaptureMode::Statistics);
  EXPECT_DOUBLE_EQ(cfg.consistency.tolerance, 1e-3);
  EXPECT_TRUE(cfg.consistency.steps.contains(9));
  EXPECT_FALSE(cfg.consistency.steps.contains(10));
  EXPECT_TRUE(cfg.compare.enabled);
  EXPECT_DOUBLE_EQ(cfg.compare.criteria.cosine_min, 0.995);
  EXPECT_DOUBLE_EQ(cfg.compare.criteria.max_rel_err.at(graph::DType::F16), 0.01);
  EXPECT_EQ(cfg.compare.criteria.max_ulp, 4u);
  // defaults kept where not overridden (msprobe / CANN accuracy criteria)
  EXPECT_DOUBLE_EQ(cfg.compare.criteria.max_abs_err, 0.001);
  EXPECT_DOUBLE_EQ(cfg.compare.criteria.cosine_hard_min, 0.9);
  EXPECT_DOUBLE_EQ(cfg.compare.criteria.mean_rel_err.at(graph::DType::F16), 0x1p-10);
}

TEST(Config, FromYamlNodeOfAScenario) {
  YAML::Node scenario = YAML::Load("name: x\nprobes:\n  watch_points: [\"fc*\"]\n  mode: hash\n");
  auto cfg = ProbeConfig::from_yaml(scenario["probes"], "scenario.yaml");
  ASSERT_EQ(cfg.watch_points.size(), 1u);
  EXPECT_EQ(cfg.watch_points[0].mode, CaptureMode::Hash);
  EXPECT_EQ(cfg.source, "scenario.yaml");
}

TEST(Config, AliasesFromMsprobeVocabulary) {
  auto cfg = ProbeConfig::from_string("task: tensor\nstep: [0, 2]\nrank: [1]\nwatch_points: [\"*\"]\n");
  EXPECT_EQ(cfg.watch_points[0].mode, CaptureMode::Full);
  EXPECT_TRUE(cfg.watch_points[0].steps.contains(2));
  EXPECT_FALSE(cfg.watch_points[0].ranks.contains(0));
  EXPECT_EQ(parse_capture_mode("md5"), CaptureMode::Hash);
}

TEST(Config, BadFilesNameFileLineKeyAndReason) {
  try {
    ProbeConfig::from_file(data("bad_unknown_key.yaml"));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.line(), 5);
    EXPECT_EQ(e.key(), "watch_points[0].sample_rat");
    EXPECT_NE(e.reason().find("unknown key"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("bad_unknown_key.yaml:5: watch_points[0].sample_rat: unknown key"),
              std::string::npos)
        << e.what();
  }
  try {
    ProbeConfig::from_file(data("bad_expression.yaml"));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.line(), 3);
    EXPECT_EQ(e.key(), "conditions[0]");
    EXPECT_NE(e.reason().find("column 19: unexpected end of expression"), std::string::npos) << e.what();
  }
  try {
    ProbeConfig::from_file(data("bad_scope.yaml"));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.line(), 3);
    EXPECT_EQ(e.key(), "watch_points[0].scope");
    EXPECT_NE(e.reason().find("invalid regex 'model/(layer'"), std::string::npos) << e.what();
  }
  try {
    ProbeConfig::from_file(data("bad_rate.json"));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.line(), 3);
    EXPECT_EQ(e.key(), "watch_points[0].sample_rate");
    EXPECT_NE(e.reason().find("outside [0, 1]"), std::string::npos) << e.what();
  }
}

TEST(Config, BadValuesAreRejectedWithReasons) {
  struct Case {
    const char* text;
    const char* key;
    const char* reason;
  };
  const Case cases[] = {
      {"mode: everything\n", "mode", "unknown capture mode 'everything'"},
      {"steps: [1, \"6-4\"]\n", "steps[1]", "ascending range"},
      {"steps: [-1]\n", "steps[0]", "non-negative"},
      {"steps: []\n", "steps", "empty list"},
      {"watch_points: [\"conv[1-\"]\n", "watch_points[0]", "invalid glob"},
      {"watch_points: [{name: a}]\n", "watch_points[0]", "selects nothing"},
      {"watch_points: [{match: a, actions: [stop]}]\n", "watch_points[0].actions", "without conditions"},
      {"watch_points: [{match: a, conditions: [\"max > 1\"], actions: [explode]}]\n", "watch_points[0].actions",
       "unknown action 'explode'"},
      {"watch_points: [\"a\"]\nconditions: [\"max > 1\"]\n", "conditions[0]", "no actions"},
      {"watch_points: [{match: a, mode: hash, conditions: [\"abs_mean < 1\"], actions: [full_dump]}]\n",
       "watch_points[0]", "capture mode is hash"},
      {"rules: [\"overflow_count > 3\"]\n", "rules[0]", "no '-> action'"},
      {"rules: [\"abs_mean > 3 -> stop\"]\n", "rules[0]", "rules see counters"},
      {"rules: [\"overflow_count > 3 -> break\"]\n", "rules[0]", "needs a tensor"},
      {"capture: {overrun: explode}\n", "capture.overrun", "expected stall or drop"},
      {"capture: {buffer_bytes: 12}\n", "capture.buffer_bytes", "outside"},
      {"output: {compression: lz4}\n", "output.compression", "unknown compression 'lz4'"},
      {"consistency: {tolerance: -1}\n", "consistency.tolerance", ">= 0"},
      {"compare: {criteria: {max_rel_err: {int32: 1}}}\n", "compare.criteria.max_rel_err.int32", "float dtype"},
      {"exceptions: {kinds: [overflow, fire]}\n", "exceptions.kinds", "unknown exception kind 'fire'"},
      {"direction: sideways\n", "direction", "unknown direction"},
      {"sample_rate: abc\n", "sample_rate", "expected a number"},
      {"bogus: 1\n", "bogus", "unknown key"},
  };
  for (const auto& c : cases) {
    ConfigError e = error_of(c.text);
    EXPECT_EQ(e.key(), c.key) << c.text << " -> " << e.what();
    EXPECT_NE(e.reason().find(c.reason), std::string::npos) << c.text << " -> " << e.what();
    EXPECT_EQ(e.file(), "cfg.yaml");
    EXPECT_GE(e.line(), 1) << c.text;
  }
}

TEST(Config, MalformedYamlAndMissingFile) {
  ConfigError e = error_of("watch_points: [\"a\"\nmode: full\n");
  EXPECT_NE(e.reason().find("malformed"), std::string::npos) << e.what();
  try {
    ProbeConfig::from_file("/nonexistent/probes.yaml");
    FAIL();
  } catch (const ConfigError& e2) {
    EXPECT_NE(std::string(e2.what()).find("/nonexistent/probes.yaml"), std::string::npos);
  }
  // Found by fuzz_probe_config: a scalar config (a file name) longer than the file system allows
  // made std::filesystem throw (exit 3); it is a config file not found.
  const ConfigError too_long = error_of(std::string(5000, 'x'));
  EXPECT_NE(too_long.reason().find("not found"), std::string::npos) << too_long.what();
}

TEST(Config, IntSetRangesAndAll) {
  IntSet s;
  EXPECT_TRUE(s.is_all());
  EXPECT_TRUE(s.contains(12345));
  s.add(4, 6);
  s.add(1, 1);
  EXPECT_FALSE(s.is_all());
  EXPECT_TRUE(s.contains(1));
  EXPECT_FALSE(s.contains(3));
  EXPECT_TRUE(s.contains(6));
  EXPECT_EQ(s.str(), "[1, 4-6]");
}

TEST(Config, RewindActionsWithArguments) {
  auto cfg = ProbeConfig::from_string(R"y(
actions: ["rewind(stats_dump all)"]
conditions: ["nan_count > 0"]
watch_points:
  - "fc*"
  - {name: w, match: ["x"], conditions: [{when: "max_abs > 10", actions: [full_dump, rewind]}]}
rules:
  - "invalid_count > 0 -> rewind(full_dump, implicated, continue), stop"
  - {when: "overflow_count > 2", actions: ["rewind(all)"]}
)y");
  ASSERT_EQ(cfg.watch_points.size(), 2u);
  const Condition& d = cfg.watch_points[0].conditions.at(0);  // the defaults
  EXPECT_EQ(d.actions, std::vector<Action>{Action::Rewind});
  EXPECT_FALSE(d.rewind.full);
  EXPECT_TRUE(d.rewind.all_ops);
  const Condition& c = cfg.watch_points[1].conditions.at(0);
  EXPECT_EQ(c.actions, (std::vector<Action>{Action::FullDump, Action::Rewind}));
  EXPECT_TRUE(c.rewind.full);
  EXPECT_FALSE(c.rewind.all_ops);
  EXPECT_FALSE(c.rewind.then_continue);
  ASSERT_EQ(cfg.rules.size(), 2u);
  EXPECT_EQ(cfg.rules[0].actions, (std::vector<Action>{Action::Rewind, Action::Stop}));
  EXPECT_TRUE(cfg.rules[0].rewind.then_continue);
  EXPECT_TRUE(cfg.rules[1].rewind.all_ops);
  EXPECT_EQ(cfg.rules[0].rewind.text(), "rewind(full_dump, implicated, continue)");
}

TEST(Config, BadRewindActionsNameTheKey) {
  ConfigError e = error_of("watch_points: [{match: [x], conditions: [{when: \"nan_count > 0\", actions: [\"rewind(later)\"]}]}]\n");
  EXPECT_NE(std::string(e.what()).find("unknown rewind argument 'later'"), std::string::npos) << e.what();
  EXPECT_NE(e.key().find("watch_points[0].conditions[0].actions"), std::string::npos) << e.key();
  e = error_of("rules: [\"invalid_count > 0 -> rewind(all, all)\"]\n");
  EXPECT_NE(std::string(e.what()).find("given twice"), std::string::npos) << e.what();
  e = error_of("rules: [\"invalid_count > 0 -> rewind, rewind(all)\"]\n");
  EXPECT_NE(std::string(e.what()).find("one rewind action per rule"), std::string::npos) << e.what();
  e = error_of("watch_points: [{match: [x], conditions: [{when: \"nan_count > 0\", actions: [break, rewind]}]}]\n");
  EXPECT_NE(std::string(e.what()).find("break and rewind exclude each other"), std::string::npos) << e.what();
  e = error_of("rules: [\"invalid_count > 0 -> rewind(\"]\n");
  EXPECT_NE(std::string(e.what()).find("unknown action 'rewind('"), std::string::npos) << e.what();
}
