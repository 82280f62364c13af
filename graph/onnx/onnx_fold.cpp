// Folded ONNX inputs and import-time evaluation, see onnx_fold.h.
#include "graph/onnx/onnx_fold.h"

#include <algorithm>

#include "graph/onnx/onnx_import.h"
#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::onnx_detail {

const FoldRule* fold_rule(const std::string& op, std::int64_t opset) {
  // Later entries of the same op (higher opsets) win: the table is scanned from the end.
  static const std::vector<FoldRule> rules = {
      {"Reshape", 5, {{1, "shape"}}},
      {"Slice", 10, {{1, "starts"}, {2, "ends"}, {3, "axes"}, {4, "steps"}}},
      {"ReduceSum", 13, {{1, "axes"}}},
      {"ReduceMean", 18, {{1, "axes"}}},
      {"ReduceMax", 18, {{1, "axes"}}},
      {"ReduceMin", 18, {{1, "axes"}}},
      {"ReduceProd", 18, {{1, "axes"}}},
      {"ReduceSumSquare", 18, {{1, "axes"}}},
      {"ReduceL1", 18, {{1, "axes"}}},
      {"ReduceL2", 18, {{1, "axes"}}},
      {"ReduceLogSum", 18, {{1, "axes"}}},
      {"ReduceLogSumExp", 18, {{1, "axes"}}},
      {"Expand", 8, {{1, "shape"}}},
      {"Unsqueeze", 13, {{1, "axes"}}},
      {"Squeeze", 13, {{1, "axes"}}},
      {"Split", 13, {{1, "split"}}},
      {"Tile", 6, {{1, "repeats"}}},
      {"Pad", 11, {{1, "pads"}, {2, "value", true}}},
      {"Pad", 18, {{1, "pads"}, {2, "value", true}, {3, "axes"}}},
      {"Trilu", 14, {{1, "k", true}}},
      {"ConstantOfShape", 9, {{0, "shape"}}},
      {"Range", 11, {{0, "start", true}, {1, "limit", true}, {2, "delta", true}}},
      {"Dropout", 12, {{1, "ratio", true}, {2, "training_mode", true}}},
      {"Resize", 10, {{1, "scales"}}},
      {"Resize", 11, {{1, "roi"}, {2, "scales"}, {3, "sizes"}}},
      {"Upsample", 9, {{1, "scales"}}},
      {"CumSum", 11, {{1, "axis", true}}},
      {"TopK", 10, {{1, "k", true}}},
      {"OneHot", 9, {{1, "depth", true}}},
      {"If", 1, {{0, "cond", true}}},
  };
  for (auto it = rules.rbegin(); it != rules.rend(); ++it)
    if (op == it->op && opset >= it->min_opset) return &*it;
  return nullptr;
}

namespace {

const std::vector<MovedParam>& moved_params() {
  static const std::vector<MovedParam> params = [] {
    std::vector<MovedParam> v = {
        {"Clip", 11, 1, "min"},     {"Clip", 11, 2, "max"},     {"Reshape", 5, 1, "shape"},
        {"Slice", 10, 1, "starts"}, {"Slice", 10, 2, "ends"},   {"Slice", 10, 3, "axes"},
        {"ReduceSum", 13, 1, "axes"}, {"Unsqueeze", 13, 1, "axes"}, {"Squeeze", 13, 1, "axes"},
        {"Split", 13, 1, "split"},  {"Pad", 11, 1, "pads"},     {"Pad", 11, 2, "value"},
        {"Upsample", 9, 1, "scales"}, {"TopK", 10, 1, "k"},     {"Dropout", 12, 1, "ratio"},
    };
    for (const char* r : {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2",
                          "ReduceLogSum", "ReduceLogSumExp"})
      v.push_back({r, 18, 1, "axes"});
    return v;
  }();
  return params;
}

const MovedParam* moved_input(const std::string& op, std::size_t pos) {
  for (const MovedParam& m : moved_params())
    if (op == m.op && pos == m.pos) return &m;
  return nullptr;
}

}  // namespace

const MovedParam* moved_attribute(const std::string& op, const std::string& attr) {
  for (const MovedParam& m : moved_params())
    if (op == m.op && attr == m.name) return &m;
  return nullptr;
}

std::optional<InputSince> input_since(const std::string& op, std::size_t pos) {
  for (std::int64_t opset = 1; opset <= kMaxOnnxOpset; ++opset)
    if (const FoldRule* r = fold_rule(op, opset); r && r->min_opset == opset)
      for (const FoldInput& f : r->inputs)
        if (f.pos == pos) return InputSince{opset, f.attr};
  if (const MovedParam* m = moved_input(op, pos)) return InputSince{m->opset, m->name};
  return std::nullopt;
}

void check_input_opsets(const Op& op, std::int64_t opset, const std::string& where) {
  for (std::size_t pos = op.inputs.size(); pos-- > 0;) {
    if (op.inputs[pos].empty()) continue;
    const auto since = input_since(op.type, pos);
    if (!since || opset >= since->opset) continue;
    std::size_t allowed = 0;  // inputs the op takes at the model's opset
    while (allowed < pos && !(input_since(op.type, allowed) && opset < input_since(op.type, allowed)->opset)) ++allowed;
    const MovedParam* m = moved_input(op.type, pos);
    throw GraphError(fmt::format("{}: has {} inputs, but at the model's opset {} {} takes {}: input {} ('{}') is an "
                                 "input of {} from opset {} on{}",
                                 where, op.inputs.size(), opset, op.type, allowed, pos, since->what, op.type,
                                 since->opset,
                                 m && opset < m->opset ? fmt::format(" (at opset {}, the attribute '{}')", opset, m->name)
                                                       : std::string()));
  }
  for (const auto& [attr, value] : op.attrs)
    if (const MovedParam* m = moved_attribute(op.type, attr); m && opset >= m->opset)
      throw GraphError(fmt::format("{}: has the attribute '{}', but at the model's opset {} {} takes {} as input {} "
                                   "(an attribute of {} before opset {})",
                                   where, attr, opset, op.type, m->name, m->pos, op.type, m->opset));
}

bool is_folded(const FoldRule* rule, std::size_t pos) {
  return rule && std::any_of(rule->inputs.begin(), rule->inputs.end(), [&](const FoldInput& f) { return f.pos == pos; });
}

AttrValue folded_attr(const Tensor& t, bool scalar) {
  const AttrValue list = ops::tensor_to_attr(t);
  if (!scalar) return list;
  if (t.numel() != 1) throw GraphError(fmt::format("holds {} values, expected one", t.numel()));
  if (const auto* i = std::get_if<std::vector<std::int64_t>>(&list)) return (*i)[0];
  return std::get<std::vector<double>>(list)[0];
}

std::optional<std::vector<Tensor>> evaluate_node(const Op& op, const std::vector<const Tensor*>& values,
                                                 const std::vector<TensorDesc>& descs) {
  const OpDef& def = OpRegistry::instance().get(op.type);
  if (!def.reference || !def.infer) return std::nullopt;
  std::vector<Tensor> placeholders(values.size());
  std::vector<const Tensor*> in(values.size(), nullptr);
  bool f64 = false;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (op.inputs[i].empty()) continue;
    if (values[i]) {
      in[i] = values[i];
    } else if (def.shape_only) {
      placeholders[i] = Tensor(descs[i]);  // the value is never read
      in[i] = &placeholders[i];
    } else {
      return std::nullopt;
    }
    f64 = f64 || in[i]->dtype() == DType::F64;
  }
  const std::vector<TensorDesc> out_descs = def.infer(op, descs);
  std::vector<Tensor> out = run_reference(op, in, f64 ? RefPrecision::F64 : RefPrecision::F32);
  for (std::size_t i = 0; i < out.size() && i < out_descs.size(); ++i)
    if (out[i].dtype() != out_descs[i].dtype) {
      const std::vector<double> v = out[i].to_f64();
      out[i] = Tensor::from_f64(out_descs[i].shape, v, out_descs[i].dtype);
    }
  return out;
}

}  // namespace probelab::graph::onnx_detail
