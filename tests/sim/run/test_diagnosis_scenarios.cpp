// The diagnosis scenarios (scenarios/diagnosis/*.yaml): faults at steps, ranks, ops, elements and
// memory paths the bundled suite does not use, one per diagnosis class (causal provenance across
// steps and ranks, per-kind latches, causes from evidence, user conditions, non-finite-aware
// statistics, edge integrity). Each runs through the probelab executable: every expectation holds
// (exit code 0), and the fact the scenario exists for is checked on report.json independently.
#include <map>
#include <string>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/scenario_suite.h"

namespace probelab::sim {
namespace {

using nlohmann::json;
using test::TempDir;

json run_scenario(const std::string& file, const TempDir& dir) {
  return test::run_scenario_report(test::source_root() / "scenarios" / "diagnosis" / (file + ".yaml"), dir);
}

// NaN count of every dumped output at `step` on rank 0, keyed "op:edge" (the statistics dump).
std::map<std::string, std::int64_t> nan_counts(const TempDir& dir, const std::string& name, int step) {
  const json d = json::parse(test::slurp(dir.path() / "out" / name / "dump" / "rank0" / "dump.json"));
  std::map<std::string, std::int64_t> nans;
  for (const auto& e : d["entries"])
    if (e["step"] == step) nans[e["op"].get<std::string>() + ":" + e["edge"].get<std::string>()] = e["statistics"]["nan_count"];
  return nans;
}

// Scenarios of a value whose overflow comes steps later: (writer@step, overflowing op@step, the
// writer's bound arithmetic named in the evidence). A path names its ranks when what it explains
// spans several: rank 1's overflowing part of fc2's input gradient reaches every rank through the
// all-reduce that sums the parts; rank 0's replicated fc3 weight stays rank 0's (tensor
// parallelism all-reduces no replicated weight's gradient).
const std::map<std::string, std::tuple<std::string, std::string, std::string>> kLateOverflow = {
    {"moe_loss_gradient_late_overflow", {"loss/grad@0", "fc@2", "SoftmaxCrossEntropyLossGrad"}},
    {"transformer_layernorm_gradient_late_overflow", {"ln2/grad@1", "mlp/fc2@2", "LayerNormalizationGrad"}},
    {"resnet_bn_scale_gradient_late_overflow", {"bn11/grad@1", "bn11@3", "BatchNormalizationGrad"}},
    {"tensor_parallel_weight_update_late_overflow",
     {"fc2/matmul/weight/tp/update@1 (rank 1)", "fc2/matmul/grad/a@3", "SgdUpdate"}},
    {"loss_scaled_update_value", {"fc3/matmul/weight/update@0", "scaled_loss@1", "SgdUpdate"}},
};

class DiagnosisScenario : public ::testing::TestWithParam<std::string> {};

TEST_P(DiagnosisScenario, PassesAndShowsWhatItIsFor) {
  TempDir dir;
  const std::string name = GetParam();
  const json r = run_scenario(name, dir);
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["status"], "ok");
  for (const auto& e : r["expectations"]) EXPECT_TRUE(e["passed"].get<bool>()) << e.dump();
  ASSERT_TRUE(r["diagnosis"].is_array() && !r["diagnosis"].empty()) << r.dump();
  const json& top = r["diagnosis"][0];
  for (const auto& i : r["injections"]) EXPECT_TRUE(i["fired"].get<bool>()) << i.dump();

  if (name == "model_constant_inf_mask") {
    // the model's own -Inf mask: a source in the model, never corruption of data or memory
    EXPECT_EQ(top["cause"], "nan_source");
    EXPECT_NE(top["suggestion"].get<std::string>().find("initializer of the model"), std::string::npos) << top.dump();
    for (const auto& c : r["diagnosis"]) EXPECT_NE(c["cause"], "data_corruption") << c.dump();
  }
  if (name == "hash_allreduce_result_value" || name == "hash_gather_result_value") {
    // a hash-only divergence at a collective: sized by the captures (a sum), or any (a gather)
    EXPECT_EQ(top["cause"], "data_corruption");
    const std::string ev = top["evidence"][0].get<std::string>();
    EXPECT_NE(ev.find(name == "hash_gather_result_value" ? "AllGather moves values" : "its captures differ by at least"),
              std::string::npos)
        << ev;
    for (const auto& c : r["diagnosis"]) EXPECT_NE(c["cause"], "collective_order") << c.dump();
  }
  if (name == "zero1_gather_inf_fp16_buffers") {
    // a gather adds nothing: its infinity is no FP16 accumulation overflow, whatever its buffers
    EXPECT_EQ(top["cause"], "overflow");
    for (const auto& c : r["diagnosis"])
      if (c["op"].get<std::string>().find("allgather") != std::string::npos) {
        EXPECT_NE(c["cause"], "fp16_accumulation_overflow") << c.dump();
      }
  }
  if (name == "nan_step0_through_optimizer") {
    // one origin: every other NaN is propagation with the source named, never an all-reduce
    std::size_t sources = 0;
    for (const auto& a : r["anomalies"]) {
      if (!a.contains("role")) continue;
      if (a["role"] == "source") {
        ++sources;
      } else {
        EXPECT_EQ(a["source_op"], "fc2/gelu") << a.dump();
      }
    }
    EXPECT_EQ(sources, 1u);
    for (const auto& c : r["diagnosis"])
      if (c["op"].get<std::string>().find("allreduce") != std::string::npos) {
        EXPECT_NE(c["cause"], "nan_source") << c.dump();
      }
  } else if (name == "output_range_overflow_fp32_acc" || name == "l0c_flip_replay") {
    for (const auto& c : r["diagnosis"]) EXPECT_NE(c["cause"], "fp16_accumulation_overflow") << c.dump();
    EXPECT_FALSE(top["suggestion"].get<std::string>().empty());
  } else if (name == "hbm_weight_flip_inference" || name == "edge_integrity_weight") {
    EXPECT_EQ(top["cause"], "data_corruption");
    for (const auto& c : r["diagnosis"]) EXPECT_NE(c["cause"], "nan_source") << c.dump();
  } else if (name == "per_kind_latch_backward") {
    bool nan = false, under = false;
    for (const auto& a : r["anomalies"]) {
      if (a["op"] != "conv16/grad/x" || a["step"] != 1) continue;
      if (a["kind"] == "invalid") nan = a["element"] == 250;
      if (a["kind"] == "underflow") under = a["element"] != 250;
    }
    EXPECT_TRUE(nan && under) << r["anomalies"].dump();
  } else if (name == "value_jump_weight_update") {
    // the MatMul that overflowed on the corrupted weight is explained, never an output-range overflow
    EXPECT_EQ(top["cause"], "data_corruption");
    EXPECT_NE(top["evidence"][0].get<std::string>().find("the most its inputs allow"), std::string::npos) << top.dump();
    for (const auto& c : r["diagnosis"]) EXPECT_NE(c["cause"], "output_range_overflow") << c.dump();
  } else if (name == "relu6_gradient_value") {
    // ReLU6's gradient is bounded by |dY|: the weight gradient that overflowed on it is explained
    EXPECT_EQ(top["cause"], "data_corruption");
    EXPECT_NE(top["evidence"][0].get<std::string>().find("by PointwiseGrad arithmetic"), std::string::npos) << top.dump();
    for (const auto& c : r["diagnosis"]) EXPECT_NE(c["cause"], "output_range_overflow") << c.dump();
  } else if (name == "gpt2_layernorm_div_value") {
    // the decomposed LayerNorm's Div divides by a positive operand: bounded, so it is the origin
    EXPECT_EQ(top["cause"], "data_corruption");
    EXPECT_NE(top["evidence"][0].get<std::string>().find("by Div arithmetic"), std::string::npos) << top.dump();
    for (const auto& c : r["diagnosis"]) EXPECT_NE(c["cause"], "output_range_overflow") << c.dump();
  } else if (name == "resnet50_bn_grad_value" || name == "resnet50_conv_value" ||
             name == "tensor_parallel_loss_value") {
    // BatchNormalizationGrad's dX (1 / sqrt(epsilon)), a 1x1 convolution's 64-term dot products and
    // an unweighted cross-entropy are bounded: the op downstream that overflowed is explained
    const std::string type = name == "resnet50_bn_grad_value" ? "BatchNormalizationGrad"
                             : name == "resnet50_conv_value"   ? "Conv"
                                                               : "CrossEntropyLoss";
    EXPECT_EQ(top["cause"], "data_corruption");
    EXPECT_NE(top["evidence"][0].get<std::string>().find("by " + type + " arithmetic"), std::string::npos) << top.dump();
    for (const auto& c : r["diagnosis"]) EXPECT_NE(c["cause"], "output_range_overflow") << c.dump();
  } else if (name == "instance_norm_nan_one_plane") {
    // InstanceNorm spreads the NaN over its own (image, channel) plane and no further: 64 of norm2's
    // 1,536 outputs and one of the 24 pooled values at step 1; backward, all of image 0's gradient.
    auto nans = nan_counts(dir, name, 1);
    EXPECT_EQ(nans["conv2:out0"], 1);
    EXPECT_EQ(nans["norm2:out0"], 64);
    EXPECT_EQ(nans["pool:out0"], 1);
    EXPECT_EQ(nans["norm2/grad:out0"], 8 * 64);
    for (const auto& c : r["diagnosis"])
      if (c["op"] == "norm2" || c["op"].get<std::string>().find("allreduce") != std::string::npos) {
        EXPECT_NE(c["cause"], "nan_source") << c.dump();
      }
  } else if (name == "grid_sample_nan_coordinate") {
    // One NaN coordinate is one pixel of every channel after GridSample (4 of 512 values), conv2's
    // 3 x 3 neighbourhood of it after the next conv, and only image 1's logits; backward, dgrid
    // (GridSampleGrad's second output) is NaN over image 1's grid and reaches loc's weight.
    auto nans = nan_counts(dir, name, 1);
    EXPECT_EQ(nans["grid:out0"], 1);
    EXPECT_EQ(nans["warp:out0"], 4);
    EXPECT_EQ(nans["conv2:out0"], 4 * 9);
    EXPECT_EQ(nans["fc:out0"], 5);
    EXPECT_EQ(nans["warp/grad:out1"], 8 * 8 * 2);
    EXPECT_GT(nans["loc/weight/update:out0"], 0);
    for (const auto& c : r["diagnosis"])
      if (c["op"] == "warp") {
        EXPECT_NE(c["cause"], "nan_source") << c.dump();
      }
  } else if (name == "scatter_nd_cache_nan") {
    // ScatterND writes the NaN key into one cache slot (1 of 48 values); 3 of 18 scores read it and
    // Softmax spreads it over all three rows.
    auto nans = nan_counts(dir, name, 1);
    EXPECT_EQ(nans["cache_write:out0"], 1);
    EXPECT_EQ(nans["scores:out0"], 3);
    EXPECT_EQ(nans["softmax:out0"], 18);
    for (const auto& c : r["diagnosis"])
      if (c["op"] == "cache_write" || c["op"] == "softmax") {
        EXPECT_NE(c["cause"], "nan_source") << c.dump();
      }
  } else if (name == "qdq_cnn_nan_masked") {
    // The quantizer after conv2's Relu turns the NaN into its zero point: conv2 and the Relu hold
    // it, nothing after them does (the logits are finite), and the diagnosis still blames conv2.
    auto nans = nan_counts(dir, name, 1);
    EXPECT_EQ(nans["/conv2/Conv:out0"], 1);
    EXPECT_EQ(nans["/conv2/Relu:out0"], 1);
    std::int64_t after = 0;
    for (const auto& [edge, n] : nans)
      if (edge.find("/conv2/") != 0) after += n;
    EXPECT_EQ(after, 0);
    EXPECT_EQ(nans.count("/conv2/act/QuantizeLinear:out0"), 1u);
    EXPECT_EQ(nans.count("/fc/Add:out0"), 1u);
    for (const auto& c : r["diagnosis"])
      if (c["op"] != "/conv2/Conv") {
        EXPECT_NE(c["cause"], "nan_source") << c.dump();
      }
  } else if (name == "qdq_cnn_full_capture") {
    // Every quantizer's uint8 output is dumped in full ('|u1'), none rejected as corrupt, and no
    // candidate blames corruption.
    const json d = json::parse(test::slurp(dir.path() / "out" / name / "dump" / "rank0" / "dump.json"));
    std::size_t bytes_entries = 0;
    for (const auto& e : d["entries"]) {
      if (e["op"].get<std::string>().find("QuantizeLinear") == std::string::npos ||
          e["op"].get<std::string>().find("DequantizeLinear") != std::string::npos)
        continue;
      EXPECT_EQ(e["dtype"], "uint8") << e.dump();
      const std::string npy = test::slurp(dir.path() / "out" / name / "dump" / "rank0" / e["file"].get<std::string>());
      EXPECT_NE(npy.substr(0, 128).find("'descr': '|u1'"), std::string::npos) << e["file"];
      ++bytes_entries;
    }
    EXPECT_EQ(bytes_entries, 6u * 3u);  // the input's and five activations' quantizers, three steps
    EXPECT_EQ(r["capture"]["corrupt"], 0);
    for (const auto& c : r["diagnosis"]) EXPECT_NE(c["cause"], "data_corruption") << c.dump();
  } else if (name == "qlinear_int8_weight_flip") {
    // The sign bit of an int8 weight: 114 becomes -14, a change no latch sees; the hashes name it.
    const json& proof = r["injections"][0]["proof"][0];
    EXPECT_EQ(proof["before"], "0x72");
    EXPECT_EQ(proof["after"], "0xf2");
    EXPECT_EQ(top["cause"], "data_corruption");
    for (const auto& a : r["anomalies"]) EXPECT_EQ(a["kind"], "integrity") << a.dump();
  } else if (name == "moe_topk_nan_routing") {
    // TopK keeps the NaN logit (it ranks highest): token 4's two gate weights, its mixed row (8
    // values) and its logits (5) turn NaN; the experts' outputs and GatherND's selection do not.
    auto nans = nan_counts(dir, name, 1);
    EXPECT_EQ(nans["router:out0"], 1);
    EXPECT_EQ(nans["route:out0"], 1);
    EXPECT_EQ(nans["gate:out0"], 2);
    EXPECT_EQ(nans["expert_out:out0"], 0);
    EXPECT_EQ(nans["chosen:out0"], 0);
    EXPECT_EQ(nans["mix:out0"], 8);
    EXPECT_EQ(nans["fc:out0"], 5);
    for (const auto& c : r["diagnosis"])
      if (c["op"] == "route" || c["op"] == "gate" || c["op"] == "mix") {
        EXPECT_NE(c["cause"], "nan_source") << c.dump();
      }
  } else if (const auto late = kLateOverflow.find(name); late != kLateOverflow.end()) {
    // a value overflows an op steps later, through the weights' updates: the path starts at the
    // writer, the evidence names the overflow it explains; no output-range overflow
    const auto& [writer, reader, arithmetic] = late->second;
    ASSERT_FALSE(top["propagation_path"].empty()) << top.dump();
    EXPECT_EQ(top["propagation_path"][0], writer);
    const std::string evidence = top["evidence"][0].get<std::string>();
    EXPECT_NE(evidence.find("overflow of " + reader + " follows from it"), std::string::npos) << evidence;
    EXPECT_NE(evidence.find("by " + arithmetic + " arithmetic"), std::string::npos) << evidence;
    for (const auto& c : r["diagnosis"]) EXPECT_NE(c["cause"], "output_range_overflow") << c.dump();
  } else if (name == "tensor_parallel_gather_value") {
    // the gather's result is bounded by its members' inputs (a gather moves values): named there
    const std::string ev = top["evidence"][0].get<std::string>();
    EXPECT_NE(ev.find("by AllGather arithmetic on every member's input's captured magnitudes"), std::string::npos) << ev;
    for (const auto& c : r["diagnosis"]) EXPECT_NE(c["cause"], "output_range_overflow") << c.dump();
  } else if (name == "hierarchical_inter_result_value") {
    // a difference no order of additions makes (collective_order_limit): corruption, not order
    const std::string ev = top["evidence"][0].get<std::string>();
    EXPECT_NE(ev.find("beyond what an order of additions changes in it"), std::string::npos) << ev;
    for (const auto& c : r["diagnosis"]) EXPECT_NE(c["cause"], "collective_order") << c.dump();
  } else if (name == "allreduce_result_nan_one_rank") {
    // one rank's NaN in a collective's result is not a reduction order: the consistency check's
    // divergence corroborates the NaN's origin instead of a collective_order candidate
    for (const auto& c : r["diagnosis"]) EXPECT_NE(c["cause"], "collective_order") << c.dump();
    bool seen = false;
    for (const auto& e : top["evidence"]) seen = seen || e.get<std::string>().starts_with("the consistency check sees it");
    EXPECT_TRUE(seen) << top.dump();
  } else if (name == "hierarchical_nan_one_server") {
    // each stage's values are followed among its own communicator's ranks: one candidate
    EXPECT_EQ(r["diagnosis"].size(), 1u) << r["diagnosis"].dump();
  } else if (name == "nan_after_unrelated_value") {
    // the earlier out-of-range value does not explain a NaN its reader could not have made
    EXPECT_EQ(top["op"], "attn/v");
    for (const auto& c : r["diagnosis"]) EXPECT_NE(c["op"], "mlp/fc2") << c.dump();
  } else if (name == "layernorm_nan_after_softmax_value") {
    // a LayerNormalization's FP32 intermediates and bounded output rule out the earlier value
    EXPECT_EQ(top["op"], "ln1");
    for (const auto& c : r["diagnosis"]) EXPECT_NE(c["cause"], "data_corruption") << c.dump();
  } else if (name == "tensor_parallel_nan_late_step") {
    // each rank's shard bounds its first-step reads: nothing earlier looks like a value jump
    EXPECT_EQ(top["op"], "fc2/matmul");
    EXPECT_EQ(top["step"], 2);
    EXPECT_EQ(top["rank"], 2);
    for (const auto& c : r["diagnosis"]) EXPECT_NE(c["cause"], "data_corruption") << c.dump();
  } else if (name == "user_condition_gradient") {
    ASSERT_FALSE(top["evidence"].empty());
    EXPECT_NE(top["evidence"][0].get<std::string>().find("(threshold < 0.5)"), std::string::npos) << top.dump();
  }
}

INSTANTIATE_TEST_SUITE_P(Suite, DiagnosisScenario, ::testing::ValuesIn(test::yaml_stems(test::source_root() / "scenarios" / "diagnosis")),
                         test::scenario_test_name);

}  // namespace
}  // namespace probelab::sim
