// Every expectation kind evaluated against hand-built reports, passing and failing.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "sim/scenario/expectation.h"

namespace probelab::sim {
namespace {

using nlohmann::json;

Expectation parse(const std::string& yaml) {
  return parse_expectation(YamlView(YAML::Load(yaml), "test.yaml", "expectations[0]"));
}

ExpectationResult eval(const std::string& yaml, const json& report) { return evaluate(parse(yaml), report); }

json report() {
  return json::parse(R"({
    "status": "ok",
    "anomalies": [
      {"kind": "invalid", "op": "attn/softmax", "element": 17, "step": 2, "rank": 0, "latency_cycles": 3600,
       "role": "source"},
      {"kind": "nan_input", "op": "attn/context", "element": 0, "step": 2, "rank": 0, "latency_cycles": 900,
       "role": "propagation"},
      {"kind": "condition", "op": "conv15", "tensor": "conv15/out/gradient", "step": 1, "rank": 0,
       "condition": "abs_mean < 1e-6"}
    ],
    "comparisons": [
      {"op": "fc1/matmul", "step": 0, "rank": 0, "passed": true, "inner_culprit": null},
      {"op": "ln+relu", "step": 0, "rank": 0, "passed": false, "inner_culprit": "ln"},
      {"op": "fc2/matmul", "step": 0, "rank": 0, "passed": false, "inner_culprit": null}
    ],
    "first_failing_op": "ln+relu",
    "consistency": {"checked": true, "consistent": false, "reference_rank": 0,
                    "first_divergence": {"op": "w/gradient/allreduce", "step": 0, "ranks": [3], "max_abs_diff": 0.002},
                    "per_step": [{"step": 0, "max_abs_diff": 0.002}, {"step": 1, "max_abs_diff": 0.004},
                                 {"step": 2, "max_abs_diff": 0.009}]},
    "diagnosis": [{"op": "attn/softmax", "cause": "nan_source"}, {"op": "attn/context", "cause": "precision"},
                  {"op": "mlp/fc1", "cause": "nan_source"}],
    "capture": {"records": 40, "dropped": 0, "overhead_percent": 2.5},
    "variants": [{"name": "single", "capture": {"records": 40, "dropped": 3, "overhead_percent": 14.0}}]
  })");
}

TEST(Expectations, Detection) {
  const json r = report();
  EXPECT_TRUE(eval("detection: {kind: nan, op: 'attn/soft*', element: 17, step: 2, rank: 0}", r).passed);
  EXPECT_TRUE(eval("detection: {kind: invalid, max_latency_cycles: 5000}", r).passed);
  EXPECT_TRUE(eval("detection: {kind: condition, op: conv15}", r).passed);
  EXPECT_TRUE(eval("detection: {kind: any, op: 'attn/context'}", r).passed);
  auto res = eval("detection: {kind: nan, op: 'attn/softmax', element: 18}", r);
  EXPECT_FALSE(res.passed);
  EXPECT_NE(res.actual.find("invalid at attn/softmax element 17"), std::string::npos) << res.actual;
  res = eval("detection: {kind: invalid, op: 'attn/softmax', max_latency_cycles: 1000}", r);
  EXPECT_FALSE(res.passed);
  EXPECT_NE(res.actual.find("too late"), std::string::npos) << res.actual;
  EXPECT_FALSE(eval("detection: {kind: overflow}", r).passed);
  EXPECT_FALSE(eval("detection: {kind: nan, step: 1}", r).passed);
  EXPECT_FALSE(eval("detection: {kind: nan, rank: 1}", r).passed);
}

TEST(Expectations, NoDetection) {
  const json r = report();
  EXPECT_FALSE(eval("no_detection: {}", r).passed);
  EXPECT_TRUE(eval("no_detection: {kind: overflow}", r).passed);
  EXPECT_TRUE(eval("no_detection: {op: 'mlp/*'}", r).passed);
  EXPECT_FALSE(eval("no_detection: {op: 'attn/*'}", r).passed);
  json clean = {{"status", "ok"}, {"anomalies", json::array()},
                {"comparisons", json::array({{{"op", "a"}, {"passed", true}}})}};
  EXPECT_TRUE(eval("no_detection: {}", clean).passed);
  EXPECT_TRUE(eval("no_detection: true", clean).passed);
  clean["comparisons"].push_back({{"op", "b"}, {"passed", false}});
  auto res = eval("no_detection: {}", clean);
  EXPECT_FALSE(res.passed);
  EXPECT_NE(res.actual.find("failing comparisons: b"), std::string::npos) << res.actual;
  EXPECT_TRUE(eval("no_detection: {comparisons: false}", clean).passed);
}

TEST(Expectations, Comparison) {
  const json r = report();
  EXPECT_TRUE(eval("comparison: {op: 'fc1/*', result: passes}", r).passed);
  EXPECT_FALSE(eval("comparison: {op: 'fc1/*', result: fails}", r).passed);
  EXPECT_TRUE(eval("comparison: {op: 'ln*', result: fails, inner_op: ln, first: true}", r).passed);
  EXPECT_FALSE(eval("comparison: {op: 'ln*', result: fails, inner_op: relu}", r).passed);
  EXPECT_FALSE(eval("comparison: {op: 'fc2*', result: fails, first: true}", r).passed);
  EXPECT_TRUE(eval("comparison: {op: 'fc2*', result: fails}", r).passed);
  EXPECT_FALSE(eval("comparison: {op: 'fc*', result: passes}", r).passed);
  auto res = eval("comparison: {op: 'nothing*', result: passes}", r);
  EXPECT_FALSE(res.passed);
  EXPECT_EQ(res.actual, "no comparison of a matching op");
  EXPECT_THROW(parse("comparison: {op: a, result: passes, first: true}"), ScenarioError);
}

TEST(Expectations, Consistency) {
  json r = report();
  EXPECT_TRUE(eval("consistency: {op: '*allreduce', step: 0, min_divergence: 1.0e-3, growing: true}", r).passed);
  EXPECT_FALSE(eval("consistency: {op: '*allreduce', step: 1}", r).passed);
  EXPECT_FALSE(eval("consistency: {op: 'other*'}", r).passed);
  EXPECT_FALSE(eval("consistency: {min_divergence: 0.01}", r).passed);
  EXPECT_FALSE(eval("consistency: {consistent: true}", r).passed);
  r["consistency"]["per_step"][2]["max_abs_diff"] = 0.001;
  EXPECT_FALSE(eval("consistency: {growing: true}", r).passed);
  json ok = {{"status", "ok"}, {"consistency", {{"checked", true}, {"consistent", true}, {"first_divergence", nullptr}}}};
  EXPECT_TRUE(eval("consistency: {consistent: true}", ok).passed);
  EXPECT_TRUE(eval("consistency: consistent", ok).passed);
  EXPECT_FALSE(eval("consistency: {op: '*'}", ok).passed);
  json unchecked = {{"status", "ok"}, {"consistency", {{"checked", false}}}};
  const auto res = eval("consistency: {consistent: true}", unchecked);
  EXPECT_FALSE(res.passed);
  EXPECT_EQ(res.actual, "no consistency check ran");
  EXPECT_THROW(parse("consistency: {consistent: true, op: x}"), ScenarioError);
  EXPECT_THROW(parse("consistency: {}"), ScenarioError);
}

TEST(Expectations, ConsistencyAtAnOpNeverComparedSaysWhatWas) {
  json r = report();
  r["consistency"]["ops"] = json::array({"w/gradient/allreduce", "b/gradient/allreduce"});
  EXPECT_TRUE(eval("consistency: {op: '*allreduce'}", r).passed);
  const auto shard = eval("consistency: {op: '*reducescatter'}", r);
  EXPECT_FALSE(shard.passed);
  EXPECT_EQ(shard.actual,
            "no op matching '*reducescatter' is compared across ranks (compared: w/gradient/allreduce, b/gradient/allreduce)");
  for (int i = 0; i < 8; ++i) r["consistency"]["ops"].push_back(fmt::format("l{}/allreduce", i));
  EXPECT_EQ(eval("consistency: {op: 'x'}", r).actual,
            "no op matching 'x' is compared across ranks (compared: w/gradient/allreduce, b/gradient/allreduce, "
            "l0/allreduce, l1/allreduce, l2/allreduce, l3/allreduce and 4 more)");
}

TEST(Expectations, ADivergenceComparedByHashHasNoSize) {
  json r = report();
  r["consistency"]["first_divergence"]["max_abs_diff"] = "nan";
  r["consistency"]["first_divergence"]["basis"] = "hash";
  const auto wrong = eval("consistency: {op: '*allreduce', ranks: [2]}", r);
  EXPECT_FALSE(wrong.passed);
  EXPECT_EQ(wrong.actual,
            "first divergence at w/gradient/allreduce step 0 on ranks [3] by an unknown amount (compared by hash)");
  r["consistency"]["consistent"] = false;
  EXPECT_EQ(eval("consistency: {consistent: true}", r).actual,
            "diverged at w/gradient/allreduce step 0 by an unknown amount (compared by hash)");
}

TEST(Expectations, ConsistencyOnTheRanksListed) {
  json r = report();
  EXPECT_TRUE(eval("consistency: {op: '*allreduce', ranks: [3]}", r).passed);
  EXPECT_TRUE(eval("consistency: {ranks: 3}", r).passed);
  EXPECT_TRUE(eval("consistency: {ranks: ['3-3']}", r).passed);
  const auto wrong = eval("consistency: {op: '*allreduce', ranks: [2, 3]}", r);
  EXPECT_FALSE(wrong.passed);
  EXPECT_EQ(wrong.expected, "ranks diverge first at op *allreduce on ranks [2, 3]");
  EXPECT_EQ(wrong.actual, "first divergence at w/gradient/allreduce step 0 on ranks [3] by 0.002");
  r["consistency"]["first_divergence"]["ranks"] = json::array({2, 3, 4, 5});
  EXPECT_TRUE(eval("consistency: {ranks: [2, '3-5']}", r).passed);
  EXPECT_FALSE(eval("consistency: {ranks: ['2-4']}", r).passed);
  EXPECT_THROW(parse("consistency: {ranks: []}"), ScenarioError);
  EXPECT_THROW(parse("consistency: {ranks: ['5-2']}"), ScenarioError);
  EXPECT_THROW(parse("consistency: {ranks: [x]}"), ScenarioError);
  EXPECT_THROW(parse("consistency: {consistent: true, ranks: [1]}"), ScenarioError);
}

TEST(Expectations, Diagnosis) {
  const json r = report();
  EXPECT_TRUE(eval("diagnosis: {op: 'attn/softmax', cause: nan_source}", r).passed);
  EXPECT_FALSE(eval("diagnosis: {op: 'attn/context', cause: precision}", r).passed);  // rank 2, top 1
  EXPECT_TRUE(eval("diagnosis: {op: 'attn/context', cause: precision, top: 2}", r).passed);
  EXPECT_FALSE(eval("diagnosis: {op: 'attn/softmax', cause: nan_source, exclusive: true}", r).passed);
  EXPECT_TRUE(eval("diagnosis: {op: '*', cause: nan_source, exclusive: true}", r).passed);
  // exclusive: nothing else blamed, whatever its cause ('*f*' names both nan_source candidates,
  // not attn/context, a precision candidate)
  EXPECT_FALSE(eval("diagnosis: {op: '*f*', cause: nan_source, exclusive: true}", r).passed);
  EXPECT_TRUE(eval("diagnosis: {op: '*f*', cause: nan_source}", r).passed);
  EXPECT_FALSE(eval("diagnosis: {op: 'attn/softmax', cause: underflow, top: 3}", r).passed);
}

TEST(Expectations, Capture) {
  const json r = report();
  EXPECT_TRUE(eval("capture: {overhead_below_percent: 3, dropped: 0}", r).passed);
  EXPECT_FALSE(eval("capture: {overhead_below_percent: 2}", r).passed);
  EXPECT_FALSE(eval("capture: {dropped: '>= 1'}", r).passed);
  EXPECT_TRUE(eval("capture: {dropped: '>= 1', variant: single}", r).passed);
  auto res = eval("capture: {overhead_below_percent: 10, variant: single}", r);
  EXPECT_FALSE(res.passed);
  EXPECT_NE(res.actual.find("overhead 14.000%"), std::string::npos) << res.actual;
  EXPECT_FALSE(eval("capture: {dropped: 0, variant: other}", r).passed);
  json no_overhead = r;
  no_overhead["capture"]["overhead_percent"] = nullptr;
  EXPECT_FALSE(eval("capture: {overhead_below_percent: 50}", no_overhead).passed);
  EXPECT_THROW(parse("capture: {}"), ScenarioError);
  EXPECT_THROW(parse("capture: {overhead_below_percent: -1}"), ScenarioError);
}

TEST(Expectations, Loss) {
  json r = report();
  r["losses"] = json::parse("[[2.0, 1.9, 1.5], [2.0, 2.0, 2.0]]");
  r["variants"][0]["losses"] = json::parse("[[2.0, 2.0, 2.0]]");
  EXPECT_TRUE(eval("loss: {drop_percent: '>= 25'}", r).passed);  // 2.0 -> 1.5
  EXPECT_FALSE(eval("loss: {drop_percent: '> 25'}", r).passed);
  EXPECT_TRUE(eval("loss: {drop_percent: '< 5.1', to_step: 1}", r).passed);
  EXPECT_TRUE(eval("loss: {drop_percent: '>= 21', from_step: 1, to_step: 2}", r).passed);
  EXPECT_TRUE(eval("loss: {drop_percent: 0, rank: 1}", r).passed);
  EXPECT_FALSE(eval("loss: {drop_percent: '> 0', rank: 1}", r).passed);
  EXPECT_TRUE(eval("loss: {drop_percent: '== 0', variant: single}", r).passed);
  const auto res = eval("loss: {drop_percent: '>= 1', variant: single}", r);
  EXPECT_FALSE(res.passed);
  EXPECT_NE(res.actual.find("drop 0%"), std::string::npos) << res.actual;
  EXPECT_FALSE(eval("loss: {drop_percent: '>= 1', rank: 3}", r).passed);  // no such rank reported
  json rising = r;
  rising["losses"] = json::parse("[[1.0, 4.0]]");
  EXPECT_TRUE(eval("loss: {drop_percent: '< 0'}", rising).passed);  // rose by 300%
  EXPECT_THROW(parse("loss: {}"), ScenarioError);
  EXPECT_THROW(parse("loss: {drop_percent: '>= x'}"), ScenarioError);
  EXPECT_THROW(parse("loss: {drop_percent: '>= .nan'}"), ScenarioError);
  EXPECT_THROW(parse("loss: {drop_percent: 1, step: 2}"), ScenarioError);
}

TEST(Expectations, EntryMustNameOneKind) {
  EXPECT_THROW(parse("{detection: {kind: nan}, capture: {dropped: 0}}"), ScenarioError);
  EXPECT_THROW(parse("[detection]"), ScenarioError);
  EXPECT_THROW(parse("detection: {kind: nonsense}"), ScenarioError);
  EXPECT_THROW(parse("detection: {op: x}"), ScenarioError);
}

TEST(Expectations, PerfFindingOnALinkBySrcAndDst) {
  // r6's NIC degraded (a finding without dst: the NIC serves every other server); r6 -> r7 is an
  // HCCS link of its server, r6 -> r10 goes through the NIC.
  const json report = json::parse(R"({"perf": {
    "links": [{"link": "r6 hccs->r7", "kind": "hccs", "src": 6, "dst": 7}, {"link": "r6 nic.tx", "kind": "nic", "src": 6}],
    "findings": [{"cause": "link", "rank": 6, "link": "r6 nic.tx", "kind": "nic", "src": 6, "score": 0.9}]}})");
  EXPECT_TRUE(eval("perf_finding: {cause: link, src: 6, dst: 10}", report).passed);
  EXPECT_TRUE(eval("perf_finding: {cause: link, src: 6}", report).passed);
  EXPECT_TRUE(eval("perf_finding: {cause: link, link: 'r6 nic*'}", report).passed);
  EXPECT_FALSE(eval("perf_finding: {cause: link, src: 6, dst: 7}", report).passed);  // its HCCS link, not the NIC
  EXPECT_FALSE(eval("perf_finding: {cause: link, src: 5, dst: 10}", report).passed);
  // An HCCS finding names its dst.
  const json hccs = json::parse(R"({"perf": {"links": [], "findings": [{"cause": "link", "rank": 1, "link": "r1 hccs->r2",
    "kind": "hccs", "src": 1, "dst": 2, "score": 0.9}]}})");
  EXPECT_TRUE(eval("perf_finding: {cause: link, src: 1, dst: 2}", hccs).passed);
  EXPECT_FALSE(eval("perf_finding: {cause: link, src: 1, dst: 3}", hccs).passed);
}

}  // namespace
}  // namespace probelab::sim
