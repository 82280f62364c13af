// The known pitfalls of the device-wide float status (chip_model/spec/float_status.h), as
// faults: another client resets the status between an overflow and the framework's read
// (status_reset), and an overflow only one data-parallel rank's data produces, which leaves no
// non-finite value behind (saturation clamps it) and shows only in that rank's status
// (status_rank_overflow). Both act after the named op's task completed.
#include <fmt/format.h>

#include "chip_model/spec/float_status.h"
#include "chip_model/spec/registers.h"
#include "injectors/injector.h"
#include "injectors/site.h"

namespace probelab::inject {
namespace {

std::string status_text(std::uint32_t bits) { return fmt::format("float status 0x{:02x}", bits); }

/// status_reset (`reset`) or status_rank_overflow: acts on the float status after the op's task.
class FloatStatusInjector final : public Injector {
 public:
  FloatStatusInjector(const Params& p, const InjectionEnv& env, bool reset) : reset_(reset) {
    graph_ = env.executed;
    seed_ = read_seed(p, env);
    site_ = read_site(p, env.executed, env.ranks, env.steps);
  }
  std::uint32_t sites() const override { return chip::kFaultFloatStatus; }

  void on_float_status(const chip::FaultSite& s, std::uint32_t status, chip::FloatStatusFault& f) override {
    if (!site_.matches(s)) return;
    if (reset_) {
      f.reset = true;
      record({s, op_name(s.op_id), "device float status, reset by another client after the op", status_text(status),
              status_text(0)});
    } else {
      f.raise = spec::kFsOverflow;
      record({s, op_name(s.op_id), "device float status, overflow raised on this rank only", status_text(status),
              status_text(status | spec::kFsOverflow)});
    }
  }

 private:
  SiteFilter site_;
  bool reset_;
};

}  // namespace

void register_float_status_injectors(InjectorRegistry& r) {
  {
    auto ps = site_params("", "0", "all");
    ps.push_back(seed_param());
    r.add({"status_reset",
           "another client of the device (a second runtime, a library's own check) resets the process-wide float "
           "status right after the op: an overflow raised before it is gone when the framework reads the status",
           std::move(ps),
           [](const Params& p, const InjectionEnv& env) { return std::make_unique<FloatStatusInjector>(p, env, true); }});
  }
  {
    auto ps = site_params("", "0", "0");
    ps.push_back(seed_param());
    r.add({"status_rank_overflow",
           "the op overflows on this rank only (its data shard; saturation clamps the value, so only the float "
           "status shows it): data-parallel ranks read different statuses",
           std::move(ps), [](const Params& p, const InjectionEnv& env) {
             return std::make_unique<FloatStatusInjector>(p, env, false);
           }});
  }
}

}  // namespace probelab::inject
