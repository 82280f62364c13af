#include "sim/platform/executor.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "chip_model/spec/collective_args.h"
#include "chip_model/spec/irq.h"
#include "chip_model/spec/quant_args.h"
#include "chip_model/spec/registers.h"
#include "graph/format.h"
#include "graph/op_registry.h"
#include "probes/insertion_pass.h"

namespace probelab::sim {

namespace {

constexpr std::string_view kUpdatedSuffix = "/updated";

template <class T> std::vector<std::byte> pod_bytes(const T& v) {
  std::vector<std::byte> out(sizeof(T));
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

spec::CollectiveOp collective_op(const std::string& type) {
  if (type == "ReduceScatter") return spec::CollectiveOp::ReduceScatter;
  if (type == "AllGather") return spec::CollectiveOp::AllGather;
  if (type == "Broadcast") return spec::CollectiveOp::Broadcast;
  return spec::CollectiveOp::AllReduce;
}

}  // namespace

Executor::Executor(const graph::Graph& g, probes::Device& dev, probes::ProbeRuntime* rt, ExecutorConfig cfg)
    : g_(g), dev_(dev), rt_(rt), cfg_(std::move(cfg)) {
  for (std::uint32_t id : g_.topo_order())
    if (!probes::is_probe_op(g_.op(id))) order_.push_back(id);
}

std::optional<spec::TensorRef> Executor::locate(const std::string& tensor) const {
  auto it = addr_.find(tensor);
  if (it == addr_.end()) return std::nullopt;
  const graph::TensorDesc& d = g_.tensor(tensor).desc;
  return spec::make_tensor_ref(it->second, static_cast<std::uint8_t>(d.dtype), static_cast<std::uint8_t>(d.format),
                               d.shape);
}

void Executor::plan_memory() {
  std::vector<std::string> aliases;
  for (const auto& [name, info] : g_.tensors()) {
    if (name.size() > kUpdatedSuffix.size() && name.ends_with(kUpdatedSuffix)) {
      const std::string base = name.substr(0, name.size() - kUpdatedSuffix.size());
      if (g_.initializers().count(base) && g_.tensor(base).desc == info.desc) {
        aliases.push_back(name);
        continue;
      }
    }
    const std::size_t bytes = std::max<std::size_t>(64, graph::physical_nbytes(info.desc));
    addr_[name] = dev_.alloc(bytes, 512);
    res_.hbm_bytes += bytes;
  }
  for (const auto& name : aliases) {
    addr_[name] = addr_.at(name.substr(0, name.size() - kUpdatedSuffix.size()));
    in_place_.insert(name);
  }
}

void Executor::write_tensor(const std::string& name, const graph::Tensor& value) {
  const graph::TensorDesc& d = g_.tensor(name).desc;
  // Converted only when the value's dtype or format differs from the tensor's (else sent as it is).
  graph::Tensor converted;
  const graph::Tensor* v = &value;
  if (v->dtype() != d.dtype) {
    if (!graph::is_float(v->dtype()) || !graph::is_float(d.dtype))
      throw std::runtime_error(fmt::format("tensor '{}': cannot feed {} data into a {} tensor", name,
                                           graph::dtype_name(v->dtype()), graph::dtype_name(d.dtype)));
    converted = graph::Tensor::from_f64(v->shape(), graph::to_logical(*v).to_f64(), d.dtype);
    v = &converted;
  }
  if (v->shape() != d.shape)
    throw std::runtime_error(fmt::format("tensor '{}': fed shape {} but the graph declares {}", name,
                                         graph::shape_str(v->shape()), graph::shape_str(d.shape)));
  if (v->desc().format != d.format) {
    converted = graph::convert_format(*v, d.format);
    v = &converted;
  }
  dev_.dma_write(addr_.at(name), v->bytes());
}

graph::Tensor Executor::read_tensor(const std::string& name) {
  const graph::TensorDesc& d = g_.tensor(name).desc;
  graph::Tensor t = graph::Tensor::for_overwrite(d);
  dev_.dma_read(addr_.at(name), t.bytes());
  return graph::to_logical(std::move(t));
}

void Executor::upload_initializers() {
  for (const auto& [name, value] : cfg_.initial_values)
    if (!g_.initializers().count(name))
      throw std::runtime_error(fmt::format("initial value '{}' is not an initializer of the graph", name));
  // A resumed run's checkpointed value first, then this rank's own shard, then the graph's value.
  for (const auto& [name, value] : g_.initializers()) {
    if (!addr_.count(name)) continue;
    if (auto it = cfg_.initial_values.find(name); it != cfg_.initial_values.end()) {
      write_tensor(name, it->second);
      continue;
    }
    auto own = cfg_.rank_initializers.find(name);
    write_tensor(name, own == cfg_.rank_initializers.end() ? value : own->second);
  }
}

void Executor::checkpoint(std::uint32_t step) {
  std::map<std::string, graph::Tensor> state;
  for (const auto& [name, value] : g_.initializers()) {
    if (!addr_.count(name)) continue;
    graph::Tensor t = read_tensor(name);
    res_.checkpoint_bytes += t.bytes().size();
    state.emplace(name, std::move(t));
  }
  ++res_.checkpoints;
  if (cfg_.on_checkpoint) cfg_.on_checkpoint(step, state);
}

spec::OpAttrs Executor::resolve_attrs(spec::OpAttrs attrs) const {
  // An attribute naming a state buffer (`<key>.meta`, spec/quant_args.h) may hold a tensor name:
  // the kernel gets that tensor's HBM address.
  for (auto& [key, value] : attrs) {
    if (!key.ends_with(spec::kQuantMetaSuffix) || !std::holds_alternative<std::string>(value)) continue;
    const std::string name = std::get<std::string>(value);
    auto ref = locate(name);
    if (!ref) throw std::runtime_error(fmt::format("attribute {}: '{}' is not a tensor of the graph", key, name));
    value = static_cast<std::int64_t>(ref->addr);
  }
  return attrs;
}

std::vector<std::byte> Executor::kernel_args(const graph::Op& op, std::uint32_t step) const {
  spec::OpArgs a;
  a.op_type = op.type;
  a.op_name = op.name;
  a.attrs = op.attrs;
  if (auto it = cfg_.op_attrs.find(op.name); it != cfg_.op_attrs.end()) {
    const spec::OpAttrs extra = resolve_attrs(it->second);
    a.attrs.insert(extra.begin(), extra.end());
  }
  if (op.type == "AdamUpdate") a.attrs["step"] = op.attr_int("step", 1) + static_cast<std::int64_t>(step);
  if (scaler_) {
    if (op.name == cfg_.loss_scaling.scale_op) a.attrs["alpha"] = scaler_->scale();
    if (op.type == "SgdUpdate") a.attrs["lr"] = op.attr_float("lr", 0.01) / scaler_->scale();
  }
  a.accum = cfg_.accum;
  for (const auto& in : op.inputs) {
    if (in.empty()) {
      spec::TensorRef absent;
      absent.dtype = spec::kAbsentTensor;
      a.inputs.push_back(absent);
    } else {
      a.inputs.push_back(*locate(in));
    }
  }
  for (const auto& out : op.outputs) a.outputs.push_back(*locate(out));
  if (!op.fused_body.empty()) {
    std::map<std::string, std::int32_t> index;
    for (std::size_t i = 0; i < op.inputs.size(); ++i)
      if (!op.inputs[i].empty()) index.emplace(op.inputs[i], static_cast<std::int32_t>(i));
    for (std::size_t i = 0; i < op.outputs.size(); ++i)
      index.emplace(op.outputs[i], static_cast<std::int32_t>(op.inputs.size() + i));
    std::int32_t next = static_cast<std::int32_t>(op.inputs.size() + op.outputs.size());
    for (const graph::Op& inner : op.fused_body) {
      spec::FusedInner f;
      f.type = inner.type;
      f.name = inner.name;
      f.attrs = inner.attrs;
      if (auto it = cfg_.op_attrs.find(inner.name); it != cfg_.op_attrs.end()) {
        const spec::OpAttrs extra = resolve_attrs(it->second);
        f.attrs.insert(extra.begin(), extra.end());
      }
      for (const auto& t : inner.inputs) {
        if (t.empty()) {
          f.inputs.push_back(-1);
          continue;
        }
        auto it = index.find(t);
        if (it == index.end())
          throw std::runtime_error(fmt::format("fused op '{}': inner op '{}' reads '{}' before it is written", op.name,
                                               inner.name, t));
        f.inputs.push_back(it->second);
      }
      for (const auto& t : inner.outputs) {
        auto [it, fresh] = index.emplace(t, next);
        if (fresh) ++next;
        f.outputs.push_back(it->second);
      }
      a.fused_body.push_back(std::move(f));
    }
    a.num_internal = static_cast<std::uint32_t>(next - static_cast<std::int32_t>(op.inputs.size() + op.outputs.size()));
    if (auto it = partials_.find(op.id); it != partials_.end())
      for (const auto& [name, ref] : it->second) a.partial_outputs.push_back(ref);
  }
  return spec::encode_op_args(a);
}

std::vector<std::byte> Executor::collective_args(const graph::Op& op) const {
  spec::CollectiveArgs a;
  a.input = *locate(op.inputs.at(0));
  a.output = *locate(op.outputs.at(0));
  const spec::CollectiveOp kind = collective_op(op.type);
  a.op = static_cast<std::uint8_t>(kind);
  a.count = static_cast<std::uint64_t>(graph::numel(
      g_.tensor(kind == spec::CollectiveOp::ReduceScatter ? op.outputs[0] : op.inputs[0]).desc.shape));
  a.reduction = static_cast<std::uint8_t>(op.attr_str("reduction", "mean") == "sum" ? spec::ReduceOp::Sum
                                                                                     : spec::ReduceOp::Mean);
  const std::string algo = op.attr_str("algorithm", "ring");
  a.algorithm = static_cast<std::uint8_t>(algo == "direct" ? spec::CollectiveAlgo::Direct
                                          : algo == "tree" ? spec::CollectiveAlgo::Tree
                                                           : spec::CollectiveAlgo::Ring);
  a.acc_dtype = static_cast<std::uint8_t>(op.attr_str("accumulation", "fp32") == "fp16" ? graph::DType::F16
                                                                                        : graph::DType::F32);
  a.order_mode = static_cast<std::uint8_t>(op.attr_str("order", "arrival") == "group" ? spec::OrderMode::GroupOrder
                                                                                      : spec::OrderMode::Arrival);
  const std::string comm = op.attr_str("comm", "world");
  a.comm_kind = static_cast<std::uint8_t>(comm == "server"  ? spec::CommKindCode::Server
                                          : comm == "peers" ? spec::CommKindCode::Peers
                                                            : spec::CommKindCode::World);
  a.root = static_cast<std::uint32_t>(op.attr_int("root", 0));
  a.num_ranks = static_cast<std::uint32_t>(op.attr_int("ranks", 0));
  a.divisor = static_cast<std::uint32_t>(op.attr_int("divisor", 0));
  return pod_bytes(a);
}

void Executor::plan_partial_dumps(const graph::Op& op) {
  // Descs of the body tensors: the op's own, then each inner op's inferred outputs.
  std::map<std::string, graph::TensorDesc> descs;
  for (const auto& t : op.inputs)
    if (!t.empty()) descs[t] = g_.tensor(t).desc;
  for (const auto& t : op.outputs) descs[t] = g_.tensor(t).desc;
  const graph::DType dtype = g_.tensor(op.outputs.at(0)).desc.dtype;
  std::vector<std::pair<std::string, spec::TensorRef>> out;
  for (const graph::Op& inner : op.fused_body) {
    std::vector<graph::TensorDesc> in;
    for (const auto& t : inner.inputs) in.push_back(t.empty() ? graph::TensorDesc{} : descs.at(t));
    const auto inferred = graph::OpRegistry::instance().get(inner.type).infer(inner, in);
    for (std::size_t k = 0; k < inner.outputs.size(); ++k) {
      const std::string& t = inner.outputs[k];
      if (descs.count(t)) continue;  // an op output, not an intermediate
      graph::TensorDesc d = inferred.at(k);
      d.format = graph::Format::ND;
      spec::TensorRef ref;
      ref.dtype = spec::kAbsentTensor;
      if (graph::is_float(d.dtype)) {
        d.dtype = dtype;  // dumped in the op's output dtype, as a device-side dump would hold it
        const std::size_t bytes = std::max<std::size_t>(64, graph::physical_nbytes(d));
        ref = spec::make_tensor_ref(dev_.alloc(bytes, 512), static_cast<std::uint8_t>(d.dtype),
                                    static_cast<std::uint8_t>(d.format), d.shape);
        res_.hbm_bytes += bytes;
      }
      descs[t] = d;
      out.emplace_back(t, ref);
    }
  }
  partials_[op.id] = std::move(out);
}

void Executor::read_partial_dumps(std::uint32_t step) {
  for (const auto& [id, list] : partials_)
    for (const auto& [name, ref] : list) {
      if (ref.dtype == spec::kAbsentTensor) continue;
      graph::TensorDesc d{static_cast<graph::DType>(ref.dtype), {}};
      for (std::uint32_t i = 0; i < ref.rank; ++i) d.shape.push_back(ref.dims[i]);
      graph::Tensor t = graph::Tensor::for_overwrite(d);
      dev_.dma_read(ref.addr, t.bytes());
      rt_->add_partial_dump(step, name, std::move(t));
    }
}

void Executor::compile() {
  for (std::uint32_t id : order_) {
    const graph::Op& op = g_.op(id);
    if (rt_ && rt_->wants_partial_dumps(op)) plan_partial_dumps(op);
    Compiled c;
    c.op_id = id;
    std::vector<std::byte> bytes;
    if (probes::is_collective_type(op.type)) {
      c.kind = spec::TaskKind::Collective;
      bytes = collective_args(op);
    } else {
      c.kind = spec::TaskKind::Kernel;
      c.per_step_args = op.type == "AdamUpdate";
      c.scaled = scaler_ && (op.name == cfg_.loss_scaling.scale_op || op.type == "SgdUpdate");
      for (const auto& out : op.outputs) c.writes_in_place = c.writes_in_place || in_place_.count(out) > 0;
      bytes = kernel_args(op, 0);
    }
    c.args_size = static_cast<std::uint32_t>(bytes.size());
    c.args_addr = dev_.alloc(bytes.size(), 64);
    res_.hbm_bytes += bytes.size();
    dev_.dma_write(c.args_addr, bytes);
    compiled_.emplace(id, c);
  }
}

void Executor::submit_task(spec::TaskDescriptor t) {
  switch (t.kind) {
    case spec::TaskKind::Kernel:
      ++res_.kernel_tasks;
      res_.in_kernel_statistics += static_cast<std::uint64_t>(std::popcount(t.stats_outputs) + std::popcount(t.stats_inputs));
      res_.in_kernel_dumps += static_cast<std::uint64_t>(std::popcount(t.dump_outputs));
      break;
    case spec::TaskKind::Collective: ++res_.collective_tasks; break;
    case spec::TaskKind::Capture:
    case spec::TaskKind::Breakpoint: ++res_.probe_tasks; break;
    default: ++res_.barrier_tasks; break;
  }
  dev_.submit(cfg_.stream, t);
}

void Executor::submit_probe(std::uint32_t probe_op_id, std::uint32_t step) {
  const probes::ProbeSite* site = rt_->insertion().site(probe_op_id);
  if (!site) return;
  auto ref = locate(site->tensor);
  if (!ref) return;
  const std::uint32_t task_id = next_task_id_++;
  auto planned = rt_->plan_probe(g_.op(probe_op_id), step, *ref, task_id);
  if (!planned) return;
  if (planned->barrier_before) {
    spec::TaskDescriptor b;
    b.task_id = next_task_id_++;
    b.op_id = planned->target_op_id;
    b.kind = spec::TaskKind::Barrier;
    b.flags = 0;
    b.step = step;
    submit_task(b);
  }
  const std::vector<std::byte> bytes = planned->args_bytes();
  ProbeArgsBlock& blk = probe_args_[probe_op_id];
  if (blk.capacity < bytes.size()) {
    blk.addr = dev_.alloc(bytes.size(), 64);
    blk.capacity = static_cast<std::uint32_t>(bytes.size());
    blk.written.clear();
    res_.hbm_bytes += bytes.size();
  }
  if (blk.written != bytes) {  // the same probe usually plans the same arguments step after step
    dev_.dma_write(blk.addr, bytes);
    blk.written = bytes;
  }
  spec::TaskDescriptor t;
  t.task_id = task_id;
  t.op_id = planned->target_op_id;
  t.kind = planned->kind;
  t.flags |= planned->flags;
  t.args_addr = blk.addr;
  t.args_size = static_cast<std::uint32_t>(bytes.size());
  t.step = step;
  submit_task(t);
}

void Executor::on_interrupt(std::uint32_t lines) {
  const std::uint32_t handled = rt_ ? rt_->on_interrupt(lines) : 0;
  const std::uint32_t rest = lines & ~handled;
  if (rest & spec::kIrqBreakpoint) dev_.write_reg(spec::stream_reg(cfg_.stream, spec::kStreamResume), 1);
  if ((rest & spec::kIrqException) && !rt_) dev_.write_reg(spec::kRegExcAck, 1);
  if (rest) dev_.write_reg(spec::kRegIrqAck, rest);
}

void Executor::synchronize() {
  std::uint32_t polls = 0;
  while (!dev_.synchronize(cfg_.stream)) {
    if (++polls < cfg_.max_halted_polls) continue;
    res_.warnings.push_back(fmt::format("rank {} step {}: stream {} stayed halted; the executor resumed it",
                                        cfg_.rank, step_, cfg_.stream));
    dev_.write_reg(spec::stream_reg(cfg_.stream, spec::kStreamResume), 1);
    polls = 0;
  }
}

void Executor::submit_op(std::uint32_t id, std::uint32_t s, bool last) {
  if (rt_)
    for (std::uint32_t p : rt_->insertion().before(id)) submit_probe(p, s);
  const Compiled& c = compiled_.at(id);
  if (c.per_step_args && s > 0) dev_.dma_write(c.args_addr, kernel_args(g_.op(id), s));
  spec::TaskDescriptor t;
  t.task_id = next_task_id_++;
  t.op_id = id;
  t.kind = c.kind;
  t.kernel = spec::kKernelOpArgs;
  t.args_addr = c.args_addr;
  t.args_size = c.args_size;
  t.step = s;
  if (rt_ && c.kind == spec::TaskKind::Kernel) rt_->plan_kernel(g_.op(id), s, t);
  if (c.writes_in_place) t.flags |= spec::kTaskFlagWaitCaptures;
  if (rt_ && last && rt_->step_status_records()) t.flags |= spec::kTaskFlagStatusRecord;
  submit_task(t);
  if (rt_)
    for (std::uint32_t p : rt_->insertion().after(id)) submit_probe(p, s);
}

void Executor::plan_loss_scaling() {
  const ExecutorConfig::LossScaling& ls = cfg_.loss_scaling;
  if (!ls.enabled) return;
  if (!g_.find_op(ls.scale_op))
    throw std::runtime_error(fmt::format("loss scaling: the scale op '{}' is not an op of the graph", ls.scale_op));
  // The optimizer updates and everything that reads what they produce run after the decision.
  std::set<std::string> produced;
  for (std::uint32_t id : order_) {
    const graph::Op& op = g_.op(id);
    bool after = op.type == "SgdUpdate" || op.type == "AdamUpdate";
    for (const auto& in : op.inputs) after = after || (!in.empty() && produced.count(in));
    if (!after) continue;
    update_ops_.insert(id);
    produced.insert(op.outputs.begin(), op.outputs.end());
  }
  scaler_ = std::make_unique<probes::LossScaler>(ls.scaler);
  probes::FloatStatusOptions o = ls.status;
  o.stream = cfg_.stream;
  status_ = std::make_unique<probes::FloatStatusClient>(dev_, o, [this] { return next_task_id_++; });
  encoded_scale_ = scaler_->scale();
}

bool Executor::loss_scale_decision(std::uint32_t s) {
  const probes::FloatStatusRead r = status_->get(s);
  probes::LossScaleStep rec;
  rec.rank = cfg_.rank;
  rec.step = s;
  rec.scale = scaler_->scale();
  rec.status = r.local.status;
  rec.local_overflow = r.local_overflow;
  rec.recovered = r.recovered;
  rec.foreign_resets = r.foreign_resets;
  rec.reduced = r.reduced;
  rec.found_inf = r.found_inf;
  rec.skipped = scaler_->update(r.found_inf);
  rec.next_scale = scaler_->scale();
  res_.loss_scale.push_back(rec);
  return rec.skipped;
}

void Executor::plan() {
  if (planned_) return;
  plan_memory();
  planned_ = true;
}

ExecutorResult Executor::run() {
  dev_.set_irq_handler([this](std::uint32_t lines) { on_interrupt(lines); });
  dev_.write_reg(spec::kRegFpMode, cfg_.fp_mode);
  // Without a probe runtime nobody services exception interrupts: leave them off (the reset
  // value enables every kind), as a driver without debug support would.
  if (!rt_) dev_.write_reg(spec::kRegExcEnable, 0);
  plan();
  upload_initializers();
  plan_loss_scaling();
  compile();
  if (rt_) {
    rt_->configure_device();
    rt_->set_tensor_locator([this](const std::string& t) { return locate(t); });
    if (cfg_.world > 1 && rt_->may_stop())
      stop_vote_ = std::make_unique<probes::RankVote>(dev_, cfg_.stream, [this] { return next_task_id_++; });
  }
  // The uploads are posted writes; a register read does not pass them, so the weights and kernel
  // arguments are on the device before step 0 starts, with or without a probe runtime (whose
  // configuration reads registers anyway): step times compare like for like.
  (void)dev_.read_reg(spec::kRegStep);
  for (std::uint32_t s = cfg_.first_step; s < cfg_.steps; ++s) {
    step_ = s;
    if (cfg_.checkpoint_every && s % cfg_.checkpoint_every == 0 && (s > cfg_.first_step || cfg_.first_step == 0))
      checkpoint(s);
    if (cfg_.on_step) cfg_.on_step(s, true);
    dev_.write_reg(spec::kRegStep, s);
    if (cfg_.feeds)
      for (const auto& [name, value] : cfg_.feeds(s)) {
        if (!addr_.count(name)) throw std::runtime_error(fmt::format("feed '{}' is not a tensor of the graph", name));
        write_tensor(name, value);
        if (rt_) rt_->note_feed(s, name, value);
      }
    if (rt_) rt_->begin_step(s);
    if (status_) status_->reset(s);
    if (scaler_ && scaler_->scale() != encoded_scale_) {
      // The loss scale changed: re-encode the args of the ops that follow it.
      for (const auto& [id, c] : compiled_)
        if (c.scaled) dev_.dma_write(c.args_addr, kernel_args(g_.op(id), s));
      encoded_scale_ = scaler_->scale();
    }
    std::vector<std::uint32_t> first, second;
    for (std::uint32_t id : order_) (update_ops_.count(id) ? second : first).push_back(id);
    for (std::size_t i = 0; i < first.size(); ++i) submit_op(first[i], s, i + 1 == first.size() && second.empty());
    const bool skip = scaler_ && loss_scale_decision(s);
    if (skip && rt_ && rt_->step_status_records() && !second.empty()) {
      // The step's status record rides on its last task, which a skipped update would have been.
      spec::TaskDescriptor b;
      b.task_id = next_task_id_++;
      b.kind = spec::TaskKind::Barrier;
      b.flags = spec::kTaskFlagStatusRecord;
      b.step = s;
      submit_task(b);
    }
    if (!skip)
      for (std::size_t i = 0; i < second.size(); ++i) submit_op(second[i], s, i + 1 == second.size());
    synchronize();
    if (rt_) read_partial_dumps(s);
    if (rt_) rt_->end_step(s);
    // A stop on one rank alone would leave the others waiting in the next step's collectives:
    // the ranks all-reduce their stop flags and stop together.
    const bool stop = stop_vote_ ? stop_vote_->any(rt_->stop_requested(), s) : rt_ && rt_->stop_requested();
    std::map<std::string, graph::Tensor> got;
    for (const auto& name : cfg_.fetch_each_step) got.emplace(name, read_tensor(name));
    res_.fetched.push_back(std::move(got));
    res_.steps_run = s + 1;
    if (cfg_.on_step) cfg_.on_step(s, false);
    if (stop) {
      res_.stopped = true;
      break;
    }
  }
  if (rt_) rt_->finish();
  if (scaler_) {
    std::set<std::string> params;
    for (std::uint32_t id : update_ops_) {
      const graph::Op& op = g_.op(id);
      if ((op.type != "SgdUpdate" && op.type != "AdamUpdate") || op.inputs.empty()) continue;
      std::string p = op.inputs[0];
      if (cfg_.rank_initializers.count(p)) {
        // A shard's value is its rank's own (tensor parallelism, ZeRO-1): ZeRO-1's whole
        // parameter, gathered back on every rank, is compared instead; a tensor-parallel shard has none.
        constexpr std::string_view kShard = "/shard";
        const std::string whole = p.ends_with(kShard) ? p.substr(0, p.size() - kShard.size()) : std::string();
        if (whole.empty() || !g_.initializers().count(whole)) continue;
        p = whole;
      }
      params.insert(p);
    }
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (const auto& name : params) {
      const graph::Tensor t = read_tensor(name);
      for (std::byte b : t.bytes()) h = (h ^ std::to_integer<std::uint64_t>(b)) * 0x100000001b3ull;
    }
    res_.param_digest = h;
  }
  for (const auto& name : cfg_.fetch_at_end) res_.final_values.emplace(name, read_tensor(name));
  return res_;
}

}  // namespace probelab::sim
