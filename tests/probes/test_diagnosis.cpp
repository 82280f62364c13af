#include <gtest/gtest.h>

#include "tests/probes/probe_test_util.h"
#include "probes/diagnosis.h"

using namespace probe_test;
using probes::AnomalyKind;
using probes::AnomalyRecord;
using probes::CauseClass;

namespace {
AnomalyRecord anomaly(const graph::Graph& g, const char* op, AnomalyKind k, std::uint32_t step, bool source,
                      const char* src = "") {
  AnomalyRecord a;
  a.op = op;
  a.op_id = g.find_op(op)->id;
  a.op_type = g.find_op(op)->type;
  a.tensor = g.find_op(op)->outputs[0];
  a.kind = k;
  a.step = step;
  a.is_source = source;
  a.source_op = *src ? src : op;
  return a;
}
}  // namespace

TEST(Diagnosis, NanSourceRanksAboveItsPropagation) {
  graph::Graph g = mlp();
  std::vector<AnomalyRecord> an{anomaly(g, "fc2", AnomalyKind::NanInput, 2, false, "relu1"),
                                anomaly(g, "softmax", AnomalyKind::NanInput, 2, false, "relu1")};
  an[0].propagation_path = {"relu1", "fc2"};
  an[1].propagation_path = {"relu1", "fc2", "softmax"};
  probes::TriggerEvent t;  // a breakpoint at relu1 saw the NaN in its output
  t.op = "relu1";
  t.op_id = g.find_op("relu1")->id;
  t.tensor = "relu1:0";
  t.step = 2;
  t.condition = "nan_count > 0";
  spec::CaptureStats s;
  s.count = 16;
  s.nan_count = 1;
  t.stats = s;
  std::vector<probes::TriggerEvent> tr{t};
  probes::DiagnosisInput in;
  in.graph = &g;
  in.anomalies = an;
  in.triggers = tr;
  auto d = probes::diagnose(in);
  ASSERT_FALSE(d.empty());
  EXPECT_LE(d.size(), 3u);
  EXPECT_EQ(d[0].op, "relu1");
  EXPECT_EQ(d[0].cause, CauseClass::NanSource);
  EXPECT_EQ(d[0].step, 2u);
  EXPECT_GE(d[0].evidence.size(), 2u);
  EXPECT_FALSE(d[0].suggestion.empty());
  for (const auto& c : d) EXPECT_FALSE(c.op == "fc2" && c.cause == CauseClass::NanSource) << "downstream blamed";
  for (const auto& c : d) EXPECT_FALSE(c.op == "softmax" && c.cause == CauseClass::NanSource) << "downstream blamed";
}

TEST(Diagnosis, Fp16AccumulationOverflowAtTheMatMul) {
  graph::Graph g = mlp();
  std::vector<AnomalyRecord> an{anomaly(g, "fc1", AnomalyKind::Overflow, 1, true),
                                anomaly(g, "add1", AnomalyKind::Overflow, 1, true),
                                anomaly(g, "relu1", AnomalyKind::Underflow, 1, true)};
  probes::DiagnosisInput in;
  in.graph = &g;
  in.anomalies = an;
  auto d = probes::diagnose(in);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].op, "fc1");
  EXPECT_EQ(d[0].cause, CauseClass::Fp16AccumulationOverflow);
  EXPECT_NE(d[0].suggestion.find("FP32"), std::string::npos);
  EXPECT_EQ(d[1].op, "add1");
  EXPECT_EQ(d[1].cause, CauseClass::Overflow);
  EXPECT_EQ(d[2].cause, CauseClass::Underflow);
}

TEST(Diagnosis, CollectiveDivergenceAndFusedComparison) {
  graph::Graph g = mlp();
  probes::ConsistencyResult cr;
  cr.checked = true;
  cr.consistent = false;
  probes::Divergence dv;
  dv.step = 1;
  dv.op = "fc2";  // not a collective in this graph: classified as corruption/nondeterminism
  dv.ranks = {3};
  dv.max_abs_diff = 2e-3;
  cr.first = dv;
  cr.growth = {{0, 0.0}, {1, 2e-3}, {2, 5e-3}};
  cr.growing = true;
  probes::OpComparison fused;
  fused.op = "add1";
  fused.op_id = g.find_op("add1")->id;
  fused.step = 0;
  fused.pass = false;
  fused.culprit_inner_op = "add1/inner_ln";
  fused.culprit_basis = "partial_dump";
  std::vector<probes::OpComparison> cmp{fused};
  probes::DiagnosisInput in;
  in.graph = &g;
  in.consistency = &cr;
  in.comparisons = cmp;
  in.corrupt_records = 2;
  auto d = probes::diagnose(in, 5);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].cause, CauseClass::FusedOpPrecision);
  EXPECT_EQ(d[0].inner_op, "add1/inner_ln");
  EXPECT_EQ(d[1].op, "fc2");
  EXPECT_EQ(d[1].cause, CauseClass::DataCorruption);
  EXPECT_NE(d[1].evidence[0].find("growing"), std::string::npos) << d[1].evidence[0];
  EXPECT_EQ(d[2].op, "<capture path>");
}

TEST(Diagnosis, GradientVanishingEarliestTriggerWins) {
  graph::Graph g = mlp();
  auto trig = [&](const char* op, double abs_mean) {
    probes::TriggerEvent t;
    t.op = op;
    t.op_id = g.find_op(op)->id;
    t.tensor = g.find_op(op)->outputs[0];
    t.step = 4;
    t.condition = "abs_mean < 1e-6";
    spec::CaptureStats s;
    s.count = 64;
    s.abs_mean = abs_mean;
    t.stats = s;
    return t;
  };
  std::vector<probes::TriggerEvent> tr{trig("fc2", 1e-8), trig("add1", 1e-7), trig("relu1", 5e-8)};
  probes::DiagnosisInput in;
  in.graph = &g;
  in.triggers = tr;
  auto d = probes::diagnose(in);
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d[0].op, "add1");  // earliest in execution order
  EXPECT_EQ(d[0].cause, CauseClass::Underflow);
  EXPECT_GT(d[0].score, d[1].score);
  EXPECT_NE(d[0].suggestion.find("re-initialise"), std::string::npos);
  auto j = probes::to_json(d[0]);
  EXPECT_EQ(j["cause"], "underflow");
  EXPECT_EQ(j["op"], "add1");
}
