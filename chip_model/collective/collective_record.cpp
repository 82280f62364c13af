#include "chip_model/collective/collective_record.h"

#include <fmt/format.h>

namespace probelab::chip {

std::string CollectiveRecord::describe() const {
  std::string out = fmt::format("comm {} #{}: {}", comm_id, seq, plan.describe());
  for (std::size_t p = 0; p < arrival_ps.size(); ++p) {
    out += fmt::format("  r{}: task {} arrived {:.3f} us, transfers done {:.3f} us, finished {:.3f} us, flags {}",
                       plan.group.at(p), task_id.at(p), arrival_ps[p] * 1e-6, done_ps.at(p) * 1e-6,
                       finish_ps.at(p) * 1e-6, num::to_string(flags.at(p)));
    if (overridden.at(p)) out += ", overridden";
    out += ", arrival order";
    for (auto q : arrival_order.at(p)) out += fmt::format(" r{}", plan.group.at(q));
    out += '\n';
  }
  if (jitter_seed) out += fmt::format("  jitter seed {}\n", jitter_seed);
  return out;
}

}  // namespace probelab::chip
