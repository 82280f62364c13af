#include "probes/exception_isr.h"

#include <algorithm>
#include <array>
#include <bit>
#include <sstream>

#include <fmt/format.h>

#include "chip_model/spec/irq.h"
#include "chip_model/spec/exception_unit.h"
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

AnomalyRecord ExceptionIsr::decode(std::uint32_t kind, std::span<const std::uint32_t> bank, std::uint64_t now) const {
  using namespace spec;
  auto reg = [&bank](std::uint32_t offset) { return bank[offset / 4]; };
  AnomalyRecord a;
  a.kind = static_cast<AnomalyKind>(kind);
  const std::uint32_t status = reg(kExcLatchStatus);
  a.more = (status >> 1) & 1u;
  a.detail = (status >> 8) & 0xFFu;
  a.op_id = reg(kExcLatchOpId);
  a.task_id = reg(kExcLatchTaskId);
  a.core = reg(kExcLatchCore);
  a.stream = reg(kExcLatchStream);
  a.element = std::uint64_t{reg(kExcLatchElemLo)} | std::uint64_t{reg(kExcLatchElemHi)} << 32;
  a.cycle = std::uint64_t{reg(kExcLatchCycleLo)} | std::uint64_t{reg(kExcLatchCycleHi)} << 32;
  a.step = reg(kExcLatchStep);
  const std::uint32_t slot = reg(kExcLatchSlot);
  a.output_index = slot & 0xFFFFu;
  a.on_input = (slot >> 16) & 1u;
  a.value = static_cast<double>(std::bit_cast<float>(reg(kExcLatchValue)));
  a.count = reg(kExcLatchCount);
  a.suppressed = reg(kExcLatchSuppressed);
  a.rank = dev_.rank();
  a.isr_cycle = now;
  a.latency_cycles = now >= a.cycle ? now - a.cycle : 0;
  if (a.op_id < g_.ops().size()) {
    const graph::Op& op = g_.op(a.op_id);
    a.op = op.name;
    a.op_type = op.type;
    a.scope = op.scope;
    a.fused_from = op.fused_from;
    const auto& slots = a.on_input ? op.inputs : op.outputs;
    if (a.output_index < slots.size() && !slots[a.output_index].empty()) {
      a.tensor = slots[a.output_index];
      if (const auto* t = g_.find_tensor(a.tensor)) a.coordinate = unravel_index(a.element, t->desc.shape);
    }
    a.call_stack = call_stack(op, original_);
  } else {
    a.op = fmt::format("<unknown op {}>", a.op_id);
  }
  a.source_op = a.op;
  a.source_step = a.step;
  a.source_rank = a.rank;
  log::debug("isr", "{} at {} element {} step {} cycle {} latency {}", anomaly_kind_name(a.kind), a.op, a.element, a.step,
             a.cycle, a.latency_cycles);
  return a;
}

std::vector<AnomalyRecord> ExceptionIsr::handle() {
  using namespace spec;
  const std::uint64_t now = dev_.cycles();
  dev_.write_reg(kRegIrqAck, kIrqException);
  const std::uint32_t pending = dev_.read_reg(kRegExcPending);
  std::vector<AnomalyRecord> out;
  if (!(pending & ExceptionUnit::kAllKinds)) {
    log::debug("isr", "spurious exception interrupt (no latch pending)");
    return out;
  }
  // Read, never cleared here: the status is the device's (process-wide on A2), and a clear would
  // erase an overflow the framework's own status read (float_status.h) has not seen yet.
  const std::uint32_t fs = dev_.read_reg(kRegFloatStatus);
  for (std::uint32_t k = 0; k < kExcKindCount; ++k) {
    if (!(pending & (1u << k))) continue;
    std::array<std::uint32_t, kExcLatchWords> bank{};
    dev_.read_regs(exc_latch_reg(k, 0), bank);
    dev_.write_reg(kRegExcAck, 1u << k);
    if (!(bank[0] & 1u)) continue;  // cleared meanwhile
    AnomalyRecord a = decode(k, bank, now);
    a.float_status = fs;
    out.push_back(std::move(a));
  }
  return out;
}

std::map<std::string, std::uint64_t> ExceptionIsr::read_counters() {
  using namespace spec;
  std::map<std::string, std::uint64_t> c;
  std::array<std::uint32_t, kExcKindCount> n{};
  dev_.read_regs(kRegExcCountBase, n);
  for (std::uint32_t k = 0; k < kExcKindCount; ++k)
    c[fmt::format("{}_count", anomaly_kind_name(static_cast<AnomalyKind>(k)))] = n[k];
  return c;
}

std::vector<std::uint32_t> ExceptionIsr::read_suppressed() {
  std::array<std::uint32_t, spec::kExcKindCount> n{};
  dev_.read_regs(spec::kRegExcSuppressedBase, n);
  return {n.begin(), n.end()};
}

}  // namespace probelab::probes
