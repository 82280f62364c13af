// Graph construction, topological order, selection and validation.
#include <gtest/gtest.h>

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace probelab::graph {
namespace {

TensorDesc f32(Shape s) { return {DType::F32, std::move(s), Format::ND}; }

Op make(std::string name, std::string type, std::vector<std::string> in, std::vector<std::string> out) {
  Op op;
  op.name = std::move(name);
  op.type = std::move(type);
  op.scope = "model/" + op.name;
  op.inputs = std::move(in);
  op.outputs = std::move(out);
  return op;
}

// x -> relu -> a ; a + x -> b ; relu(b) -> y
Graph small_graph() {
  Graph g("small");
  g.add_tensor({"x", f32({2, 3}), TensorKind::Input});
  g.mark_input("x");
  g.add_op(make("relu1", "Relu", {"x"}, {"a"}));
  g.add_op(make("add1", "Add", {"a", "x"}, {"b"}));
  g.add_op(make("relu2", "Relu", {"b"}, {"y"}));
  g.mark_output("y");
  return g;
}

std::string error_of(const Graph& g) {
  try {
    g.validate();
  } catch (const GraphError& e) {
    return e.what();
  }
  return "";
}

TEST(Graph, AddOpInfersOutputDescsAndKinds) {
  Graph g = small_graph();
  EXPECT_EQ(g.tensor("a").desc, f32({2, 3}));
  EXPECT_EQ(g.tensor("a").kind, TensorKind::Activation);
  EXPECT_EQ(g.tensor("y").kind, TensorKind::Output);
  EXPECT_EQ(g.tensor("x").kind, TensorKind::Input);
  EXPECT_EQ(g.op(1).id, 1u);
  EXPECT_EQ(g.find_op("add1")->type, "Add");
  EXPECT_EQ(g.find_op("nope"), nullptr);
  EXPECT_NO_THROW(g.validate());
}

TEST(Graph, ProducerAndConsumers) {
  Graph g = small_graph();
  EXPECT_EQ(g.producer("b")->name, "add1");
  EXPECT_EQ(g.producer("x"), nullptr);
  auto c = g.consumers("x");
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0]->name, "relu1");
  EXPECT_EQ(c[1]->name, "add1");
  EXPECT_TRUE(g.consumers("y").empty());
}

TEST(Graph, DuplicateNamesAreRejected) {
  Graph g = small_graph();
  EXPECT_THROW(g.add_tensor({"x", f32({1}), TensorKind::Input}), GraphError);
  try {
    g.add_op(make("relu1", "Relu", {"y"}, {"z"}));
    FAIL();
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("duplicate op name 'relu1'"), std::string::npos) << e.what();
  }
  try {
    g.add_op(make("relu3", "Relu", {"y"}, {"b"}));
    FAIL();
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("'relu3' writes tensor 'b', already produced by op 'add1'"),
              std::string::npos)
        << e.what();
  }
}

TEST(Graph, TopoOrderIsDeterministicAndRespectsDependencies) {
  Graph g("order");
  g.add_tensor({"x", f32({4}), TensorKind::Input});
  g.mark_input("x");
  // inserted out of dependency order: c reads b's output, b reads a's output
  g.add_op(make("c", "Relu", {"tb"}, {"tc"}));
  g.add_op(make("b", "Relu", {"ta"}, {"tb"}));
  g.add_op(make("a", "Relu", {"x"}, {"ta"}));
  g.add_op(make("d", "Relu", {"x"}, {"td"}));
  const auto order = g.topo_order();
  std::vector<std::string> names;
  for (auto id : order) names.push_back(g.op(id).name);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c", "d"}));
  g.infer_shapes();
  EXPECT_EQ(g.tensor("tc").desc, f32({4}));
}

TEST(Graph, CycleErrorNamesTheOps) {
  Graph g("cyc");
  g.add_tensor({"x", f32({4}), TensorKind::Input});
  g.mark_input("x");
  g.add_op(make("pre", "Relu", {"x"}, {"p"}));
  g.add_op(make("first", "Add", {"p", "t3"}, {"t1"}));
  g.add_op(make("second", "Relu", {"t1"}, {"t2"}));
  g.add_op(make("third", "Relu", {"t2"}, {"t3"}));
  try {
    g.topo_order();
    FAIL() << "no cycle detected";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("cycle through ops first -> second -> third -> first"), std::string::npos)
        << e.what();
  }
  EXPECT_NE(error_of(g).find("cycle"), std::string::npos);
}

TEST(Graph, SelfLoopIsACycle) {
  Graph g("self");
  g.add_tensor({"x", f32({4}), TensorKind::Input});
  g.mark_input("x");
  g.add_op(make("loop", "Add", {"x", "s"}, {"s"}));
  EXPECT_NE(error_of(g).find("loop -> loop"), std::string::npos) << error_of(g);
}

TEST(Validate, DanglingInputNamesTheOp) {
  Graph g = small_graph();
  g.add_op(make("late", "Add", {"y", "ghost"}, {"z"}));
  EXPECT_NE(error_of(g).find("op 'late' (Add) input 1 'ghost' is not a declared tensor"), std::string::npos)
      << error_of(g);
}

TEST(Validate, DeclaredButUnproducedActivationIsDangling) {
  Graph g = small_graph();
  g.add_tensor({"orphan", f32({2, 3}), TensorKind::Activation});
  g.add_op(make("late", "Add", {"y", "orphan"}, {"z"}));
  EXPECT_NE(error_of(g).find("'orphan' is dangling"), std::string::npos) << error_of(g);
}

TEST(Validate, UnknownTypeListsKnownTypes) {
  Graph g = small_graph();
  g.add_op(make("weird", "Frobnicate", {"y"}, {"z"}));
  const std::string e = error_of(g);
  EXPECT_NE(e.find("op 'weird' (Frobnicate) has unknown op type 'Frobnicate'"), std::string::npos) << e;
  EXPECT_NE(e.find("Relu"), std::string::npos) << e;
}

TEST(Validate, ShapeMismatchNamesTheOp) {
  Graph g("mm");
  g.add_tensor({"a", f32({2, 3}), TensorKind::Input});
  g.add_tensor({"b", f32({4, 5}), TensorKind::Input});
  g.mark_input("a");
  g.mark_input("b");
  try {
    g.add_op(make("matmul1", "MatMul", {"a", "b"}, {"c"}));
    FAIL() << "inference accepted [2,3] @ [4,5]";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("matmul1"), std::string::npos) << e.what();
  }
}

TEST(Validate, DeclaredDescDisagreeingWithInferenceIsReported) {
  Graph g = small_graph();
  g.tensor("b").desc = f32({3, 2});
  const std::string e = error_of(g);
  EXPECT_NE(e.find("op 'add1' (Add) output 0 'b' is declared float32[3, 2] ND but shape inference gives "
                   "float32[2, 3] ND"),
            std::string::npos)
      << e;
}

TEST(Validate, DtypeMismatchNamesTheOp) {
  Graph g("dt");
  g.add_tensor({"a", f32({2}), TensorKind::Input});
  g.add_tensor({"b", {DType::F16, {2}, Format::ND}, TensorKind::Input});
  g.mark_input("a");
  g.mark_input("b");
  Op add = make("mixed", "Add", {"a", "b"}, {"c"});
  EXPECT_THROW(
      {
        try {
          g.add_op(add);
        } catch (const GraphError& e) {
          EXPECT_NE(std::string(e.what()).find("mixed"), std::string::npos) << e.what();
          throw;
        }
      },
      GraphError);
}

TEST(Validate, MissingRequiredAttributeNamesOpAndKey) {
  const OpDef* expand = OpRegistry::instance().find("Expand");
  ASSERT_NE(expand, nullptr);
  Graph g("attrs");
  g.add_tensor({"x", f32({1, 3}), TensorKind::Input});
  g.mark_input("x");
  Op op = make("expand1", "Expand", {"x"}, {"y"});
  op.attrs["shape"] = std::vector<std::int64_t>{2, 3};
  g.add_op(op);
  g.mark_output("y");
  EXPECT_EQ(g.tensor("y").desc, f32({2, 3}));
  EXPECT_EQ(error_of(g), "");
  // caught at add_op ...
  Graph h("attrs2");
  h.add_tensor({"x", f32({1, 3}), TensorKind::Input});
  h.mark_input("x");
  try {
    h.add_op(make("expand1", "Expand", {"x"}, {"y"}));
    FAIL();
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("graph 'attrs2': op 'expand1' (Expand) is missing required attribute 'shape'"),
              std::string::npos)
        << e.what();
  }
  // ... and by validate() after an in-place edit
  g.ops()[0].attrs.erase("shape");
  EXPECT_NE(error_of(g).find("op 'expand1' (Expand) is missing required attribute 'shape'"), std::string::npos)
      << error_of(g);
}

TEST(Validate, UnknownAndMistypedAttributes) {
  Graph g = small_graph();
  g.ops()[0].attrs["bogus"] = std::int64_t{1};
  EXPECT_NE(error_of(g).find("op 'relu1' (Relu) has unknown attribute 'bogus'"), std::string::npos) << error_of(g);
  Graph h = small_graph();
  h.add_op(make("gelu1", "Gelu", {"y"}, {"z"})).attrs["approximate"] = std::int64_t{3};
  EXPECT_NE(error_of(h).find("op 'gelu1' (Gelu) attribute 'approximate' has type int, expected string"),
            std::string::npos)
      << error_of(h);
}

TEST(Validate, WrongInputCount) {
  Graph g = small_graph();
  try {
    g.add_op(make("add2", "Add", {"y"}, {"z"}));
    FAIL();
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("op 'add2' (Add) has 1 inputs, expected 2"), std::string::npos) << e.what();
  }
  g.ops()[1].inputs.pop_back();
  EXPECT_NE(error_of(g).find("op 'add1' (Add) has 1 inputs, expected 2"), std::string::npos) << error_of(g);
}

TEST(Validate, DanglingGraphOutput) {
  Graph g = small_graph();
  g.mark_output("never");
  EXPECT_NE(error_of(g).find("graph output 'never' is not declared"), std::string::npos) << error_of(g);
}

TEST(Validate, InitializerMustMatchDeclaration) {
  Graph g("init");
  g.add_tensor({"w", f32({2, 2}), TensorKind::Weight});
  const std::vector<float> v{1, 2, 3};
  EXPECT_THROW(g.add_initializer("w", Tensor::from_f32({3}, v)), GraphError);
  g.add_initializer("w2", Tensor::from_f32({3}, v));
  EXPECT_EQ(g.tensor("w2").kind, TensorKind::Weight);
  EXPECT_THROW(g.add_initializer("w2", Tensor::from_f32({3}, v)), GraphError);
}

TEST(Graph, ReindexAfterInPlaceEdit) {
  Graph g = small_graph();
  g.ops().erase(g.ops().begin() + 2);  // drop relu2
  EXPECT_NE(error_of(g).find("ops() was edited without reindex()"), std::string::npos) << error_of(g);
  g.reindex();
  EXPECT_EQ(g.producer("y"), nullptr);
  EXPECT_NE(error_of(g).find("graph output 'y' is dangling"), std::string::npos) << error_of(g);
}

}  // namespace
}  // namespace probelab::graph
