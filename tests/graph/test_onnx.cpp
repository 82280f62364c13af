// ONNX importer: initializers and Constant nodes, folding of shape inputs, symbolic dimensions,
// legacy opsets, errors (every unsupported op listed), and autodiff on an imported model.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "graph/autodiff.h"
#include "graph/onnx/onnx_import.h"
#include "graph/op_registry.h"

namespace probelab::graph {
namespace {

const std::string kData = std::string(PROBELAB_SOURCE_DIR) + "/tests/graph/data/";
const std::string kOnnx = "/usr/share/libonnx-testdata/data/";

OnnxImportOptions batch2() {
  OnnxImportOptions o;
  o.dim_params["batch"] = 2;
  return o;
}

TEST(OnnxImport, InitializersConstantsAndSymbolicDims) {
  const Graph g = import_onnx(kData + "small_mlp.onnx", batch2());
  EXPECT_EQ(g.name(), "small_mlp");
  EXPECT_EQ(g.tensor("W").kind, TensorKind::Weight);
  EXPECT_EQ(g.tensor("B").kind, TensorKind::Weight);
  EXPECT_EQ(g.find_tensor("shape"), nullptr) << "the Constant feeding Reshape's shape is folded away";
  EXPECT_EQ(g.tensor("x").desc.shape, (Shape{2, 4}));
  const Op* reshape = g.find_op("/out/Reshape");
  ASSERT_NE(reshape, nullptr);
  EXPECT_EQ(reshape->inputs, std::vector<std::string>{"a"});
  EXPECT_EQ(reshape->attr_ints("shape"), (std::vector<std::int64_t>{3, -1}));
  EXPECT_EQ(reshape->scope, "out/Reshape");
  const std::map<std::string, Tensor> feeds{{"x", Tensor::from_f32({2, 4}, std::vector<float>{1, 2, 3, 4, -1, 20, 0, 0})}};
  const auto v = run_graph_reference(g, feeds, RefPrecision::F32);
  // x @ W = [x0 + x3, x1 + x3, x2 + x3]; + B; relu
  EXPECT_EQ(v.at("y").shape(), (Shape{3, 2}));
  EXPECT_EQ(v.at("y").to_f32(), (std::vector<float>{5.5f, 0, 7, 0, 10, 0}));
}

TEST(OnnxImport, SymbolicDimsNeedAValue) {
  try {
    import_onnx(kData + "small_mlp.onnx");
    FAIL();
  } catch (const GraphError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("small_mlp.onnx"), std::string::npos) << m;
    EXPECT_NE(m.find("'batch'"), std::string::npos) << m;
  }
}

TEST(OnnxImport, AllUnsupportedOpsAreListedWithTheirNodes) {
  const std::string model = kData + "onnx_import/unsupported_ops.onnx";
  EXPECT_EQ(onnx_unsupported_ops(model), (std::vector<std::string>{"NonMaxSuppression", "Unique"}));
  try {
    import_onnx(model);
    FAIL();
  } catch (const OnnxUnsupportedError& e) {
    EXPECT_EQ(e.kind(), OnnxUnsupportedError::Kind::OpTypes);
    EXPECT_EQ(e.items(), (std::vector<std::string>{"NonMaxSuppression", "Unique"}));
    EXPECT_NE(std::string(e.what()).find("unsupported op types: NonMaxSuppression (2 nodes: nms_1, nms_2), Unique (1 node: "
                                         "unique)"),
              std::string::npos)
        << e.what();
    // Where the supported ones are, not all of them (internal ops included: 1.5 kB of text).
    EXPECT_NE(std::string(e.what()).find("(`probelab list ops` lists the supported ones)"), std::string::npos) << e.what();
    EXPECT_LT(std::string(e.what()).size(), 300u) << e.what();
  }
}

std::string import_error(const std::string& model, const OnnxImportOptions& o = {}) {
  try {
    import_onnx(model, o);
  } catch (const GraphError& e) {
    return e.what();
  }
  return "no error";
}

TEST(OnnxImport, BadModelsAreNamedErrors) {
  const std::string d = kData + "onnx_import/";
  EXPECT_NE(import_error(d + "opset_too_new.onnx").find("opset 99, newer than the newest this importer implements (20)"),
            std::string::npos);
  EXPECT_NE(import_error(d + "initializer_shape_mismatch.onnx")
                .find("initializer 'w' holds [2, 3] but the graph input of that name declares [3, 2]"),
            std::string::npos);
  const std::string missing = import_error(d + "external_data_missing.onnx");
  EXPECT_NE(missing.find("initializer 'w': external data file 'weights_missing.bin' is missing"), std::string::npos)
      << missing;
  EXPECT_NE(missing.find("external_data_missing.onnx"), std::string::npos) << "the message names the model";
}

TEST(OnnxImport, Opset18ResizeAxesAspectRatioAndAntialias) {
  // up: sizes 9 x 12 of axes 2, 3 under not_larger (one scale, 1.5: 9 x 9), linear, antialias 0;
  // down: scale 0.5 of the last axis, nearest, antialias 1 (no filter for nearest).
  const Graph g = import_onnx(kData + "onnx_import/resize_opset18.onnx");
  std::vector<float> x(72);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  const Tensor xt = Tensor::from_f32({1, 2, 6, 6}, x);
  const auto out = run_graph_reference(g, {{"x", xt}}, RefPrecision::F32);
  auto full = [&](const char* mode, std::vector<double> scales) {
    Op op;
    op.name = "full";
    op.type = "Resize";
    op.inputs = {"x"};
    op.outputs = {"y"};
    op.attrs = {{"mode", std::string(mode)}, {"scales", scales}};
    const Tensor* in[] = {&xt};
    return run_reference(op, in, RefPrecision::F32).at(0);
  };
  EXPECT_EQ(out.at("up"), full("linear", {1, 1, 1.5, 1.5}));
  EXPECT_EQ(out.at("down"), full("nearest", {1, 1, 1, 0.5}));
  // A linear downscale with antialias 1: the widened filter over the last axis only (ONNX's
  // values of that filter: test_resize_opset18.cpp).
  const Graph aa = import_onnx(kData + "onnx_import/resize_antialias_downscale.onnx");
  const Tensor filtered = run_graph_reference(aa, {{"x", xt}}, RefPrecision::F32).at("down");
  Op op;
  op.name = "full";
  op.type = "Resize";
  op.inputs = {"x"};
  op.outputs = {"y"};
  op.attrs = {{"mode", std::string("linear")}, {"antialias", std::int64_t{1}}, {"scales", std::vector<double>{1, 1, 1, 0.5}}};
  const Tensor* in[] = {&xt};
  EXPECT_EQ(filtered, run_reference(op, in, RefPrecision::F32).at(0));
  EXPECT_EQ(filtered.shape(), (Shape{1, 2, 6, 3}));
  EXPECT_NE(filtered, full("linear", {1, 1, 1, 0.5}));
}

TEST(OnnxImport, DeclaredOutputDimsBoundByTheScenarioAreChecked) {
  // y is declared [N, 3] and computed [1, 3]: right for N = 1 only; the message shows the binding.
  const std::string model = kData + "onnx_import/output_symbolic_dim.onnx";
  OnnxImportOptions o;
  o.dim_params["N"] = 2;
  EXPECT_NE(import_error(model, o).find("graph output 'y': the model declares float [N=2, 3], the imported graph computes "
                                        "float32[1, 3]"),
            std::string::npos)
      << import_error(model, o);
  o.dim_params["N"] = 1;
  EXPECT_EQ(import_error(model, o), "no error");
}

TEST(OnnxImport, ExternalDataIsReadNextToTheModel) {
  const Graph g = import_onnx(kData + "onnx_import/external_data_ok.onnx");
  EXPECT_EQ(g.initializers().at("w").to_f32(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
}

// As the ONNX checker: a location is a relative path inside the model's directory. An absolute
// one, one with `..` or a link leading out of the directory would read another file of the
// machine into a weight (and from there into dumps and reports).
TEST(OnnxImport, ExternalDataOutsideTheModelsDirectoryIsRefused) {
  const std::string d = kData + "onnx_import/";
  EXPECT_NE(import_error(d + "external_data_absolute.onnx")
                .find("initializer 'w': external data location '/etc/passwd' is absolute: it must be a relative path "
                      "inside the model's directory"),
            std::string::npos)
      << import_error(d + "external_data_absolute.onnx");
  EXPECT_NE(import_error(d + "external_data_parent.onnx")
                .find("external data location '../onnx_import/external_data_ok.bin' leaves the model's directory"),
            std::string::npos)
      << import_error(d + "external_data_parent.onnx");

  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/probelab_onnx_link_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path dir(tmpl);
  fs::copy_file(d + "external_data_ok.onnx", dir / "external_data_ok.onnx");
  fs::create_symlink(fs::absolute(d + "external_data_ok.bin"), dir / "external_data_ok.bin");
  const std::string linked = import_error((dir / "external_data_ok.onnx").string());
  EXPECT_NE(linked.find("leads out of the model's directory through a link"), std::string::npos) << linked;
  // A link that stays inside the directory is fine.
  fs::remove(dir / "external_data_ok.bin");
  fs::copy_file(d + "external_data_ok.bin", dir / "data.bin");
  fs::create_symlink("data.bin", dir / "external_data_ok.bin");
  EXPECT_EQ(import_error((dir / "external_data_ok.onnx").string()), "no error");
  fs::remove_all(dir);
}

// A model's own functions are inlined: the block (a GELU, then a ReLU scaled by the call's alpha 2)
// and a GELU called without a name give gelu(2 relu(gelu(x))), and the ops carry the calls' names.
TEST(OnnxImport, LocalFunctionsAreInlined) {
  const Graph g = import_onnx(kData + "onnx_import/local_functions.onnx");
  const std::vector<float> x{-2.0f, -0.5f, 0.0f, 0.25f, 1.0f, 3.0f};
  const auto out = run_graph_reference(g, {{"x", Tensor::from_f32({2, 3}, x)}}, RefPrecision::F32);
  const std::vector<float> y = out.at("y").to_f32();
  auto gelu = [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); };
  ASSERT_EQ(y.size(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(y[i], gelu(2.0 * std::max(0.0, gelu(x[i]))), 1e-5) << i;
  EXPECT_NE(g.find_op("block/scaled/mul"), nullptr);  // call/call/body node
  EXPECT_NE(g.find_op("block/act/#1"), nullptr);     // a body node without a name: its index
  EXPECT_NE(g.find_op("MyGelu#1/#7"), nullptr);      // a call without a name
  for (const Op& op : g.ops()) EXPECT_TRUE(op.type != "MyGelu" && op.type != "Block") << op.name;
}

// Opset 18 GroupNormalization: per (image, group) statistics over the group's channels and
// pixels, then the group's scale and bias; against the formula in double.
TEST(OnnxImport, GroupNormalizationOfOpset18) {
  const Graph g = import_onnx(kData + "onnx_import/group_norm_opset18.onnx");
  std::vector<float> x(48);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * static_cast<float>(i)) * (1.0f + 0.1f * static_cast<float>(i % 5));
  const auto out = run_graph_reference(g, {{"x", Tensor::from_f32({2, 6, 2, 2}, x)}}, RefPrecision::F32);
  const std::vector<float> y = out.at("y").to_f32();
  const double scale[] = {1.5, -0.5, 2.0}, bias[] = {0.25, 0.0, -1.0};
  for (int n = 0; n < 2; ++n)
    for (int grp = 0; grp < 3; ++grp) {
      const int base = n * 24 + grp * 8;  // 2 channels of 4 pixels each
      double mean = 0, var = 0;
      for (int k = 0; k < 8; ++k) mean += x[static_cast<std::size_t>(base + k)] / 8.0;
      for (int k = 0; k < 8; ++k) var += std::pow(x[static_cast<std::size_t>(base + k)] - mean, 2) / 8.0;
      for (int k = 0; k < 8; ++k) {
        const double want = (x[static_cast<std::size_t>(base + k)] - mean) / std::sqrt(var + 1e-3) * scale[grp] + bias[grp];
        EXPECT_NEAR(y[static_cast<std::size_t>(base + k)], want, 2e-5) << n << " " << grp << " " << k;
      }
    }
  ASSERT_NE(g.find_op("gn"), nullptr);
  EXPECT_EQ(g.find_op("gn")->type, "InstanceNormalization");
}

TEST(OnnxImport, ShapeSubgraphsFoldAtImportAndAreListed) {
  // Shape -> Gather -> Unsqueeze -> Concat -> Reshape in an exported GPT-2 block at a small size.
  OnnxImportOptions o;
  o.dim_params = {{"batch", 1}, {"seq", 4}};
  const Graph g = import_onnx(std::string(PROBELAB_SOURCE_DIR) + "/scenarios/models/gpt2_block.onnx", o);
  const auto& f = g.import_folded();
  auto has = [&](const std::string& s) { return std::find(f.begin(), f.end(), s) != f.end(); };
  EXPECT_TRUE(has("/h.0/attn/Shape (Shape)"));
  EXPECT_TRUE(has("/h.0/attn/Concat (Concat)"));
  EXPECT_TRUE(has("/h.0/attn/mask/Trilu (Trilu)"));
  const Op* reshape = g.find_op("/h.0/attn/Reshape");
  ASSERT_NE(reshape, nullptr);
  EXPECT_EQ(reshape->attr_ints("shape"), (std::vector<std::int64_t>{1, 4, 12, 64}));
  EXPECT_EQ(reshape->inputs.size(), 1u);
  const Op* where = g.find_op("/h.0/attn/Where");
  ASSERT_NE(where, nullptr);
  EXPECT_EQ(g.tensor(where->inputs[0]).kind, TensorKind::Constant) << "the causal mask is a constant";
  const Tensor& mask = g.initializers().at(where->inputs[0]);
  EXPECT_EQ(mask.shape(), (Shape{4, 4}));
  EXPECT_EQ(mask.data<std::uint8_t>()[1], 0) << "above the diagonal is masked";
  EXPECT_EQ(mask.data<std::uint8_t>()[4], 1);
}

TEST(OnnxImport, IfWithAKnownConditionIsReplacedByItsBranch) {
  const std::string model = kOnnx + "node/test_if/model.onnx";
  const OnnxModelIo io = onnx_model_io(model);
  ASSERT_EQ(io.shape_inputs.size(), 1u) << "the condition must be bound";
  for (const bool cond : {true, false}) {
    OnnxImportOptions o;
    o.bind_inputs.emplace(io.inputs[0], Tensor::from_f32({}, std::vector<float>{cond ? 1.0f : 0.0f}, DType::Bool));
    const Graph g = import_onnx(model, o);
    const auto v = run_graph_reference(g, {}, RefPrecision::F32);
    const std::vector<float> y = v.at(io.outputs[0]).to_f32();
    EXPECT_EQ(y.front(), cond ? 1.0f : 5.0f) << "then: [1..5], else: [5..1]";
    EXPECT_NE(g.import_folded().back().find(cond ? "then branch" : "else branch"), std::string::npos);
  }
}

TEST(OnnxImport, ShapeInputsMustBeConstantOrBound) {
  const std::string model = kOnnx + "node/test_reshape_reordered_all_dims/model.onnx";
  const OnnxModelIo io = onnx_model_io(model);
  ASSERT_EQ(io.inputs.size(), 2u);
  EXPECT_EQ(io.shape_inputs, std::set<std::string>{io.inputs[1]});
  EXPECT_EQ(io.op_types, std::set<std::string>{"Reshape"});
  try {
    import_onnx(model);
    FAIL();
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("must be a constant"), std::string::npos) << e.what();
  }
  OnnxImportOptions o;
  o.bind_inputs.emplace(io.inputs[1], read_onnx_tensor(kOnnx + "node/test_reshape_reordered_all_dims/test_data_set_0/input_1.pb"));
  const Graph g = import_onnx(model, o);
  ASSERT_EQ(g.ops().size(), 1u);
  EXPECT_EQ(g.ops()[0].inputs.size(), 1u);
  EXPECT_EQ(g.ops()[0].attr_ints("shape"), (std::vector<std::int64_t>{4, 2, 3}));
  EXPECT_EQ(g.find_tensor(io.inputs[1]), nullptr);
}

TEST(OnnxImport, LegacySoftmaxFlattensTrailingDims) {
  const Graph g = import_onnx(kData + "legacy_softmax.onnx");
  std::vector<std::string> types;
  for (const Op& op : g.ops()) types.push_back(op.type);
  EXPECT_EQ(types, (std::vector<std::string>{"Flatten", "Softmax", "Reshape"}));
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = 0.1f * float(i % 7) - 0.2f * float(i / 12);
  const auto v = run_graph_reference(g, {{"x", Tensor::from_f32({2, 3, 4}, x)}}, RefPrecision::F64);
  const auto y = v.at("y").to_f64();
  for (int b = 0; b < 2; ++b) {  // softmax over all 12 trailing elements of each batch entry
    double z = 0;
    for (int j = 0; j < 12; ++j) z += std::exp(double(x[b * 12 + j]));
    for (int j = 0; j < 12; ++j) EXPECT_NEAR(y[b * 12 + j], std::exp(double(x[b * 12 + j])) / z, 1e-7);
  }
}

TEST(OnnxImport, LegacyHardmaxFlattensTrailingDims) {
  const Graph g = import_onnx(kData + "legacy_hardmax.onnx");
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = float((i * 7) % 24);  // distinct values
  const auto v = run_graph_reference(g, {{"x", Tensor::from_f32({2, 3, 4}, x)}}, RefPrecision::F32);
  for (const char* out : {"y", "z"}) {  // one 1 per batch entry, at its largest of all 12 trailing elements
    const auto y = v.at(out).to_f32();
    for (int b = 0; b < 2; ++b) {
      const int arg = int(std::max_element(x.begin() + b * 12, x.begin() + b * 12 + 12) - x.begin());
      for (int j = b * 12; j < b * 12 + 12; ++j) EXPECT_EQ(y[j], j == arg ? 1.0f : 0.0f) << out << " element " << j;
    }
  }
}

TEST(OnnxImport, LegacyConcatAxisAndPadPaddings) {
  const Graph g = import_onnx(kData + "legacy_concat_pad.onnx");
  const auto v = run_graph_reference(g, {{"x", Tensor::from_f32({2, 2}, std::vector<float>{1, 2, 3, 4})}},
                                     RefPrecision::F32);
  // concat along axis 1: [[1, 2, 1, 2], [3, 4, 3, 4]]; one row of 0.5 before, two columns after
  EXPECT_EQ(v.at("y").to_f32(), (std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 1, 2, 1, 2, 0.5f, 0.5f, 3, 4,
                                                    3, 4, 0.5f, 0.5f}));
}

TEST(OnnxImport, LegacyBatchNormStatisticsAreConstants) {
  const Graph g = import_onnx(kOnnx + "pytorch-converted/test_BatchNorm2d_eval/model.onnx");
  const Op& bn = g.ops().at(0);
  EXPECT_EQ(bn.type, "BatchNormalization");
  EXPECT_FALSE(bn.has_attr("is_test"));
  EXPECT_EQ(g.tensor(bn.inputs[1]).kind, TensorKind::Weight);
  EXPECT_EQ(g.tensor(bn.inputs[3]).kind, TensorKind::Constant);
  EXPECT_EQ(g.tensor(bn.inputs[4]).kind, TensorKind::Constant);
}

// Adds "loss" = mean of `out`, the scalar a training graph needs.
void add_mean_loss(Graph& g, const std::string& out) {
  Op mean;
  mean.name = "loss";
  mean.type = "ReduceMean";
  mean.inputs = {out};
  mean.outputs = {"loss"};
  mean.attrs = {{"keepdims", std::int64_t{0}}};
  g.add_op(mean);
}

TEST(OnnxImport, ImportedModelTrains) {
  Graph g = import_onnx(kOnnx + "pytorch-converted/test_Conv2d_groups/model.onnx");
  const std::string out = g.outputs().at(0);
  add_mean_loss(g, out);
  const Graph t = build_training_graph(g, "loss");
  t.validate();
  std::size_t updates = 0;
  for (const Op& op : t.ops()) updates += op.direction == Direction::Optimizer;
  EXPECT_EQ(updates, g.initializers().size());
  const std::string in = g.inputs().at(0);
  const Tensor x = read_onnx_tensor(kOnnx + "pytorch-converted/test_Conv2d_groups/test_data_set_0/input_0.pb");
  const auto v = run_graph_reference(t, {{in, x}}, RefPrecision::F32);
  for (const auto& [name, init] : g.initializers()) {
    ASSERT_TRUE(v.count(gradient_name(name))) << name;
    EXPECT_EQ(v.at(gradient_name(name)).shape(), init.shape());
  }
}

TEST(OnnxImport, ScalarInitializersAreConstants) {
  Graph g = import_onnx(kData + "scalar_initializers.onnx");
  for (const char* scalar : {"lo", "hi", "scale", "thr"})
    EXPECT_EQ(g.tensor(scalar).kind, TensorKind::Constant) << scalar;
  EXPECT_EQ(g.tensor("W").kind, TensorKind::Weight);
  EXPECT_EQ(g.tensor("slope").kind, TensorKind::Weight) << "a [1] initializer is a parameter";
  add_mean_loss(g, "y");
  const Graph t = build_training_graph(g, "loss");  // threw: Greater reads the trainable weight 'thr'
  // y = prelu(where(h > 1, 0.5 * clip(h, 0, 6), clip(h, 0, 6)), 0.1) with h = x @ [4, -3]
  const auto v = run_graph_reference(t, {{"x", Tensor::from_f32({3, 2}, std::vector<float>{1, 0, 1, 1, 5, 1})}},
                                     RefPrecision::F32);
  EXPECT_EQ(v.at("y").to_f32(), (std::vector<float>{2, 1, 3}));
  for (const char* scalar : {"lo", "hi", "scale", "thr"}) EXPECT_EQ(v.count(gradient_name(scalar)), 0u) << scalar;
  EXPECT_EQ(v.count(gradient_name("W")), 1u);
}

TEST(OnnxImport, AScalarNamedTrainableIsAWeight) {
  OnnxImportOptions o;
  o.trainable_scalars = {"scale"};
  Graph g = import_onnx(kData + "scalar_initializers.onnx", o);
  EXPECT_EQ(g.tensor("scale").kind, TensorKind::Weight);
  for (const char* scalar : {"lo", "hi", "thr"}) EXPECT_EQ(g.tensor(scalar).kind, TensorKind::Constant) << scalar;
  add_mean_loss(g, "y");
  const Graph t = build_training_graph(g, "loss");
  const auto v = run_graph_reference(t, {{"x", Tensor::from_f32({3, 2}, std::vector<float>{1, 0, 1, 1, 5, 1})}},
                                     RefPrecision::F32);
  EXPECT_EQ(v.count(gradient_name("scale")), 1u);
  for (const char* bad : {"W", "nope"}) {  // a [2, 1] weight already; no such initializer
    o.trainable_scalars = {bad};
    try {
      import_onnx(kData + "scalar_initializers.onnx", o);
      ADD_FAILURE() << bad;
    } catch (const GraphError& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("trainable scalar '{}' is not a rank-0 float initializer", bad)),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(OnnxImport, UnreadableFilesNameThePath) {
  try {
    read_onnx_tensor("/nonexistent/input_0.pb");
    FAIL();
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/input_0.pb"), std::string::npos);
  }
  EXPECT_THROW(import_onnx(kData + "small_mlp.textproto"), GraphError);
}

}  // namespace
}  // namespace probelab::graph
