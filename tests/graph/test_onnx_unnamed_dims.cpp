// ONNX import: graph-input dimensions with neither a size nor a name, bound as "INPUT:AXIS".
#include <gtest/gtest.h>

#include "graph/onnx/onnx_import.h"

namespace probelab::graph {
namespace {

const std::string kModel = std::string(PROBELAB_SOURCE_DIR) + "/tests/graph/data/onnx_import/unnamed_dim.onnx";

std::string import_error(const std::map<std::string, std::int64_t>& dims) {
  OnnxImportOptions o;
  o.dim_params = dims;
  try {
    import_onnx(kModel, o);
  } catch (const GraphError& e) {
    return e.what();
  }
  return "no error";
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(OnnxUnnamedDims, InputAxisKeysBindThem) {
  OnnxImportOptions o;
  o.dim_params = {{"x:0", 2}, {"t:0:0", 5}, {"batch", 4}};  // "t:0" is an input name, split at the last ':'
  const Graph g = import_onnx(kModel, o);
  EXPECT_EQ(g.tensor("x").desc.shape, (Shape{2, 3}));
  EXPECT_EQ(g.tensor("t:0").desc.shape, (Shape{5, 4}));
  EXPECT_EQ(g.tensor("y").desc.shape, (Shape{2, 3}));
  o.dim_params["x:1"] = 3;  // a fixed axis may be bound to its own size
  EXPECT_EQ(import_onnx(kModel, o).tensor("x").desc.shape, (Shape{2, 3}));
}

TEST(OnnxUnnamedDims, AnUnboundAxisSaysHowToBindIt) {
  const std::string e = import_error({{"t:0:0", 5}, {"batch", 4}});
  EXPECT_HAS(e, "graph input 'x': dimension 0 has neither a size nor a name; bind it as axis 0 of input 'x'");
  EXPECT_HAS(e, "dims: {\"x:0\": N}");
  EXPECT_HAS(e, "--dims x:0=N");
}

TEST(OnnxUnnamedDims, WrongBindingsAreNamed) {
  const std::map<std::string, std::int64_t> ok{{"x:0", 2}, {"t:0:0", 5}, {"batch", 4}};
  auto with = [&](const std::string& k, std::int64_t v) {
    auto d = ok;
    d[k] = v;
    return import_error(d);
  };
  EXPECT_HAS(with("q:0", 2), "dimension 'q:0' is not a symbolic dimension of the model (it has: batch) nor INPUT:AXIS "
                             "of a graph input (inputs: x, t:0)");
  EXPECT_HAS(with("x:2", 2), "dimension 'x:2' (axis 2 of input 'x'): the input has rank 2, so the axis must be in [0, 2)");
  EXPECT_HAS(with("x:1", 4), "dimension 'x:1' (axis 1 of input 'x'): that axis has the fixed size 3, the binding gives 4");
  EXPECT_HAS(with("t:0:1", 4), "dimension 't:0:1' (axis 1 of input 't:0'): that axis is the symbolic dimension 'batch'; "
                               "bind it by name");
  EXPECT_HAS(with("x:0", 0), "dimension 'x:0' = 0 must be >= 1");
}

}  // namespace
}  // namespace probelab::graph
