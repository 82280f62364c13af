// Autodiff on whole models (MLP with a residual branch, small CNN, transformer block) against
// finite differences of the loss; naming of gradients and backward/optimizer ops; optimizer steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "tests/graph/model_builder.h"

namespace probelab::graph {
namespace {

using testing::int64_tensor;
using testing::ModelBuilder;
using testing::random_f64;
using testing::scalar;

// x [4, 6] -> fc1 -> relu1 -> {fc2 -> tanh, identity} -> add -> head -> cross entropy.
// relu1's output feeds two ops, so its gradient is accumulated.
ModelBuilder mlp() {
  ModelBuilder m("mlp");
  const std::string x = m.input("x", {4, 6});
  const std::string labels = m.constant("labels", int64_tensor({4}, {0, 2, 1, 2}));
  std::string h = m.op("Gemm", "fc1", {x, m.weight("fc1/weight", {6, 8}), m.weight("fc1/bias", {8})});
  const std::string a1 = m.op("Relu", "relu1", {h});
  h = m.op("MatMul", "fc2", {a1, m.weight("fc2/weight", {8, 8})});
  const std::string a2 = m.op("Tanh", "act2", {h});
  const std::string res = m.op("Add", "res", {a1, a2});
  const std::string logits =
      m.op("Gemm", "head", {res, m.weight("head/weight", {3, 8}), m.weight("head/bias", {3})}, {{"transB", std::int64_t{1}}});
  m.op("SoftmaxCrossEntropyLoss", "loss", {logits, labels}, {}, {"loss"});
  return m;
}

// x [2, 3, 6, 6] -> conv1 -> bn1 (batch statistics) -> relu -> maxpool -> conv2 (2 groups) -> relu
// -> global average pool -> flatten -> fc -> cross entropy.
ModelBuilder cnn() {
  ModelBuilder m("cnn");
  const std::string x = m.input("x", {2, 3, 6, 6});
  const std::string labels = m.constant("labels", int64_tensor({2}, {1, 2}));
  std::string t = m.op("Conv", "conv1", {x, m.weight("conv1/weight", {4, 3, 3, 3}), m.weight("conv1/bias", {4})},
                       {{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}});
  const std::string mean = m.constant("bn1/mean", random_f64({4}, m.rng));
  const std::string var = m.constant("bn1/var", random_f64({4}, m.rng, 0.5, 1.5));
  t = m.op("BatchNormalization", "bn1", {t, m.weight("bn1/scale", {4}), m.weight("bn1/bias", {4}), mean, var},
           {{"training_mode", std::int64_t{1}}}, {"bn1/out", "bn1/running_mean", "bn1/running_var"});
  t = m.op("Relu", "relu1", {t});
  t = m.op("MaxPool", "pool1", {t},
           {{"kernel_shape", std::vector<std::int64_t>{2, 2}}, {"strides", std::vector<std::int64_t>{2, 2}}});
  t = m.op("Conv2d", "conv2", {t, m.weight("conv2/weight", {4, 2, 3, 3})},
           {{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}, {"group", std::int64_t{2}}});
  t = m.op("Relu", "relu2", {t});
  t = m.op("GlobalAveragePool", "gap", {t});
  t = m.op("Flatten", "flatten", {t});
  t = m.op("Gemm", "fc", {t, m.weight("fc/weight", {4, 3}), m.weight("fc/bias", {3})});
  m.op("CrossEntropyLoss", "loss", {t, labels}, {}, {"loss"});
  return m;
}

// x [2, 4, 8] -> pre-norm attention block and pre-norm GELU MLP with residuals -> mean over the
// sequence -> MSE against a fixed target.
ModelBuilder transformer_block() {
  ModelBuilder m("block");
  const std::string x = m.input("x", {2, 4, 8});
  std::string n1 = m.op("LayerNorm", "ln1", {x, m.weight("ln1/scale", {8}), m.weight("ln1/bias", {8})});
  const std::string q = m.op("MatMul", "attn/q", {n1, m.weight("attn/wq", {8, 8})});
  const std::string k = m.op("MatMul", "attn/k", {n1, m.weight("attn/wk", {8, 8})});
  const std::string v = m.op("MatMul", "attn/v", {n1, m.weight("attn/wv", {8, 8})});
  const std::string kt = m.op("Transpose", "attn/kt", {k}, {{"perm", std::vector<std::int64_t>{0, 2, 1}}});
  std::string s = m.op("MatMul", "attn/scores", {q, kt});
  s = m.op("Scale", "attn/scale", {s}, {{"alpha", 1.0 / std::sqrt(8.0)}});
  const std::string p = m.op("Softmax", "attn/softmax", {s});
  std::string a = m.op("MatMul", "attn/context", {p, v});
  a = m.op("MatMul", "attn/proj", {a, m.weight("attn/wo", {8, 8})});
  const std::string r1 = m.op("Add", "res1", {x, a});
  const std::string n2 = m.op("LayerNorm", "ln2", {r1, m.weight("ln2/scale", {8}), m.weight("ln2/bias", {8})});
  std::string f = m.op("MatMul", "mlp/fc1", {n2, m.weight("mlp/w1", {8, 16})});
  f = m.op("Add", "mlp/bias1", {f, m.weight("mlp/b1", {16})});
  f = m.op("Gelu", "mlp/gelu", {f});
  f = m.op("MatMul", "mlp/fc2", {f, m.weight("mlp/w2", {16, 8})});
  const std::string r2 = m.op("Add", "res2", {r1, f});
  const std::string pooled = m.op("ReduceMean", "pool", {r2}, {{"axes", std::vector<std::int64_t>{1}}, {"keepdims", std::int64_t{0}}});
  m.op("MSELoss", "loss", {pooled, m.constant("target", random_f64({2, 8}, m.rng))}, {}, {"loss"});
  return m;
}

OptimizerConfig sgd(double lr, double momentum, double weight_decay = 0) {
  OptimizerConfig c;
  c.lr = lr;
  c.momentum = momentum;
  c.weight_decay = weight_decay;
  return c;
}

OptimizerConfig adam(double lr, double eps = 1e-8) {
  OptimizerConfig c;
  c.kind = OptimizerConfig::Kind::Adam;
  c.lr = lr;
  c.eps = eps;
  return c;
}

std::map<std::string, Tensor> feeds_for(ModelBuilder& m) {
  std::map<std::string, Tensor> f;
  for (const std::string& in : m.g.inputs()) f.emplace(in, random_f64(m.g.tensor(in).desc.shape, m.rng));
  return f;
}

TEST(Autodiff, MlpWithResidualMatchesFiniteDifferences) {
  ModelBuilder m = mlp();
  const auto feeds = feeds_for(m);
  EXPECT_EQ(testing::expect_gradients_match(m.g, "loss", feeds), 5u);
}

TEST(Autodiff, CnnMatchesFiniteDifferences) {
  ModelBuilder m = cnn();
  const auto feeds = feeds_for(m);
  EXPECT_EQ(testing::expect_gradients_match(m.g, "loss", feeds), 7u);
}

TEST(Autodiff, TransformerBlockMatchesFiniteDifferences) {
  ModelBuilder m = transformer_block();
  const auto feeds = feeds_for(m);
  EXPECT_EQ(testing::expect_gradients_match(m.g, "loss", feeds), 11u);
}

TEST(Autodiff, SeveralConsumersAccumulateWithAddOps) {
  ModelBuilder m = mlp();
  Graph g = m.g;
  append_backward(g, "loss");
  const Op* add = g.find_op("relu1/out/gradient/add1");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->type, "Add");
  EXPECT_EQ(add->direction, Direction::Backward);
  ASSERT_EQ(add->outputs.size(), 1u);
  EXPECT_EQ(add->outputs[0], "relu1/out/gradient");
  // the two partial contributions come from the backward ops of fc2 and res
  std::vector<std::string> producers;
  for (const std::string& in : add->inputs) producers.push_back(g.producer(in)->grad_of);
  std::sort(producers.begin(), producers.end());
  EXPECT_EQ(producers, (std::vector<std::string>{"fc2", "res"}));
  // a single consumer writes the gradient directly
  EXPECT_EQ(g.producer("act2/out/gradient")->grad_of, "res");
  EXPECT_EQ(g.find_op("act2/out/gradient/add1"), nullptr);
}

// An op without a gradient between a trainable weight and the loss: a piecewise-constant one
// (Floor) stops the gradient, the weight trains through its other path; a differentiable one
// without a gradient (DepthToSpace, a permutation) is an error naming it, not an untrained weight.
TEST(Autodiff, OnlyPiecewiseConstantOpsStopGradientsSilently) {
  auto build = [](const std::string& type, Attrs attrs) {
    ModelBuilder m("stop");
    const std::string w = m.weight("w", {1, 4, 2, 2});
    const std::string x = m.input("x", {1, 4, 2, 2});
    const std::string h = m.op("Mul", "mul", {x, w});
    const std::string s = m.op(type, "op", {h}, std::move(attrs));
    const std::string r = m.op("ReduceSum", "sum", {s}, {{"keepdims", std::int64_t{0}}});
    const std::string d = m.op("ReduceSum", "sum_h", {h}, {{"keepdims", std::int64_t{0}}});
    m.op("Add", "total", {r, d}, {}, {"loss"});
    return m.g;
  };
  Graph floor = build("Floor", {});
  EXPECT_NO_THROW(append_backward(floor, "loss"));
  EXPECT_NE(floor.find_tensor("w/gradient"), nullptr);
  Graph d2s = build("DepthToSpace", {{"blocksize", std::int64_t{2}}});
  try {
    append_backward(d2s, "loss");
    ADD_FAILURE() << "a gradient through DepthToSpace was dropped";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("op 'op' (DepthToSpace) is inference only"), std::string::npos) << e.what();
  }
}

TEST(Autodiff, GradientNamesSelectableByConvGlob) {
  ModelBuilder m = cnn();
  const Graph g = build_training_graph(m.g, "loss", sgd(0.01, 0.9));
  g.validate();
  std::set<std::string> names;
  for (const TensorInfo* t : g.select_tensors("conv*/gradient")) {
    names.insert(t->name);
    EXPECT_EQ(t->kind, TensorKind::Gradient) << t->name;
  }
  EXPECT_EQ(names, (std::set<std::string>{"conv1/bias/gradient", "conv1/out/gradient", "conv1/weight/gradient",
                                          "conv2/out/gradient", "conv2/weight/gradient"}));
  const Op* gi = g.find_op("conv2/grad/x");
  ASSERT_NE(gi, nullptr);
  EXPECT_EQ(gi->type, "ConvGradInput");
  EXPECT_EQ(gi->grad_of, "conv2");
  EXPECT_EQ(gi->direction, Direction::Backward);
  EXPECT_EQ(g.find_op("conv1/grad/x"), nullptr) << "the data input needs no gradient";
  for (const Op& op : g.ops())
    if (op.direction == Direction::Backward) {
      EXPECT_FALSE(op.grad_of.empty()) << op.name;
    }
  // optimizer: one update per weight, none for the constant BatchNorm statistics
  std::size_t updates = 0;
  for (const Op& op : g.ops()) {
    if (op.direction != Direction::Optimizer) continue;
    ++updates;
    EXPECT_EQ(op.type, "SgdUpdate");
    EXPECT_EQ(op.name, op.inputs[0] + "/update");
    EXPECT_EQ(op.outputs[0], updated_name(op.inputs[0]));
    EXPECT_EQ(g.tensor(op.inputs[2]).kind, TensorKind::State);
  }
  EXPECT_EQ(updates, 7u);
  EXPECT_EQ(g.find_op("bn1/mean/update"), nullptr);
  const auto& outs = g.outputs();
  EXPECT_NE(std::find(outs.begin(), outs.end(), "conv1/weight/updated"), outs.end());
  EXPECT_NE(std::find(outs.begin(), outs.end(), "conv1/weight/velocity/updated"), outs.end());
  EXPECT_NE(std::find(outs.begin(), outs.end(), "loss"), outs.end());
}

TEST(Autodiff, SgdStepWithMomentumAndWeightDecay) {
  ModelBuilder m = mlp();
  const auto feeds = feeds_for(m);
  Graph g = build_training_graph(m.g, "loss", sgd(0.1, 0.9, 0.01));
  g.initializers().at("fc1/weight/velocity") = random_f64({6, 8}, m.rng);
  const auto v = run_graph_reference(g, feeds, RefPrecision::F64);
  const auto p = v.at("fc1/weight").to_f64(), gr = v.at("fc1/weight/gradient").to_f64();
  const auto vel = v.at("fc1/weight/velocity").to_f64();
  const auto np = v.at("fc1/weight/updated").to_f64(), nv = v.at("fc1/weight/velocity/updated").to_f64();
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double want_v = 0.9 * vel[i] + gr[i] + 0.01 * p[i];
    EXPECT_NEAR(nv[i], want_v, 1e-12);
    EXPECT_NEAR(np[i], p[i] - 0.1 * want_v, 1e-12);
  }
}

TEST(Autodiff, AdamFirstStepMovesEachWeightByLr) {
  ModelBuilder m = mlp();
  const auto feeds = feeds_for(m);
  Graph g = build_training_graph(m.g, "loss", adam(0.01, 1e-12));
  const auto v = run_graph_reference(g, feeds, RefPrecision::F64);
  const auto p = v.at("head/weight").to_f64(), gr = v.at("head/weight/gradient").to_f64();
  const auto np = v.at("head/weight/updated").to_f64(), nm = v.at("head/weight/adam_m/updated").to_f64();
  const auto nv = v.at("head/weight/adam_v/updated").to_f64();
  for (std::size_t i = 0; i < p.size(); ++i) {
    // bias-corrected moments at step 1 are g and g^2, so the step is lr * sign(g)
    EXPECT_NEAR(np[i], p[i] - 0.01 * (gr[i] > 0 ? 1 : -1), 1e-9);
    EXPECT_NEAR(nm[i], 0.1 * gr[i], 1e-15);
    EXPECT_NEAR(nv[i], 0.001 * gr[i] * gr[i], 1e-15);
  }
  commit_training_step(g, v);
  EXPECT_EQ(g.find_op("head/weight/update")->attr_int("step"), 2);
}

TEST(Autodiff, TrainingStepsReduceTheLoss) {
  for (const auto kind : {OptimizerConfig::Kind::Sgd, OptimizerConfig::Kind::Adam}) {
    ModelBuilder m = transformer_block();
    const auto feeds = feeds_for(m);
    const OptimizerConfig cfg = kind == OptimizerConfig::Kind::Sgd ? sgd(0.2, 0.5) : adam(0.01);
    Graph g = build_training_graph(m.g, "loss", cfg);
    double first = 0, last = 0;
    for (int step = 0; step < 25; ++step) {
      const auto v = run_graph_reference(g, feeds, RefPrecision::F32);
      last = scalar(v.at("loss"));
      if (step == 0) first = last;
      EXPECT_EQ(commit_training_step(g, v), kind == OptimizerConfig::Kind::Sgd ? 22u : 33u);
    }
    EXPECT_LT(last, 0.5 * first) << "optimizer " << static_cast<int>(kind);
    EXPECT_EQ(g.initializers().at("mlp/w1").dtype(), DType::F64);
  }
}

TEST(Autodiff, BatchNormRunningStatisticsAreCommitted) {
  ModelBuilder m = cnn();
  const auto feeds = feeds_for(m);
  Graph g = build_training_graph(m.g, "loss", sgd(0.01, 0));
  const auto& outs = g.outputs();
  EXPECT_NE(std::find(outs.begin(), outs.end(), "bn1/running_mean"), outs.end());
  const std::vector<double> before = g.initializers().at("bn1/mean").to_f64();
  const auto v = run_graph_reference(g, feeds, RefPrecision::F64);
  EXPECT_EQ(commit_training_step(g, v), 7u + 2u);
  const std::vector<double> after = g.initializers().at("bn1/mean").to_f64();
  EXPECT_EQ(after, v.at("bn1/running_mean").to_f64());
  EXPECT_NE(after, before);
}

TEST(Autodiff, Fp32GradientsAgreeWithFp64) {
  ModelBuilder m = cnn();
  const auto feeds = feeds_for(m);
  Graph g = m.g;
  append_backward(g, "loss");
  const auto v64 = run_graph_reference(g, feeds, RefPrecision::F64);
  const auto v32 = run_graph_reference(g, feeds, RefPrecision::F32);
  for (const char* name : {"conv1/weight/gradient", "fc/weight/gradient", "bn1/scale/gradient"}) {
    EXPECT_EQ(v32.at(name).dtype(), DType::F32);
    const auto a = v32.at(name).to_f64(), b = v64.at(name).to_f64();
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 + 1e-4 * std::fabs(b[i])) << name << i;
  }
}

TEST(Autodiff, InputGradientsOnRequest) {
  ModelBuilder m = mlp();
  Graph g = m.g;
  BackwardOptions opts;
  opts.input_gradients = true;
  const auto grads = append_backward(g, "loss", opts);
  ASSERT_TRUE(grads.count("x"));
  EXPECT_EQ(grads.at("x"), "x/gradient");
  EXPECT_FALSE(grads.count("labels"));
  EXPECT_EQ(g.producer("x/gradient")->grad_of, "fc1");
}

}  // namespace
}  // namespace probelab::graph
