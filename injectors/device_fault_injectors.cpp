// Faults of the device's control and debug paths: a stuck-at bit on one vector lane, a dropped
// or delayed interrupt, a corrupted capture record — what the probe runtime must survive or report.
#include <algorithm>

#include <fmt/format.h>

#include "chip_model/spec/capture_record.h"
#include "chip_model/spec/irq.h"
#include "injectors/injector.h"
#include "injectors/site.h"

namespace probelab::inject {
namespace {

class StuckAtInjector final : public Injector {
 public:
  StuckAtInjector(const Params& p, const InjectionEnv& env) {
    graph_ = env.executed;
    seed_ = read_seed(p, env);
    site_ = read_site(p, env.executed, env.ranks, env.steps);
    lane_ = p.uinteger("lane");
    if (env.vector_lanes && lane_ >= env.vector_lanes)
      p.fail("lane", fmt::format("lane {} is outside the chip's Vector unit (lanes 0..{})", lane_, env.vector_lanes - 1));
    // The widest output element of the matched ops bounds the bit (a narrower one skips it).
    std::size_t widest = 0;
    for (std::uint32_t id = 0; env.executed && id < env.executed->ops().size(); ++id)
      if (site_.matches_op(id))
        for (const auto& out : env.executed->op(id).outputs)
          if (!out.empty()) widest = std::max(widest, element_bits(env.executed->tensor(out).desc.dtype));
    const std::uint64_t bit = p.uinteger("bit");
    if (widest && bit >= widest)
      p.fail("bit", fmt::format("bit {} is outside the matched ops' output elements ({} bits at most: 0..{})", bit, widest,
                                widest - 1));
    bit_ = static_cast<unsigned>(bit);
    value_ = p.integer("value");
    if (value_ != 0 && value_ != 1) p.fail("value", "a stuck bit is 0 or 1");
  }
  std::uint32_t sites() const override { return chip::kFaultVectorLanes; }

  void on_vector_lanes(const chip::FaultSite& s, const graph::TensorDesc& d, std::uint64_t offset,
                       std::uint32_t lanes, std::span<std::byte> bytes) override {
    if (!site_.matches(s) || lanes == 0) return;
    if (bit_ >= element_bits(d.dtype)) return;
    const auto n = bytes.size() / graph::dtype_size(d.dtype);
    std::uint64_t changed = 0, first = 0, first_before = 0, first_after = 0;
    for (std::uint64_t i = (lane_ + lanes - offset % lanes) % lanes; i < n; i += lanes) {
      const auto before = get_bits(bytes, d.dtype, i);
      const auto after = value_ ? (before | (std::uint64_t{1} << bit_)) : (before & ~(std::uint64_t{1} << bit_));
      if (after == before) continue;
      set_bits(bytes, d.dtype, i, after);
      if (changed++ == 0) {
        first = offset + i;
        first_before = before;
        first_after = after;
      }
    }
    if (changed == 0) return;
    record({s, op_name(s.op_id),
            fmt::format("lane {} of {} bit {} stuck at {}: {} element(s) changed, first element {}", lane_, lanes, bit_,
                        value_, changed, first),
            hex_bits(first_before, d.dtype), hex_bits(first_after, d.dtype)});
  }

 private:
  SiteFilter site_;
  std::uint64_t lane_ = 0;
  unsigned bit_ = 0;
  std::int64_t value_ = 0;
};

std::uint32_t irq_line(const Params& p) {
  const auto l = p.choice("line", {"exception", "capture_full", "stream_done", "breakpoint", "collective"});
  if (l == "exception") return spec::kIrqException;
  if (l == "capture_full") return spec::kIrqCaptureFull;
  if (l == "stream_done") return spec::kIrqStreamDone;
  if (l == "breakpoint") return spec::kIrqBreakpoint;
  return spec::kIrqCollective;
}

class InterruptInjector final : public Injector {
 public:
  InterruptInjector(const Params& p, const InjectionEnv& env) {
    graph_ = env.executed;
    seed_ = read_seed(p, env);
    line_ = irq_line(p);
    drop_ = p.choice("action", {"drop", "delay"}) == "drop";
    delay_ps_ = p.uinteger("delay_ps");
    if (!drop_ && delay_ps_ == 0) p.fail("delay_ps", "action delay needs a positive delay");
    occurrences_ = p.index_set("occurrence");
    ranks_ = p.index_set("rank");
  }
  std::uint32_t sites() const override { return chip::kFaultInterrupt; }

  chip::InterruptFault on_interrupt(const chip::FaultSite& s, std::uint32_t line) override {
    if (line != line_ || !ranks_.contains(s.rank)) return {};
    const auto n = seen_[s.rank]++;
    if (!occurrences_.contains(n)) return {};
    chip::InterruptFault f;
    f.drop = drop_;
    f.extra_delay_ps = drop_ ? 0 : delay_ps_;
    record({s, "", fmt::format("irq line 0x{:x} occurrence {}", line, n), "delivered",
            drop_ ? "dropped" : fmt::format("delayed by {} ps", delay_ps_)});
    return f;
  }

 private:
  std::uint32_t line_ = 0;
  bool drop_ = true;
  std::uint64_t delay_ps_ = 0;
  IndexSet occurrences_, ranks_;
  std::map<std::uint32_t, std::uint64_t> seen_;
};

class CaptureCorruptInjector final : public Injector {
 public:
  CaptureCorruptInjector(const Params& p, const InjectionEnv& env) {
    graph_ = env.executed;
    seed_ = read_seed(p, env);
    records_ = p.index_set("record");
    ranks_ = p.index_set("rank");
    const auto b = p.node("byte");
    payload_relative_ = b.IsScalar() && b.Scalar() == "payload";
    if (!payload_relative_) byte_ = p.uinteger("byte");
    bit_ = static_cast<unsigned>(p.uinteger("bit"));
    if (bit_ > 7) p.fail("bit", "a bit of a byte is 0..7");
  }
  std::uint32_t sites() const override { return chip::kFaultCaptureRecord; }

  void on_capture_record(const chip::FaultSite& s, std::span<std::byte> record) override {
    if (!ranks_.contains(s.rank)) return;
    const auto n = seen_[s.rank]++;
    if (!records_.contains(n) || record.empty()) return;
    std::size_t at = payload_relative_ ? sizeof(spec::CaptureRecordHeader) : byte_;
    at %= record.size();
    const auto before = std::to_integer<unsigned>(record[at]);
    record[at] ^= std::byte{static_cast<unsigned char>(1u << bit_)};
    this->record({s, op_name(s.op_id), fmt::format("capture record {} byte {} bit {}", n, at, bit_),
                  fmt::format("0x{:02x}", before), fmt::format("0x{:02x}", std::to_integer<unsigned>(record[at]))});
  }

 private:
  IndexSet records_, ranks_;
  bool payload_relative_ = true;
  std::uint64_t byte_ = 0;
  unsigned bit_ = 0;
  std::map<std::uint32_t, std::uint64_t> seen_;
};

}  // namespace

void register_device_fault_injectors(InjectorRegistry& r) {
  {
    auto ps = site_params("*", "all", "0");
    ps.push_back({"lane", "int", "", "vector lane whose output bit is stuck"});
    ps.push_back({"bit", "int", "", "bit position within the element"});
    ps.push_back({"value", "0|1", "1", "the value the bit is stuck at"});
    ps.push_back(seed_param());
    r.add({"stuck_at", "a stuck-at bit on one lane of the vector unit", std::move(ps),
           [](const Params& p, const InjectionEnv& env) { return std::make_unique<StuckAtInjector>(p, env); }});
  }
  {
    std::vector<ParamSpec> ps = {
        {"line", "exception|capture_full|stream_done|breakpoint|collective", "", "interrupt line"},
        {"action", "drop|delay", "drop", "lose the interrupt message, or deliver it late"},
        {"delay_ps", "int", "0", "extra delivery delay for action delay"},
        {"occurrence", "int | list | all", "0", "which raises of the line (counted from 0 per rank)"},
        {"rank", "int | list | all", "0", "ranks"},
        seed_param(),
    };
    r.add({"interrupt", "drop or delay an interrupt", std::move(ps),
           [](const Params& p, const InjectionEnv& env) { return std::make_unique<InterruptInjector>(p, env); }});
  }
  {
    std::vector<ParamSpec> ps = {
        {"record", "int | list | all", "0", "which capture records (counted from 0 per rank)"},
        {"byte", "int | payload", "payload", "byte offset in the record (payload: its first payload byte)"},
        {"bit", "int", "0", "bit of that byte to flip"},
        {"rank", "int | list | all", "0", "ranks"},
        seed_param(),
    };
    r.add({"capture_corrupt", "flip a bit of a debug capture record on its way to the buffer", std::move(ps),
           [](const Params& p, const InjectionEnv& env) { return std::make_unique<CaptureCorruptInjector>(p, env); }});
  }
}

}  // namespace probelab::inject
