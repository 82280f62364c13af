// Rebuilding a graph from a list of ops, shared by the passes.
#include <set>

#include "graph/passes.h"

namespace probelab::graph {

Graph rebuild_graph(const Graph& src, std::vector<Op> ops, const std::map<std::string, Tensor>& extra) {
  Graph out(src.name());
  std::set<std::string> used(src.inputs().begin(), src.inputs().end());
  used.insert(src.outputs().begin(), src.outputs().end());
  for (const Op& op : ops) {
    for (const std::string& t : op.inputs)
      if (!t.empty()) used.insert(t);
    used.insert(op.outputs.begin(), op.outputs.end());
  }
  for (const std::string& name : used) {
    if (auto it = extra.find(name); it != extra.end()) {
      out.add_initializer(name, it->second, TensorKind::Constant);
      continue;
    }
    const TensorInfo* info = src.find_tensor(name);
    if (auto it = src.initializers().find(name); it != src.initializers().end())
      out.add_initializer(name, it->second, info ? info->kind : TensorKind::Constant);
    else if (info)
      out.add_tensor(*info);
    // undeclared names stay undeclared: validate() reports them
  }
  for (const std::string& in : src.inputs())
    if (out.find_tensor(in)) out.mark_input(in);
  for (Op& op : ops) out.add_op(std::move(op));
  for (const std::string& o : src.outputs()) out.mark_output(o);
  return out;
}

}  // namespace probelab::graph
