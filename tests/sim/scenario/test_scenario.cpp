// Scenario loader: the format, --set overrides and every kind of bad input, with the messages
// users see (file, line:column, key, what was expected).
#include <gtest/gtest.h>

#include <set>

#include "chip_model/chip_config.h"
#include "sim/scenario/data_gen.h"
#include "sim/scenario/prepared_run.h"
#include "sim/scenario/scenario.h"
#include "tests/sim/sim_test_util.h"

namespace probelab::sim {
namespace {

using test::TempDir;

LoadOptions opts(std::vector<SetOverride> sets = {}) {
  LoadOptions o;
  o.source_root = test::source_root();
  o.sets = std::move(sets);
  return o;
}

const char* kGood = R"(name: nan_softmax
description: NaN in one softmax element
chip:
  preset: tiny
  overrides: {num_cores: 2}
ranks: 2
model: mlp
mode: training
training:
  loss: model
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
  batch: 4
data: {generator: uniform, seed: 9, low: -2, high: 2}
steps: 3
seed: 42
precision: {compute: fp16, accumulation: fp16_via_fp32, overflow_mode: saturation}
probes:
  mode: statistics
  watch_points: ["fc*"]
injections:
  - {kind: nan, op: "fc1/*", element: 3, step: 2, rank: 1}
expectations:
  - detection: {kind: nan, op: "fc1*", element: 3, step: 2, rank: 1, max_latency_cycles: 10000}
  - no_detection: {kind: overflow}
  - comparison: {op: "fc2*", result: fails, inner_op: "*gelu", first: true}
  - consistency: {op: "*allreduce", step: 1, min_divergence: 1.0e-3, growing: true}
  - diagnosis: {op: "fc1*", cause: nan_source, top: 3, exclusive: true}
  - capture: {overhead_below_percent: 5, dropped: ">= 1"}
)";

ScenarioError load_error(const std::string& text, std::vector<SetOverride> sets = {}) {
  TempDir dir;
  const auto file = dir.write("s.yaml", text);
  try {
    load_scenario(file, opts(std::move(sets)));
  } catch (const ScenarioError& e) {
    return e;
  }
  ADD_FAILURE() << "no ScenarioError for:\n" << text;
  return ScenarioError("", 0, 0, "", "");
}

TEST(Scenario, ParsesEveryField) {
  TempDir dir;
  const Scenario s = load_scenario(dir.write("s.yaml", kGood), opts());
  EXPECT_EQ(s.name, "nan_softmax");
  EXPECT_EQ(s.chip.preset, "tiny");
  EXPECT_EQ(s.chip.overrides.at("num_cores"), "2");
  EXPECT_EQ(s.ranks, 2);
  EXPECT_EQ(s.model.source, ModelSpec::Source::Bundled);
  EXPECT_EQ(s.model.path.filename(), "mlp.yaml");
  EXPECT_EQ(s.mode, RunMode::Training);
  EXPECT_EQ(s.training.loss, "model");
  EXPECT_EQ(s.training.optimizer.type, "sgd");
  EXPECT_DOUBLE_EQ(s.training.optimizer.momentum, 0.9);
  EXPECT_EQ(s.training.batch, 4);
  EXPECT_EQ(s.data.generator, "uniform");
  EXPECT_EQ(s.data.seed, 9u);
  EXPECT_EQ(s.steps, 3);
  EXPECT_EQ(s.seed, 42u);
  EXPECT_EQ(s.precision.compute, graph::DType::F16);
  EXPECT_EQ(s.precision.accumulation, "fp16_via_fp32");
  EXPECT_EQ(s.precision.overflow_mode, "saturation");
  ASSERT_TRUE(s.has_probes());
  EXPECT_EQ(s.probes["mode"].as<std::string>(), "statistics");
  ASSERT_EQ(s.injections.size(), 1u);
  EXPECT_EQ(s.injections[0].kind, "nan");
  ASSERT_EQ(s.expectations.size(), 6u);
  const auto d = s.expectations[0].check->params();
  EXPECT_EQ(d["kind"], "nan");
  EXPECT_EQ(d["element"], 3);
  EXPECT_EQ(d["max_latency_cycles"], 10000u);
  EXPECT_EQ(s.expectations[0].line, 23);
  const auto c = s.expectations[2].check->params();
  EXPECT_EQ(c["result"], "fails");
  EXPECT_EQ(c["first"], true);
  EXPECT_EQ(c["inner_op"], "*gelu");
  const auto k = s.expectations[3].check->params();
  EXPECT_EQ(k["consistent"], false);
  EXPECT_DOUBLE_EQ(k["min_divergence"].get<double>(), 1e-3);
  const auto g = s.expectations[4].check->params();
  EXPECT_EQ(g["top"], 3);
  EXPECT_EQ(g["exclusive"], true);
  EXPECT_EQ(s.expectations[5].check->params()["dropped"], ">= 1");
}

TEST(Scenario, DefaultsAreMinimal) {
  TempDir dir;
  const Scenario s = load_scenario(dir.write("s.yaml", "name: x\nmodel: mlp\n"), opts());
  EXPECT_EQ(s.ranks, 1);
  EXPECT_EQ(s.steps, 1);
  EXPECT_EQ(s.mode, RunMode::Inference);
  EXPECT_FALSE(s.has_probes());
  EXPECT_TRUE(s.injections.empty());
  EXPECT_EQ(s.precision.compute, graph::DType::F16);
  EXPECT_FALSE(s.precision.master_fp32);
}

TEST(Scenario, MalformedYamlNamesLineAndColumn) {
  const ScenarioError e = load_error("name: x\nmodel: mlp\nsteps: [1, 2\n");
  EXPECT_GT(e.line(), 0);
  EXPECT_NE(std::string(e.what()).find("well-formed YAML"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("s.yaml:"), std::string::npos) << e.what();
}

TEST(Scenario, UnknownTopLevelKeyIsAnError) {
  const ScenarioError e = load_error("name: x\nmodel: mlp\nstepz: 3\n");
  EXPECT_EQ(e.line(), 3);
  EXPECT_EQ(e.column(), 1);
  EXPECT_EQ(e.key(), "stepz");
  const std::string msg = e.what();
  EXPECT_NE(msg.find("unknown key 'stepz'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'steps'"), std::string::npos) << msg;  // the allowed keys are listed
}

TEST(Scenario, UnknownNestedKeysAreErrors) {
  EXPECT_EQ(load_error("name: x\nmodel: mlp\nchip: {preset: tiny, cores: 2}\n").key(), "chip.cores");
  EXPECT_EQ(load_error("name: x\nmodel: mlp\nexpectations:\n  - detection: {kind: nan, opp: a}\n").key(),
            "expectations[0].detection.opp");
  EXPECT_EQ(load_error("name: x\nmodel: mlp\nprecision: {compute: fp16, mastr: fp32}\n").key(), "precision.mastr");
  EXPECT_EQ(load_error("name: x\nmodel: mlp\nexpectations:\n  - detect: {kind: nan}\n").key(),
            "expectations[0].detect");
}

TEST(Scenario, BadValuesNameWhatWasExpected) {
  ScenarioError e = load_error("name: x\nmodel: mlp\nsteps: many\n");
  EXPECT_EQ(e.key(), "steps");
  EXPECT_NE(std::string(e.what()).find("got 'many'"), std::string::npos) << e.what();
  e = load_error("name: x\nmodel: mlp\nmode: trainning\n");
  EXPECT_NE(std::string(e.what()).find("'inference' or 'training'"), std::string::npos) << e.what();
  e = load_error("name: x\nmodel: mlp\nprecision: {compute: fp8}\n");
  EXPECT_EQ(e.key(), "precision.compute");
  e = load_error("name: 'bad name'\nmodel: mlp\n");
  EXPECT_EQ(e.key(), "name");
  e = load_error("model: mlp\n");
  EXPECT_NE(std::string(e.what()).find("required key 'name'"), std::string::npos) << e.what();
  e = load_error("name: x\nmodel: mlp\nexpectations:\n  - capture: {dropped: 'at least one'}\n");
  EXPECT_EQ(e.key(), "expectations[0].capture.dropped");
  // Cluster parameters: the key's range or choices, once.
  e = load_error("name: x\nmodel: mlp\nranks: 16\ncluster: {oversubscription: 0.5}\n");
  EXPECT_EQ(e.key(), "cluster.oversubscription");
  EXPECT_NE(std::string(e.what()).find("expected a number in [1, 1024], got '0.5'"), std::string::npos) << e.what();
  e = load_error("name: x\nmodel: mlp\nranks: 16\ncluster: {spine: 4}\n");
  EXPECT_NE(std::string(e.what()).find("got unknown key 'spine'"), std::string::npos) << e.what();
  // All-reduce keys the algorithm would ignore.
  e = load_error("name: x\nmodel: mlp\nmode: training\nranks: 8\ntraining: {allreduce: {algorithm: ring, inter_algorithm: direct}}\n");
  EXPECT_EQ(e.key(), "training.allreduce.inter_algorithm");
  EXPECT_NE(std::string(e.what()).find("expected inter_algorithm only with algorithm: hierarchical"), std::string::npos) << e.what();
  e = load_error("name: x\nmodel: mlp\nmode: training\nranks: 8\ntraining: {allreduce: {algorithm: tree, order: group}}\n");
  EXPECT_EQ(e.key(), "training.allreduce.order");
  EXPECT_NE(std::string(e.what()).find("got algorithm: tree"), std::string::npos) << e.what();
  e = load_error("name: x\nmodel: mlp\nmode: training\nranks: 16\ntraining: {allreduce: {algorithm: hierarchical, order: group}}\n");
  EXPECT_NE(std::string(e.what()).find("got inter_algorithm: ring"), std::string::npos) << e.what();
  e = load_error("name: x\nmodel: mlp\nranks: 16\ncluster: {switch: star}\n");
  EXPECT_NE(std::string(e.what()).find("expected one of single, fat_tree, got 'star'"), std::string::npos) << e.what();
}

TEST(Scenario, BadChipOverridesNameTheParameterAndItsRange) {
  TempDir dir;
  auto error = [&](const std::string& overrides) -> std::string {
    try {
      prepare_run(load_scenario(dir.write("s.yaml", "name: x\nmodel: mlp\nchip: {overrides: " + overrides + "}\n"), opts()));
    } catch (const ScenarioError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error("{num_cores: -1}").find("key 'chip.overrides.num_cores': expected an integer in [1, 64], got '-1'"),
            std::string::npos);
  EXPECT_NE(error("{num_corez: 4}").find("expected a chip parameter (`probelab list chips`), got unknown parameter 'num_corez'"),
            std::string::npos);
  EXPECT_NE(error("{fp_mode: weird}").find("expected one of inf_nan, saturation, got 'weird'"), std::string::npos);
  EXPECT_NE(error("{hbm_bytes: 12XB}").find("(or with a KiB, MiB or GiB suffix), got '12XB'"), std::string::npos);
  EXPECT_EQ(error("{hbm_bytes: 16GiB}"), "no error");
}

TEST(Scenario, BadGlobsAreRejected) {
  ScenarioError e = load_error("name: x\nmodel: mlp\nexpectations:\n  - detection: {kind: nan, op: \"fc[1\"}\n");
  EXPECT_EQ(e.key(), "expectations[0].detection.op");
  EXPECT_EQ(e.line(), 4);
  EXPECT_NE(std::string(e.what()).find("valid glob"), std::string::npos) << e.what();
  e = load_error("name: x\nmodel: mlp\nexpectations:\n  - diagnosis: {op: \"[\", cause: nan_source}\n");
  EXPECT_EQ(e.key(), "expectations[0].diagnosis.op");
}

TEST(Scenario, ImpossibleSitesAreRejected) {
  ScenarioError e = load_error("name: x\nmodel: mlp\nsteps: 2\ninjections:\n  - {kind: nan, op: fc1, step: 2}\n");
  EXPECT_EQ(e.key(), "injections[0].step");
  EXPECT_NE(std::string(e.what()).find("below steps (2)"), std::string::npos) << e.what();
  e = load_error("name: x\nmodel: mlp\nranks: 2\ninjections:\n  - {kind: nan, op: fc1, rank: 5}\n");
  EXPECT_EQ(e.key(), "injections[0].rank");
  e = load_error("name: x\nmodel: mlp\nsteps: 3\nexpectations:\n  - detection: {kind: nan, step: 7}\n");
  EXPECT_EQ(e.key(), "expectations[0].detection.step");
  e = load_error("name: x\nmodel: mlp\nexpectations:\n  - consistency: {consistent: true}\n");
  EXPECT_NE(std::string(e.what()).find("ranks >= 2"), std::string::npos) << e.what();
  e = load_error("name: x\nmodel: mlp\nexpectations:\n  - capture: {dropped: 0, variant: nope}\n");
  EXPECT_EQ(e.key(), "expectations[0].capture.variant");
  e = load_error("name: x\nmodel: mlp\ninjections:\n  - {op: fc1}\n");
  EXPECT_EQ(e.key(), "injections[0]");
}

TEST(Scenario, MissingModelFiles) {
  ScenarioError e = load_error("name: x\nmodel: no_such_model\n");
  EXPECT_EQ(e.key(), "model");
  EXPECT_NE(std::string(e.what()).find("mlp"), std::string::npos) << "bundled models are listed: " << e.what();
  e = load_error("name: x\nmodel: models/missing.yaml\n");
  EXPECT_NE(std::string(e.what()).find("not found"), std::string::npos) << e.what();
  e = load_error("name: x\nmodel: {onnx: net.onnx}\n");
  EXPECT_EQ(e.key(), "model");
}

TEST(Scenario, ModelPathIsRelativeToTheScenario) {
  TempDir dir;
  dir.write("models/m.yaml", "name: m\n");
  const Scenario s = load_scenario(dir.write("sub/../s.yaml", "name: x\nmodel: models/m.yaml\n"), opts());
  EXPECT_EQ(s.model.source, ModelSpec::Source::YamlFile);
  EXPECT_EQ(s.model.path.filename(), "m.yaml");
}

TEST(Scenario, SetOverridesApplyBeforeValidation) {
  TempDir dir;
  const auto file = dir.write("s.yaml", kGood);
  const Scenario s = load_scenario(file, opts({parse_set("steps=5"), parse_set("chip.overrides.num_cores=4"),
                                               parse_set("injections.0.step=4"), parse_set("probes.sample_rate=0.1"),
                                               parse_set("description=changed")}));
  EXPECT_EQ(s.steps, 5);
  EXPECT_EQ(s.chip.overrides.at("num_cores"), "4");
  EXPECT_EQ(s.injections[0].params["step"].as<int>(), 4);
  EXPECT_DOUBLE_EQ(s.probes["sample_rate"].as<double>(), 0.1);
  EXPECT_EQ(s.description, "changed");
  // Validation sees the overridden document: step 4 of 3 steps is impossible.
  EXPECT_THROW(load_scenario(file, opts({parse_set("steps=3"), parse_set("injections.0.step=4")})), ScenarioError);
  // Unknown keys set from the command line are rejected like any other.
  EXPECT_THROW(load_scenario(file, opts({parse_set("chip.cores=4")})), ScenarioError);
}

TEST(Scenario, SetOverrideErrors) {
  EXPECT_THROW(parse_set("steps"), ScenarioError);
  EXPECT_THROW(parse_set("=3"), ScenarioError);
  EXPECT_THROW(parse_set("a..b=3"), ScenarioError);
  TempDir dir;
  const auto file = dir.write("s.yaml", kGood);
  try {
    load_scenario(file, opts({parse_set("injections.3.step=1")}));
    FAIL() << "index out of range accepted";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.key(), "injections.3.step");
    EXPECT_NE(std::string(e.what()).find("1 entries"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_scenario(file, opts({parse_set("steps.x=1")})), ScenarioError);
}

TEST(Scenario, SeedOptionOverridesTheFile) {
  TempDir dir;
  LoadOptions o = opts();
  o.seed = 7;
  const Scenario s = load_scenario(dir.write("s.yaml", kGood), o);
  EXPECT_EQ(s.seed, 7u);
}

TEST(Scenario, TrainingSectionOnlyInTraining) {
  const ScenarioError e = load_error("name: x\nmodel: mlp\ntraining: {loss: mse}\n");
  EXPECT_EQ(e.key(), "training");
  const ScenarioError o = load_error("name: x\nmodel: mlp\nmode: training\ntraining: {optimizer: {type: sgd, beta1: 0.9}}\n");
  EXPECT_EQ(o.key(), "training.optimizer.beta1");
}

TEST(Scenario, VariantsParse) {
  TempDir dir;
  const Scenario s = load_scenario(dir.write("s.yaml", R"(name: x
model: mlp
probes: {mode: statistics}
variants:
  - {name: single, set: {probes.capture.ping_pong: false}}
  - {name: sampled, set: {probes.sample_rate: 0.1, probes.mode: full}}
expectations:
  - capture: {overhead_below_percent: 50, variant: single}
)"),
                                   opts());
  ASSERT_EQ(s.variants.size(), 2u);
  EXPECT_EQ(s.variants[1].name, "sampled");
  ASSERT_EQ(s.variants[1].sets.size(), 2u);
  EXPECT_EQ(s.variants[1].sets[0].first, "probes.sample_rate");
  EXPECT_THROW(load_scenario(dir.write("t.yaml", "name: x\nmodel: mlp\nvariants:\n  - {name: a, set: {}}\n  - {name: a, set: {}}\n"),
                             opts()),
               ScenarioError);
}

}  // namespace
}  // namespace probelab::sim

namespace probelab::sim {
namespace {

TEST(Scenario, ChipOverridesReachThePreparedChip) {
  TempDir dir;
  const auto file = dir.write("s.yaml", "name: x\nmodel: mlp\nchip: {preset: tiny, overrides: {num_cores: 3, "
                                        "hbm_latency_ns: 90}}\n");
  const PreparedRun r = prepare_run(load_scenario(file, opts()));
  EXPECT_EQ(r.chip.preset, "tiny");
  EXPECT_EQ(r.chip.num_cores, 3u);
  EXPECT_EQ(r.chip.hbm_latency_ns, 90u);
  EXPECT_EQ(r.chip.hbm_channels, chip::chip_preset("tiny").hbm_channels);  // the rest is the preset's
  const PreparedRun plain = prepare_run(load_scenario(dir.write("p.yaml", "name: p\nmodel: mlp\nchip: tiny\n"), opts()));
  EXPECT_EQ(plain.chip.num_cores, chip::chip_preset("tiny").num_cores);
  try {
    prepare_run(load_scenario(dir.write("b.yaml", "name: b\nmodel: mlp\nchip: {overrides: {num_cores: 0}}\n"), opts()));
    ADD_FAILURE() << "num_cores 0 accepted";
  } catch (const ScenarioError& e) {  // file, line and key of the override
    EXPECT_EQ(e.key(), "chip.overrides.num_cores") << e.what();
    EXPECT_EQ(e.line(), 3) << e.what();
  }
}

// Training a model whose backward pass cannot be built (an inference-only op on a trainable
// weight's path) is bad input at the scenario's mode, with the op and the reason.
TEST(Scenario, TrainingAModelWithoutAGradientNamesTheModeAndTheOp) {
  TempDir dir;
  dir.write("m.yaml", R"(name: m
inputs:
  - {name: x, shape: [2, 4]}
ops:
  - {name: wrap, type: Mod, inputs: [x], weights: {d: [4]}, attrs: {fmod: 1}}
  - {name: fc, type: MatMul, weights: {w: [4, 3]}}
outputs: [fc]
)");
  const std::filesystem::path file = dir.write("s.yaml", "name: s\nmodel: m.yaml\nmode: training\n");
  try {
    prepare_run(load_scenario(file, opts()));
    FAIL() << "expected a ScenarioError";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.key(), "mode");
    EXPECT_EQ(e.line(), 3);
    const std::string m = e.what();
    EXPECT_NE(m.find("s.yaml:3:7: key 'mode': expected a model whose backward pass can be built"), std::string::npos) << m;
    EXPECT_NE(m.find("op 'wrap' (Mod) is inference only (it has no gradient) but reads the trainable weight"),
              std::string::npos) << m;
  }
  // The same model runs in inference.
  EXPECT_NO_THROW(prepare_run(load_scenario(dir.write("i.yaml", "name: i\nmodel: m.yaml\nmode: inference\n"), opts())));
}

TEST(Scenario, TheModelsCollectivesMustFitTheJob) {
  // Each case: the model's collective op, the job, the key and message of the error.
  struct Case {
    std::string op, job, key, message;
  };
  const Case cases[] = {
      {"{name: rs, type: ReduceScatter, attrs: {ranks: 16}}", "ranks: 8", "model",
       "ReduceScatter 'rs': ranks equal to the size of its world communicator in this job (8; 8 ranks, 8 chips per "
       "server), got ranks 16"},
      {"{name: bc, type: Broadcast, attrs: {root: 20}}", "ranks: 8", "model",
       "Broadcast 'bc': root a position in its world communicator (0..7), got root 20"},
      {"{name: ag, type: AllGather, attrs: {comm: peers, ranks: 4}}", "ranks: 12\ncluster: {chips_per_server: 4}",
       "model", "AllGather 'ag': ranks equal to the size of its peers communicator in this job (3; 12 ranks, 4 chips "
       "per server), got ranks 4"},
      {"{name: ar, type: AllReduce}", "ranks: 1", "ranks",
       "expected more than one chip for the model's collective AllReduce 'ar', got 1"},
      {"{name: ar, type: AllReduce, attrs: {algorithm: hierarchical, comm: server}}", "ranks: 16", "model",
       "AllReduce 'ar': algorithm hierarchical spans comm world, got comm server"},
      // A tree's root outside the communicator stopped the run on the chips (exit 3), not at load.
      {"{name: ar, type: AllReduce, attrs: {algorithm: tree, root: 20}}", "ranks: 12\ncluster: {chips_per_server: 4}",
       "model", "AllReduce 'ar': root a position in its world communicator (0..11), got root 20"},
      {"{name: ar, type: AllReduce, attrs: {algorithm: tree, root: 5, comm: peers}}",
       "ranks: 12\ncluster: {chips_per_server: 4}", "model",
       "AllReduce 'ar': root a position in its peers communicator (0..2), got root 5"},
      {"{name: rs, type: ReduceScatter, attrs: {algorithm: tree, ranks: 8, root: 8}}", "ranks: 8", "model",
       "ReduceScatter 'rs': root a position in its world communicator (0..7), got root 8"},
      // Attributes the op would ignore, as training.allreduce refuses them.
      {"{name: ar, type: AllReduce, attrs: {algorithm: ring, order: group}}", "ranks: 8", "model",
       "AllReduce 'ar': order only with algorithm direct or hierarchical with inter_algorithm direct (ring and tree fix "
       "their own order), got algorithm ring"},
      {"{name: ar, type: AllReduce, attrs: {algorithm: hierarchical, order: group}}", "ranks: 16", "model",
       "got inter_algorithm ring"},
      {"{name: ar, type: AllReduce, attrs: {algorithm: tree, inter_algorithm: direct}}", "ranks: 8", "model",
       "AllReduce 'ar': inter_algorithm only with algorithm hierarchical (it is the stage between servers), got "
       "algorithm tree"},
      {"{name: ar, type: AllReduce, attrs: {reduction: sum, divisor: 3}}", "ranks: 8", "model",
       "AllReduce 'ar': divisor only with reduction mean, got reduction sum"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    TempDir dir;
    dir.write("m.yaml", "name: m\ninputs:\n  - {name: x, shape: [16, 8]}\nops:\n  - " + c.op + "\n");
    const std::filesystem::path file = dir.write("s.yaml", "name: s\nmodel: m.yaml\nmode: inference\n" + c.job + "\n");
    try {
      prepare_run(load_scenario(file, opts()));
      ADD_FAILURE() << "expected a ScenarioError";
    } catch (const ScenarioError& e) {
      EXPECT_EQ(e.key(), c.key);
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
  // Fitting ones prepare: the peers communicator of 8 ranks on 4-chip servers has 2 members.
  TempDir dir;
  dir.write("m.yaml", "name: m\ninputs:\n  - {name: x, shape: [16, 8]}\nops:\n  - {name: ag, type: AllGather, attrs: "
                      "{comm: peers, ranks: 2}}\n  - {name: bc, type: Broadcast, attrs: {root: 7}}\n");
  EXPECT_NO_THROW(prepare_run(load_scenario(
      dir.write("s.yaml", "name: s\nmodel: m.yaml\nmode: inference\nranks: 8\ncluster: {chips_per_server: 4}\n"), opts())));
  // So do a tree rooted inside its communicator, an order where the additions happen in one place
  // and a divisor of a mean.
  dir.write("m.yaml", "name: m\ninputs:\n  - {name: x, shape: [16, 8]}\nops:\n  - {name: a, type: AllReduce, attrs: "
                      "{algorithm: tree, root: 2, comm: peers}}\n  - {name: b, type: AllReduce, attrs: {algorithm: "
                      "hierarchical, inter_algorithm: direct, order: group}}\n  - {name: c, type: AllReduce, attrs: "
                      "{algorithm: direct, order: group, divisor: 4}}\n");
  EXPECT_NO_THROW(prepare_run(load_scenario(
      dir.write("s.yaml", "name: s\nmodel: m.yaml\nmode: inference\nranks: 12\ncluster: {chips_per_server: 4}\n"), opts())));
}

TEST(Scenario, DataInputsGiveModelInputsTheirOwnInitialiser) {
  TempDir dir;
  dir.write("m.yaml", R"(name: m
inputs:
  - {name: ids, shape: [2, 5], dtype: int64}
weights:
  - {name: table, shape: [10, 4]}
ops:
  - {name: embed, type: Gather, inputs: [table, ids]}
outputs: [embed]
)");
  const PreparedRun r = prepare_run(load_scenario(
      dir.write("s.yaml", "name: s\nmodel: m.yaml\nsteps: 3\ndata: {inputs: {ids: 'randint(3, 7)'}}\n"), opts()));
  ASSERT_TRUE(r.workload.input_inits.count("ids"));
  const DataGenerator gen(r.scenario.data);
  std::set<std::int64_t> seen;
  for (std::uint32_t step = 0; step < 3; ++step) {
    const graph::Tensor t = gen.make_input("ids", r.workload.reference.tensor("ids").desc, step, 0, &r.workload.input_inits.at("ids"));
    EXPECT_EQ(t.dtype(), graph::DType::I64);
    for (double v : t.to_f64()) seen.insert(static_cast<std::int64_t>(v));
  }
  EXPECT_EQ(seen, (std::set<std::int64_t>{3, 4, 5, 6}));  // 30 draws cover the four ids
  auto error = [&](const std::string& data) -> std::string {
    try {
      prepare_run(load_scenario(dir.write("b.yaml", "name: s\nmodel: m.yaml\ndata: " + data + "\n"), opts()));
    } catch (const ScenarioError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error("{inputs: {tokens: ones}}").find("key 'data.inputs.tokens': expected an input of the model fed by data (ids)"),
            std::string::npos) << error("{inputs: {tokens: ones}}");
  EXPECT_NE(error("{inputs: {table: ones}}").find("got 'table'"), std::string::npos);  // a weight, not fed by data
  EXPECT_NE(error("{inputs: {ids: 'randint(7)'}}").find("key 'data.inputs.ids': expected an initialiser"), std::string::npos)
      << error("{inputs: {ids: 'randint(7)'}}");
}

}  // namespace
}  // namespace probelab::sim
