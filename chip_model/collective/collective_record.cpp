#include "chip_model/collective/collective_record.h"

#include <fmt/format.h>

namespace probelab::chip {

std::string CollectiveRecord::describe() const {
  std::string out = fmt::format(
      "comm {} #{} {} {}: r{} (position {} of {}), task {}, acc {}, arrived {:.3f} us, transfers done {:.3f} us, "
      "finished {:.3f} us, waited {:.3f} us, sent {} bytes in {} messages, flags {}",
      comm_id, seq, spec::collective_op_name(op), spec::collective_algo_name(algo), rank, position, group_size,
      task_id, graph::dtype_name(acc_dtype), arrival_ps * 1e-6, done_ps * 1e-6, finish_ps * 1e-6,
      recv_wait_ps * 1e-6, bytes_sent, messages_sent, num::to_string(flags));
  if (overridden) out += ", overridden";
  if (!order.empty()) out += fmt::format(", order {}", fmt::join(order, " "));
  if (jitter_seed) out += fmt::format(", jitter seed {}", jitter_seed);
  return out;
}

}  // namespace probelab::chip
