// The YAML model format: good files, bad files with file/line/key in the message, initialisers.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "graph/init.h"
#include "numerics/mt19937.h"
#include "numerics/normal.h"
#include "graph/model_yaml.h"
#include "graph/npy.h"

namespace probelab::graph {
namespace {

namespace fs = std::filesystem;

class ModelYaml : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("probelab_yaml_" + std::to_string(::getpid()) + "_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = (dir_ / name).string();
    std::ofstream(p) << text;
    return p;
  }
  // Loads `text` from a file and returns the error message ("" when it loads).
  std::string error(const std::string& text) const {
    const std::string p = write("bad.yaml", text);
    try {
      load_model_yaml(p);
    } catch (const GraphError& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

const char* kGood = R"Y(name: tiny
seed: 5
inputs:
  - {name: x, shape: [2, 4]}
  - {name: labels, shape: [2], dtype: int64, init: "randint(0, 3)"}
weights:
  - {name: shared, shape: [4, 4], init: "uniform(-1, 1)", seed: 42}
ops:
  - name: fc
    type: MatMul
    weights: {weight: {shape: [4, 3], init: xavier}}
    debug: {sample_rate: 0.25}
  - {type: Add, weights: {b: [3]}, attrs: {}}
  - {name: act, type: Relu, outputs: [h], scope: tiny/block/act, debug: {capture: false}}
  - {name: proj, type: MatMul, inputs: [x, shared]}
  - {name: loss, type: CrossEntropyLoss, inputs: [h, labels], attrs: {reduction: mean}}
outputs: [loss, proj]
)Y";

TEST_F(ModelYaml, LoadsAGoodModel) {
  const ModelFile m = load_model_yaml(write("tiny.yaml", kGood));
  const Graph& g = m.graph;
  EXPECT_EQ(g.name(), "tiny");
  EXPECT_EQ(m.seed, 5u);
  EXPECT_EQ(g.inputs(), (std::vector<std::string>{"x", "labels"}));
  EXPECT_EQ(g.outputs(), (std::vector<std::string>{"loss", "proj"}));
  ASSERT_EQ(g.ops().size(), 5u);
  const Op& fc = g.ops()[0];
  EXPECT_EQ(fc.inputs, (std::vector<std::string>{"x", "fc/weight"}));
  EXPECT_EQ(fc.outputs, (std::vector<std::string>{"fc"}));
  EXPECT_EQ(fc.scope, "tiny/fc");
  EXPECT_EQ(fc.debug.sample_rate, 0.25);
  const Op& add = g.ops()[1];
  EXPECT_EQ(add.name, "add1");  // auto-named
  EXPECT_EQ(add.inputs, (std::vector<std::string>{"fc", "add1/b"}));
  EXPECT_EQ(g.ops()[2].inputs, (std::vector<std::string>{"add1"}));
  EXPECT_EQ(g.ops()[2].scope, "tiny/block/act");
  EXPECT_FALSE(g.ops()[2].debug.capture);
  EXPECT_EQ(g.ops()[4].attr_str("reduction"), "mean");
  EXPECT_EQ(g.tensor("h").desc.shape, (Shape{2, 3}));
  EXPECT_EQ(g.tensor("fc/weight").kind, TensorKind::Weight);
  EXPECT_EQ(g.tensor("add1/b").desc.shape, (Shape{3}));
  // initialisers: explicit seed is honoured, bias defaults to zeros, values in range
  const auto shared = g.initializers().at("shared").to_f32();
  EXPECT_EQ(g.initializers().at("shared"), make_init(parse_init("uniform(-1, 1)"), {DType::F32, {4, 4}}, 42));
  for (float v : shared) EXPECT_TRUE(v >= -1.0f && v < 1.0f);
  for (float v : g.initializers().at("add1/b").to_f32()) EXPECT_EQ(v, 0.0f);
  const float lim = std::sqrt(6.0f / 7.0f);
  for (float v : g.initializers().at("fc/weight").to_f32()) EXPECT_LE(std::fabs(v), lim);
  // the same file loads to the same bytes
  EXPECT_EQ(load_model_yaml(write("tiny2.yaml", kGood)).graph.initializers().at("fc/weight"),
            g.initializers().at("fc/weight"));
  // feeds follow the input inits
  const auto feeds = make_feeds(m, 1);
  for (std::int64_t l : feeds.at("labels").data<std::int64_t>()) EXPECT_TRUE(l >= 0 && l < 3);
  EXPECT_EQ(feeds.at("x").shape(), (Shape{2, 4}));
  EXPECT_EQ(make_feeds(m, 1).at("x"), feeds.at("x"));
  EXPECT_NE(make_feeds(m, 2).at("x"), feeds.at("x"));
}

TEST_F(ModelYaml, NpyWeightFilesRelativeToTheModel) {
  fs::create_directories(dir_ / "w");
  std::vector<float> v{1, 2, 3, 4, 5, 6};
  write_npy((dir_ / "w" / "fc.npy").string(), Tensor::from_f32({2, 3}, v));
  const std::string model = R"Y(name: npy
inputs: [{name: x, shape: [1, 2]}]
ops:
  - {name: fc, type: MatMul, weights: {weight: {file: w/fc.npy, trainable: false}}}
)Y";
  const ModelFile m = load_model_yaml(write("m.yaml", model));
  EXPECT_EQ(m.graph.initializers().at("fc/weight").to_f32(), v);
  EXPECT_EQ(m.graph.tensor("fc/weight").kind, TensorKind::Constant);
  EXPECT_EQ(m.graph.outputs(), (std::vector<std::string>{"fc"}));
  std::string e = error(R"Y(name: npy
inputs: [{name: x, shape: [1, 2]}]
ops:
  - {name: fc, type: MatMul, weights: {weight: {file: w/fc.npy, shape: [3, 2]}}}
)Y");
  EXPECT_NE(e.find("bad.yaml:4:"), std::string::npos) << e;
  EXPECT_NE(e.find("shape: "), std::string::npos) << e;
  EXPECT_NE(e.find("holds [2, 3], not [3, 2]"), std::string::npos) << e;
  e = error(R"Y(name: npy
inputs: [{name: x, shape: [1, 2]}]
ops:
  - {name: fc, type: MatMul, weights: {weight: {file: w/missing.npy}}}
)Y");
  EXPECT_NE(e.find("bad.yaml:4:"), std::string::npos) << e;
  EXPECT_NE(e.find("missing.npy: cannot open"), std::string::npos) << e;
}

struct BadCase {
  const char* text;
  const char* where;     // "bad.yaml:<line>:"
  const char* message;
};

TEST_F(ModelYaml, BadFilesNameFileLineAndKey) {
  const BadCase cases[] = {
      {"name: m\nops:\n  - {type: Relu}\nextra: 1\n", "bad.yaml:4:1", "extra: unknown key in model"},
      {"name: m\ninputs: [{name: x, shape: [2]}]\nops:\n  - {type: Relu, colour: red}\n", "bad.yaml:4:",
       "colour: unknown key in op"},
      {"name: m\ninputs: [{name: x, shape: [2]}]\nops:\n  - {type: Frob}\n", "bad.yaml:4:",
       "type: unknown op type 'Frob'"},
      {"name: m\ninputs: [{name: x, shape: [2], dtype: float128}]\nops: [{type: Relu}]\n", "bad.yaml:2:",
       "dtype: unknown dtype 'float128' (expected float32, float16, bfloat16, int32, int64, bool, float64, int8, uint8)"},
      {"name: m\ninputs: [{name: x}]\nops: [{type: Relu}]\n", "bad.yaml:2:", "input: needs a shape"},
      {"name: m\ninputs: [{name: x, shape: [2, -1]}]\nops: [{type: Relu}]\n", "bad.yaml:2:",
       "shape: dimensions must be >= 0"},
      {"name: m\ninputs: [{name: x, shape: [2]}]\nops:\n  - {type: Add, inputs: [x, y]}\n", "bad.yaml:4:",
       "inputs: op 'add1' reads 'y', which is not an input"},
      {"name: m\ninputs: [{name: x, shape: [2]}]\nops:\n  - {type: Relu, weights: {w: {shape: [2], init: "
       "gaussian}}}\n",
       "bad.yaml:4:", "init: init 'gaussian': unknown initialiser 'gaussian'"},
      {"name: m\ninputs: [{name: x, shape: [2]}]\nops:\n  - {type: Relu, debug: {sample_rate: 1.5}}\n",
       "bad.yaml:4:", "sample_rate: expected a rate in (0, 1]"},
      {"name: m\ninputs: [{name: x, shape: [2]}]\nops:\n  - {name: a, type: Relu}\n  - {name: a, type: Relu}\n",
       "bad.yaml:5:", "duplicate op name 'a'"},
      {"name: m\ninputs: [{name: x, shape: [2, 3]}]\nops:\n  - {name: t, type: Transpose, attrs: {perm: 3}}\n",
       "bad.yaml:4:", "attribute 'perm' has type int, expected int list"},
      {"name: m\ninputs: [{name: x, shape: [2, 3]}]\nops:\n  - {name: r, type: Relu, attrs: {alpha: 1}}\n",
       "bad.yaml:4:", "op 'r' (Relu) has unknown attribute 'alpha'"},
      {"name: m\ninputs: [{name: x, shape: [2, 3]}]\nops:\n  - {name: mm, type: MatMul, weights: {w: [2, 3]}}\n",
       "bad.yaml:4:", "mm"},
      {"name: m\ninputs: [{name: x, shape: [2]}]\nops: [{type: Relu}]\noutputs: [nothing]\n", "bad.yaml:4:",
       "outputs: no tensor named 'nothing'"},
      {"name: m\ninputs: [{name: x, shape: [2]}]\nops: []\n", "bad.yaml:3:", "ops: expected a non-empty list"},
      {"inputs: [{name: x, shape: [2]}]\nops: [{type: Relu}]\n", "bad.yaml:1:1", "name: a model needs a name"},
      {"name: m\nseed: abc\nops: [{type: Relu}]\n", "bad.yaml:2:", "seed: expected an integer, got 'abc'"},
      {"name: m\nops: [{type: Relu}\n", "bad.yaml:", "YAML syntax error"},
      {"name: m\ninputs: [{name: x, shape: [2]}]\nops:\n  - {type: Relu, weights: {w: {init: ones}}}\n",
       "bad.yaml:4:", "weight 'relu1/w' needs a shape"},
      {"name: m\ninputs: [{name: x, shape: [2], init: uniform(0, 1)}]\nops: [{type: Relu}]\n", "bad.yaml:2:",
       "must be quoted"},
  };
  for (const BadCase& c : cases) {
    const std::string e = error(c.text);
    EXPECT_NE(e.find(c.where), std::string::npos) << "text:\n" << c.text << "\nerror: " << e;
    EXPECT_NE(e.find(c.message), std::string::npos) << "text:\n" << c.text << "\nerror: " << e;
  }
  EXPECT_NE(error("").find("a model file is a mapping"), std::string::npos) << error("");
  try {
    load_model_yaml((dir_ / "absent.yaml").string());
    FAIL();
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("absent.yaml: cannot open model file"), std::string::npos);
  }
}

TEST(Init, NormalIsTheCosineOfOneBoxMullerPairPerValue) {
  // The definition, one value at a time: u1 drawn again while 0, then u2; the cosine side, then
  // mean + std * it rounded to FP32. Lengths around the vector width and the 256-pair chunks.
  for (const std::int64_t n : {1, 3, 4, 5, 255, 256, 257, 600}) {
    const Tensor t = make_init(parse_init("normal(0.5, 2)"), {DType::F32, {n}, Format::ND}, 77 + n);
    num::Mt19937_64 ref(static_cast<std::uint64_t>(77 + n));
    const std::vector<float> got = t.to_f32();
    for (std::int64_t i = 0; i < n; ++i) {
      double u1[1], u2[1], c[1], s[1];
      do u1[0] = num::unit_interval(ref());
      while (u1[0] <= 0.0);
      u2[0] = num::unit_interval(ref());
      num::box_muller(u1, u2, 0.0, 1.0, c, s);
      EXPECT_EQ(got[static_cast<std::size_t>(i)], static_cast<float>(0.5 + 2.0 * c[0])) << n << " " << i;
    }
  }
}

TEST(Init, ParsingAndDeterminism) {
  EXPECT_EQ(init_str(parse_init("normal(0.02)")), "normal(0, 0.02)");
  EXPECT_EQ(init_str(parse_init(" uniform( -1 , 2 ) ")), "uniform(-1, 2)");
  EXPECT_EQ(parse_init("kaiming").kind, InitSpec::Kind::Kaiming);
  EXPECT_THROW(parse_init("normal"), GraphError);
  EXPECT_THROW(parse_init("uniform(1, 0)"), GraphError);
  EXPECT_THROW(parse_init("constant(x)"), GraphError);
  EXPECT_THROW(parse_init("zeros(1)"), GraphError);
  const TensorDesc d{DType::F32, {64, 32}, Format::ND};
  const Tensor a = make_init(parse_init("kaiming"), d, 3);
  EXPECT_EQ(a, make_init(parse_init("kaiming"), d, 3));
  EXPECT_NE(a, make_init(parse_init("kaiming"), d, 4));
  // kaiming std = sqrt(2 / fan_in), fan_in = 64
  double sum = 0, sq = 0;
  for (float v : a.to_f32()) {
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  const double n = 64.0 * 32.0, mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(sd, std::sqrt(2.0 / 64.0), 0.01);
  const Tensor h = make_init(parse_init("arange"), {DType::F16, {3}, Format::ND}, 0);
  EXPECT_EQ(h.to_f32(), (std::vector<float>{0, 1, 2}));
  EXPECT_NE(derive_seed(1, "a"), derive_seed(1, "b"));
  EXPECT_NE(derive_seed(1, "a"), derive_seed(2, "a"));
}

}  // namespace
}  // namespace probelab::graph
