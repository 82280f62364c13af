#include "probes/exception_isr.h"

#include <algorithm>
#include <array>
#include <sstream>

#include <fmt/format.h>

#include "chip_model/spec/irq.h"
#include "chip_model/spec/registers.h"
#include "probes/log.h"

namespace probelab::probes {

std::vector<std::int64_t> unravel_index(std::uint64_t linear, const graph::Shape& shape) {
  if (shape.empty()) return {};
  std::uint64_t total = 1;
  for (auto d : shape) {
    if (d <= 0) return {};
    total *= static_cast<std::uint64_t>(d);
  }
  if (linear >= total) return {};
  std::vector<std::int64_t> c(shape.size());
  for (std::size_t i = shape.size(); i-- > 0;) {
    auto d = static_cast<std::uint64_t>(shape[i]);
    c[i] = static_cast<std::int64_t>(linear % d);
    linear /= d;
  }
  return c;
}

std::vector<std::string> call_stack(const graph::Op& op, const graph::Graph* original) {
  std::vector<std::string> st;
  std::stringstream ss(op.scope);
  std::string part;
  while (std::getline(ss, part, '/'))
    if (!part.empty()) st.push_back(part);
  // the scope usually ends with the op's own name: do not repeat it
  if (!st.empty() && (st.back() == op.name || op.name.ends_with("/" + st.back()) )) st.pop_back();
  st.push_back(fmt::format("{} ({})", op.name, op.type));
  if (!op.fused_from.empty()) {
    std::string chain;
    for (const auto& f : op.fused_from) {
      std::string label = f;
      if (original)
        if (const auto* o = original->find_op(f)) label = fmt::format("{} ({}, {})", f, o->type, o->scope);
      chain += (chain.empty() ? "" : " -> ") + label;
    }
    st.push_back("fused: " + chain);
  }
  if (!op.grad_of.empty()) st.push_back("gradient of: " + op.grad_of);
  return st;
}

ExceptionIsr::ExceptionIsr(Device& dev, const graph::Graph& executed, const graph::Graph* original)
    : dev_(dev), g_(executed), original_(original) {}

std::optional<AnomalyRecord> ExceptionIsr::handle() {
  using namespace spec;
  std::uint64_t now = dev_.cycles();
  // The latch block kRegExcStatus..kRegExcOutput in one burst read.
  constexpr std::uint32_t kWords = (kRegExcOutput - kRegExcStatus) / 4 + 1;
  std::array<std::uint32_t, kWords> latch{};
  dev_.read_regs(kRegExcStatus, latch);
  auto reg = [&latch](std::uint32_t offset) { return latch[(offset - kRegExcStatus) / 4]; };
  std::uint32_t status = reg(kRegExcStatus);
  if (!(status & 1u)) {
    dev_.write_reg(kRegIrqAck, kIrqException);
    log::debug("isr", "spurious exception interrupt (latch not valid)");
    return std::nullopt;
  }
  AnomalyRecord a;
  std::uint32_t kind = (status >> 8) & 0xFF;
  a.kind = kind < kExcKindCount ? static_cast<AnomalyKind>(kind) : AnomalyKind::Invalid;
  a.more = (status >> 16) & 1u;
  a.op_id = reg(kRegExcOpId);
  a.task_id = reg(kRegExcTaskId);
  a.core = reg(kRegExcCore);
  a.stream = reg(kRegExcStream);
  a.element = std::uint64_t{reg(kRegExcElemLo)} | std::uint64_t{reg(kRegExcElemHi)} << 32;
  a.cycle = std::uint64_t{reg(kRegExcCycleLo)} | std::uint64_t{reg(kRegExcCycleHi)} << 32;
  a.step = reg(kRegExcStep);
  a.output_index = reg(kRegExcOutput);
  a.float_status = dev_.read_reg(kRegFloatStatus);
  a.rank = dev_.rank();
  // acknowledge: line first, then re-arm the latch (a new anomaly then raises the line again);
  // the float status bits read are cleared, so the next anomaly shows what was raised since
  if (a.float_status) dev_.write_reg(kRegFloatStatusClear, a.float_status);
  dev_.write_reg(kRegIrqAck, kIrqException);
  dev_.write_reg(kRegExcAck, 1);

  a.isr_cycle = now;
  a.latency_cycles = now >= a.cycle ? now - a.cycle : 0;
  if (a.op_id < g_.ops().size()) {
    const graph::Op& op = g_.op(a.op_id);
    a.op = op.name;
    a.op_type = op.type;
    a.scope = op.scope;
    a.fused_from = op.fused_from;
    // For a NaN input the latch's output-index register holds the index of the input.
    const auto& slots = a.kind == AnomalyKind::NanInput ? op.inputs : op.outputs;
    if (a.output_index < slots.size() && !slots[a.output_index].empty()) {
      a.tensor = slots[a.output_index];
      if (const auto* t = g_.find_tensor(a.tensor)) a.coordinate = unravel_index(a.element, t->desc.shape);
    }
    a.call_stack = call_stack(op, original_);
  } else {
    a.op = fmt::format("<unknown op {}>", a.op_id);
  }
  log::debug("isr", "{} at {} element {} step {} cycle {} latency {}", anomaly_kind_name(a.kind), a.op, a.element, a.step,
             a.cycle, a.latency_cycles);
  return a;
}

std::map<std::string, std::uint64_t> ExceptionIsr::read_counters() {
  using namespace spec;
  std::map<std::string, std::uint64_t> c;
  std::array<std::uint32_t, kExcKindCount> n{};
  dev_.read_regs(kRegExcCountBase, n);
  c["overflow_count"] = n[kExcOverflow];
  c["underflow_count"] = n[kExcUnderflow];
  c["invalid_count"] = n[kExcInvalid];
  c["nan_input_count"] = n[kExcNanInput];
  return c;
}

// ---- propagation -------------------------------------------------------------------------------

PropagationTracker::PropagationTracker(const graph::Graph& g) : g_(g) {
  topo_pos_.assign(g.ops().size(), 0);
  auto order = g.topo_order();
  for (std::size_t i = 0; i < order.size(); ++i) topo_pos_[order[i]] = static_cast<std::uint32_t>(i);
}

void PropagationTracker::begin_step(std::uint32_t step) {
  step_ = step;
  flagged_.clear();
  output_nonfinite_.clear();
  read_nonfinite_.clear();
}

void PropagationTracker::note_nonfinite(std::uint32_t op_id, bool is_input) {
  if (op_id >= g_.ops().size()) return;
  flagged_.insert(op_id);
  (is_input ? read_nonfinite_ : output_nonfinite_).insert(op_id);
}

bool PropagationTracker::upstream_flagged(std::uint32_t op_id) const {
  std::vector<std::uint32_t> todo{op_id};
  std::set<std::uint32_t> seen;
  while (!todo.empty()) {
    std::uint32_t o = todo.back();
    todo.pop_back();
    for (const auto& in : g_.op(o).inputs) {
      if (in.empty()) continue;
      const graph::Op* p = g_.producer(in);
      if (!p || !seen.insert(p->id).second) continue;
      if (flagged_.count(p->id)) return true;
      todo.push_back(p->id);
    }
  }
  return false;
}

std::uint32_t PropagationTracker::source_of(std::uint32_t op_id) const {
  // earliest (topological) flagged op among op_id's ancestors, or op_id itself
  std::uint32_t best = op_id;
  std::vector<std::uint32_t> todo{op_id};
  std::set<std::uint32_t> seen;
  while (!todo.empty()) {
    std::uint32_t o = todo.back();
    todo.pop_back();
    if (!seen.insert(o).second) continue;
    if (flagged_.count(o) && topo_pos_[o] < topo_pos_[best]) best = o;
    for (const auto& in : g_.op(o).inputs)
      if (!in.empty())
        if (const graph::Op* p = g_.producer(in)) todo.push_back(p->id);
  }
  return best;
}

std::vector<std::uint32_t> PropagationTracker::path(std::uint32_t from, std::uint32_t to) const {
  // flagged ops on some dependency chain from `from` to `to`, in topological order
  std::vector<std::uint32_t> out;
  std::set<std::uint32_t> anc;  // ancestors of `to` (inclusive)
  std::vector<std::uint32_t> todo{to};
  while (!todo.empty()) {
    std::uint32_t o = todo.back();
    todo.pop_back();
    if (!anc.insert(o).second) continue;
    for (const auto& in : g_.op(o).inputs)
      if (!in.empty())
        if (const graph::Op* p = g_.producer(in)) todo.push_back(p->id);
  }
  for (std::uint32_t o : anc) {
    if (o != from && o != to && !flagged_.count(o)) continue;
    if (topo_pos_[o] < topo_pos_[from]) continue;
    out.push_back(o);
  }
  std::sort(out.begin(), out.end(), [&](auto a, auto b) { return topo_pos_[a] < topo_pos_[b]; });
  return out;
}

void PropagationTracker::classify(AnomalyRecord& a) {
  if (a.op_id >= g_.ops().size()) return;
  if (a.step != step_) {
    // a late anomaly of another step: classify against an empty history
    a.is_source = a.kind != AnomalyKind::NanInput;
    a.source_op = a.op;
    a.propagation_path = {a.op};
    return;
  }
  bool reads_nan = a.kind == AnomalyKind::NanInput || read_nonfinite_.count(a.op_id);
  bool upstream = upstream_flagged(a.op_id);
  a.is_source = !reads_nan && !upstream;
  std::uint32_t src = upstream ? source_of(a.op_id) : a.op_id;
  const bool from_memory = a.kind == AnomalyKind::NanInput && !a.tensor.empty() && g_.find_tensor(a.tensor) &&
                           !g_.producer(a.tensor);
  if (reads_nan && !upstream && from_memory) {
    // no op produced it: the NaN entered from memory (a weight, an input, corrupted data), so
    // this op is where it first shows
    a.is_source = true;
  } else if (reads_nan && !upstream) {
    // the NaN came from outside the flagged set: name the producer of the first input
    for (const auto& in : g_.op(a.op_id).inputs)
      if (!in.empty())
        if (const graph::Op* p = g_.producer(in)) {
          src = p->id;
          flagged_.insert(src);  // inferred source: later anomalies downstream trace back to it
          output_nonfinite_.insert(src);
          break;
        }
  }
  a.source_op = g_.op(src).name;
  for (std::uint32_t o : path(src, a.op_id)) a.propagation_path.push_back(g_.op(o).name);
  flagged_.insert(a.op_id);
  if (a.kind == AnomalyKind::NanInput) read_nonfinite_.insert(a.op_id);
  if (a.kind == AnomalyKind::Invalid || a.kind == AnomalyKind::Overflow) output_nonfinite_.insert(a.op_id);
}

std::vector<std::string> PropagationTracker::flagged_ops() const {
  std::vector<std::uint32_t> ids(flagged_.begin(), flagged_.end());
  std::sort(ids.begin(), ids.end(), [&](auto a, auto b) { return topo_pos_[a] < topo_pos_[b]; });
  std::vector<std::string> out;
  for (auto id : ids) out.push_back(g_.op(id).name);
  return out;
}

}  // namespace probelab::probes
