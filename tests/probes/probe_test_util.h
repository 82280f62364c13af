// Shared helpers of the probe runtime tests: small graphs and a minimal host executor that drives
// ProbeRuntime against FakeDevice the way sim/'s executor does (see probes/probe_runtime.h).
#pragma once

#include <unistd.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "chip_model/spec/op_args.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "probes/fake_device.h"
#include "probes/probe_runtime.h"

namespace probe_test {

namespace graph = probelab::graph;
namespace probes = probelab::probes;
namespace spec = probelab::spec;

/// Collectives are built-in ops (graph/ops/collective.cpp); the single-rank values of this
/// helper's runs treat an AllReduce as the identity (see MiniExecutor::place_step).
inline void ensure_allreduce() {}

inline graph::Tensor f16(const graph::Shape& shape, std::vector<float> v) {
  return graph::Tensor::from_f32(shape, v, graph::DType::F16);
}

inline std::vector<float> ramp(std::size_t n, float scale = 0.1f, float offset = 0.0f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<float>((i * 7) % 11) - scale * 5;
  return v;
}

inline graph::Op make_op(std::string name, std::string type, std::vector<std::string> in, std::vector<std::string> out,
                         std::string scope = "") {
  graph::Op o;
  o.name = std::move(name);
  o.type = std::move(type);
  o.inputs = std::move(in);
  o.outputs = std::move(out);
  o.scope = scope.empty() ? "model/" + o.name : std::move(scope);
  return o;
}

/// x[2,8] -> fc1 (MatMul w1) -> add1 (+ b1) -> relu1 -> fc2 (MatMul w2) -> softmax -> probs, FP16.
inline graph::Graph mlp() {
  graph::Graph g("mlp");
  g.add_tensor({"x", {graph::DType::F16, {2, 8}, graph::Format::ND}, graph::TensorKind::Input});
  g.mark_input("x");
  g.add_initializer("w1", f16({8, 8}, ramp(64, 0.05f)));
  g.add_initializer("b1", f16({8}, ramp(8, 0.01f)));
  g.add_initializer("w2", f16({8, 4}, ramp(32, 0.05f, 0.01f)));
  g.add_op(make_op("fc1", "MatMul", {"x", "w1"}, {"fc1:0"}, "model/layer1/fc1"));
  g.add_op(make_op("add1", "Add", {"fc1:0", "b1"}, {"add1:0"}, "model/layer1/add1"));
  g.add_op(make_op("relu1", "Relu", {"add1:0"}, {"relu1:0"}, "model/layer1/relu1"));
  g.add_op(make_op("fc2", "MatMul", {"relu1:0", "w2"}, {"fc2:0"}, "model/layer2/fc2"));
  g.add_op(make_op("softmax", "Softmax", {"fc2:0"}, {"probs"}, "model/head/softmax"));
  g.mark_output("probs");
  return g;
}

/// Drives one rank: tensors live in FakeDevice HBM (values from the CPU reference, stored in the
/// graph's dtypes), probe tasks are planned by the runtime and executed by the fake device.
class MiniExecutor {
 public:
  MiniExecutor(graph::Graph g, probes::ProbeConfig cfg, std::filesystem::path out, std::uint32_t rank = 0,
               std::uint64_t seed = 1)
      : dev(rank), executed(std::move(g)) {
    probes::register_probe_ops();
    rt = std::make_unique<probes::ProbeRuntime>(std::move(cfg), executed, dev,
                                                probes::RuntimeOptions{.rank = rank, .seed = seed, .output_dir = out});
    instrumented = executed;
    rt->instrument(instrumented);
    rt->configure_device();
    rt->install_irq_handler();
    rt->set_tensor_locator([this](const std::string& t) -> std::optional<spec::TensorRef> {
      auto it = refs.find(t);
      if (it == refs.end()) return std::nullopt;
      return it->second;
    });
  }

  /// Values of every tensor for one step: the CPU reference on `feeds`, converted to each tensor's
  /// dtype; `edit` may change tensors (e.g. inject a NaN) before they are placed in HBM.
  void place_step(const std::map<std::string, graph::Tensor>& feeds,
                  const std::function<void(std::map<std::string, graph::Tensor>&)>& edit = {}) {
    graph::Graph one_rank = executed;  // a collective of this rank alone: its input
    for (auto& op : one_rank.ops())
      if (probes::is_collective_type(op.type)) {
        op.type = "Identity";
        op.attrs.clear();
      }
    auto vals = graph::run_graph_reference(one_rank, feeds, graph::RefPrecision::F32);
    std::map<std::string, graph::Tensor> dev_vals;
    for (auto& [name, t] : vals) {
      const auto* info = executed.find_tensor(name);
      graph::DType dt = info ? info->desc.dtype : t.dtype();
      auto v = t.to_f32();
      dev_vals[name] = graph::Tensor::from_f32(t.shape(), v, dt);
    }
    for (auto& [name, t] : feeds) dev_vals[name] = t;
    for (auto& [name, t] : executed.initializers()) dev_vals[name] = t;
    if (edit) edit(dev_vals);
    for (auto& [name, t] : dev_vals) {
      auto it = refs.find(name);
      if (it != refs.end()) dev.free(it->second.addr);
      refs[name] = dev.place(t);
    }
    values = std::move(dev_vals);
  }

  /// Runs one step: probe tasks before/after each op; `on_op` is called after the op's kernel task.
  void run_step(std::uint32_t step, const std::function<void(const graph::Op&)>& on_op = {}) {
    rt->begin_step(step);
    for (std::uint32_t id : instrumented.topo_order()) {
      const graph::Op& op = instrumented.op(id);
      if (probes::is_probe_op(op)) continue;
      for (auto p : rt->insertion().before(id)) submit_probe(p, step);
      spec::TaskDescriptor k;
      k.task_id = next_task++;
      k.op_id = id;
      k.step = step;
      rt->plan_kernel(op, step, k);
      if (k.stats_inputs || k.stats_outputs || k.dump_outputs) {  // tensors are found in the args block
        const auto bytes = spec::encode_op_args(kernel_args(op));
        k.args_addr = dev.alloc(bytes.size());
        k.args_size = static_cast<std::uint32_t>(bytes.size());
        dev.dma_write(k.args_addr, bytes);
        in_kernel += static_cast<std::uint64_t>(std::popcount(k.stats_inputs) + std::popcount(k.stats_outputs) +
                                                std::popcount(k.dump_outputs));
      }
      if (id == last_op() && rt->step_status_records()) k.flags |= spec::kTaskFlagStatusRecord;
      dev.submit(0, k);
      if (on_op) on_op(op);
      for (auto p : rt->insertion().after(id)) submit_probe(p, step);
    }
    dev.synchronize(0);
    rt->end_step(step);
  }

  spec::OpArgs kernel_args(const graph::Op& op) const {
    spec::OpArgs a;
    a.op_type = op.type;
    a.op_name = op.name;
    for (const auto& in : op.inputs) {
      spec::TensorRef r;
      if (in.empty()) r.dtype = spec::kAbsentTensor;
      else r = refs.at(in);
      a.inputs.push_back(r);
    }
    for (const auto& out : op.outputs) a.outputs.push_back(refs.at(out));
    return a;
  }

  std::uint32_t last_op() const {
    std::uint32_t last = 0;
    for (std::uint32_t id : instrumented.topo_order())
      if (!probes::is_probe_op(instrumented.op(id))) last = id;
    return last;
  }

  void submit_probe(std::uint32_t probe_id, std::uint32_t step) {
    const graph::Op& p = instrumented.op(probe_id);
    const std::string& tensor = p.inputs.at(0);
    std::uint32_t tid = next_task++;
    auto t = rt->plan_probe(p, step, refs.at(tensor), tid);
    if (!t) return;
    auto bytes = t->args_bytes();
    std::uint64_t args = dev.alloc(bytes.size());
    dev.dma_write(args, bytes);
    if (t->barrier_before) {
      spec::TaskDescriptor b;
      b.task_id = next_task++;
      b.kind = spec::TaskKind::Barrier;
      dev.submit(0, b);
    }
    spec::TaskDescriptor d;
    d.task_id = tid;
    d.op_id = t->target_op_id;
    d.kind = t->kind;
    d.flags |= t->flags;
    d.args_addr = args;
    d.args_size = static_cast<std::uint32_t>(bytes.size());
    d.step = step;
    dev.submit(0, d);
    ++probe_tasks;
  }

  probes::FakeDevice dev;
  graph::Graph executed, instrumented;
  std::unique_ptr<probes::ProbeRuntime> rt;
  std::map<std::string, spec::TensorRef> refs;
  std::map<std::string, graph::Tensor> values;
  std::uint32_t next_task = 1;
  std::uint64_t probe_tasks = 0;
  std::uint64_t in_kernel = 0;  // statistics records asked of kernel tasks
};

inline std::filesystem::path temp_dir(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() / ("probelab_probes_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

}  // namespace probe_test
