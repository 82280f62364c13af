// The collective engine of one chip: runs this chip's part of Collective tasks (the
// CollectiveHandler the stream engine calls) and meets its peers through the CollectiveFabric.
//
// run(ctx), on the stream's thread:
//  1. reads the CollectiveArgs block (spec/collective_args.h) from HBM (timed);
//  2. calls FaultHooks::on_collective (if the hooks want kFaultCollective) — the injector's
//     CollectiveOverride may force the algorithm (must then be forced on every rank of the group),
//     the accumulation dtype of this rank's adder, this rank's reduction order (Direct; chip ranks;
//     replaces order_mode) and a seeded arrival jitter on this rank's incoming transfers;
//  3. stages its input from HBM (timed; Broadcast: the root only), as HCCL copies user buffers
//     into its communication buffer;
//  4. joins the collective (matched per communicator by issue index) and waits for its peers;
//     the last rank to arrive times the whole schedule (collective_timing.h) and computes the
//     values (collective_math.h);
//  5. writes its output to HBM (timed) from the time its transfers were done, reports the flags
//     of the additions it performed (and NaNs in its input) to the detection circuit, records a
//     trace span, and returns with ctx.qk at the completion time.
// Bad arguments, ranks that disagree on the collective, or a chip outside the group throw
// std::runtime_error naming the task and field.
#pragma once

#include <cstdint>
#include <map>

#include <systemc>

#include "chip_model/collective_handler.h"

namespace probelab::chip {

class CollectiveFabric;

class CollectiveEngine : public sc_core::sc_module, public CollectiveHandler {
 public:
  CollectiveEngine(sc_core::sc_module_name name, std::uint32_t rank, CollectiveFabric& fabric);

  std::uint32_t rank() const { return rank_; }
  void run(TaskContext& ctx) override;

  /// Collectives this chip completed.
  std::uint64_t completed() const { return completed_; }

  /// Wakes the threads of this chip waiting for a collective (called by the fabric).
  void wake() { resolved_.notify(sc_core::SC_ZERO_TIME); }

 private:
  std::uint32_t rank_;
  CollectiveFabric& fabric_;
  sc_core::sc_event resolved_;
  std::map<std::uint32_t, std::uint32_t> next_seq_;  // per communicator
  std::uint64_t completed_ = 0;
};

}  // namespace probelab::chip
