// Timing of one op's tile plan (kernels/tiling.h) on the granted AI cores: per core a
// double-buffered pipeline MTE load -> Cube/Vector compute -> Vector epilogue -> MTE store.
//
// Per core, step i's load may start when the MTE is free and the compute of step i-depth freed
// its input buffer (plan.depth: 2 = double buffering, more when L1 stages several steps); compute of step i starts when its operands are loaded, the
// previous step's compute is done and, for the first step of an output tile j, the store of
// tile j-2 freed the output buffer (L0C/UB double buffering). After a tile's last step its
// epilogue runs on the Vector pipe, then its store on the MTE. So in steady state a tile costs
// max(load, compute, store), plus fill and drain.
//
// Mixed Cube + Vector kernels on a split chip (PipelineOptions::aiv_per_unit > 0, Ascend C's mixed
// mode with one Cube core (AIC) and its Vector cores (AIV) per unit): after a tile's last Cube
// step the AIC's fixpipe writes the tile's FP32 result (TileStep::handoff_bytes) into a
// double-buffered workspace in the L2 at the L2 write port and sets a cross-core flag
// (CrossCoreSetFlag); AIV (the unit's local tile index mod aiv_per_unit) waits for it
// (CrossCoreWaitFlag, `flag_ps` later), loads the tile from the workspace at the L2 read port,
// runs the tile's epilogue (post_cycles) and stores the tile's output share on its own MTE; the
// fixpipe may write tile j + 2 into the workspace slot once that AIV has loaded tile j and flagged
// it back, and the Cube may compute tile j + 2 once the fixpipe has drained tile j out of L0C
// (double-buffered). So the AIV works on tile j while the AIC computes tile j + 1. An epilogue
// that only reads the result (epilogue_reads_output: in-kernel statistics) needs no workspace:
// the AIC stores the tile, flags the AIV, which reads the stored tile back from the L2.
//
// Loads and stores are charged on the shared HBM model (Hbm::transfer, client Core, the core's
// MTE port rate) in increasing time order over all cores, so cores contend with each other and
// with every other HBM initiator; loads that hit the L2 (tiling.h) only take the L2 port time,
// and blocks of a panel the core holds in its L1 (TileLoad::resident) take no load time at all.
// The MTEs keep requests in flight: a core's next load (store) may be issued once the previous
// one has finished moving its bytes; the HBM latency only delays the data's arrival.
// The simulation runs inside the calling SC_THREAD and wait()s whenever its next request lies
// more than `sync_ahead` ahead of SystemC time (default 0: every request is made at its own
// time), so the requests of concurrent ops and other initiators reach the HBM model in time
// order and share its bandwidth fairly. A larger value trades that fairness for fewer waits.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <systemc>

#include "chip_model/kernels/tiling.h"

namespace probelab::chip {

class Hbm;
class L2Cache;

using kernels::AddrRange;

struct PipelineResult {
  std::uint64_t start_ps = 0, end_ps = 0;
  std::vector<std::uint64_t> tile_done_ps;  // per global tile: end of its compute + epilogue
  struct CoreSpan {
    std::uint64_t mte_first_ps = 0, mte_last_ps = 0, mte_busy_ps = 0;
    std::uint64_t cube_first_ps = 0, cube_last_ps = 0, cube_busy_ps = 0;
    std::uint64_t vec_first_ps = 0, vec_last_ps = 0, vec_busy_ps = 0;
    std::uint64_t tiles = 0;
  };
  std::size_t units = 0;  // the plan's units (plan.steps.size())
  /// Per plan unit up to the last one with work (the units after it did nothing: a small op's
  /// tiles go to the first units), so cores.size() <= units.
  std::vector<CoreSpan> cores;
  /// Mixed kernels: per Vector core (unit u's AIV a at u * aiv_per_unit + a): its epilogue and
  /// MTE work, for the units of `cores`.
  std::vector<CoreSpan> aivs;
  /// Mixed kernels: one hand-over per tile, AIC -> AIV through the workspace.
  struct Handoff {
    std::uint32_t unit = 0, aiv = 0;  // plan unit (AIC), its AIV
    std::int64_t tile = -1;           // global tile
    std::uint64_t fix_start_ps = 0;   // the fixpipe starts writing the workspace slot
    std::uint64_t set_ps = 0;         // CrossCoreSetFlag (slot written)
    std::uint64_t wait_start_ps = 0;  // the AIV starts waiting (free after its previous tile)
    std::uint64_t load_start_ps = 0;  // CrossCoreWaitFlag returned: the AIV loads the slot
    std::uint64_t load_end_ps = 0;    // slot in the AIV's UB: the flag back frees the slot
    std::uint64_t vec_end_ps = 0;     // epilogue done (the store follows on the AIV's MTE)
  };
  std::vector<Handoff> handoffs;
  bool readback = false;            // the hand-overs are stored output tiles (epilogue_reads_output)
  std::uint64_t handoff_bytes = 0;  // workspace bytes written (and read back)
  std::uint64_t hbm_read_bytes = 0, hbm_write_bytes = 0, l2_read_bytes = 0;
  // Shared L2 only: bytes stored into it, lines fetched from HBM on misses, dirty lines written back.
  std::uint64_t l2_write_bytes = 0, l2_miss_bytes = 0, l2_writeback_bytes = 0;
  std::uint64_t cube_cycles = 0, vector_cycles = 0;  // summed over cores
  /// Per-step spans of each core when recorded (verbose trace): pipe 0 MTE-in, 1 compute, 2 epilogue, 3 store.
  struct StepSpan {
    std::uint32_t core;
    std::uint8_t pipe;
    bool cube;
    std::uint64_t start_ps, end_ps;
  };
  std::vector<StepSpan> spans;
};

struct PipelineOptions {
  std::uint32_t clock_mhz = 1000;
  double mte_gbps = 0;     // core MTE port, GB/s
  double l2_gbps = 0;      // core L2 read port, GB/s
  std::uint64_t hbm_latency_ps = 0;  // part of an HBM transfer's time that later requests overlap
  sc_core::sc_time sync_ahead = sc_core::SC_ZERO_TIME;
  bool record_spans = false;
  /// The chip's shared L2 (ChipConfig::l2_model "shared"), else null: the op-reuse model above.
  /// With it, every tile load looks its bytes up in the L2 (Cube operand blocks: their slice,
  /// TileLoad::l2_addr; Vector loads: their share of the inputs, `inputs` concatenated): hits move
  /// over the L2 port (l2_gbps), misses come from HBM (MTE port) and are allocated; stores write
  /// into the L2 (l2_write_gbps, their share of `outputs` concatenated); evicted dirty lines are
  /// written back to HBM (posted: they load the HBM channels, the core does not wait for them).
  L2Cache* l2 = nullptr;
  double l2_write_gbps = 0;
  /// Split chip, mixed Cube + Vector kernel: the Vector cores per unit (see above); 0: the
  /// epilogue runs on the unit's own Vector pipe. `flag_ps`: a cross-core flag's latency.
  std::uint32_t aiv_per_unit = 0;
  std::uint64_t flag_ps = 0;
  /// Mixed kernels whose epilogue only reads the result (in-kernel statistics of a Cube op): the
  /// AIC's fixpipe stores each output tile as a plain Cube op does, then flags the AIV, which
  /// reads the stored tile back from the L2 (store_bytes at l2_gbps) and runs its pass
  /// (post_cycles); no workspace, the AIC never waits for the AIV.
  bool epilogue_reads_output = false;
  /// The op's stored inputs and outputs (absent ones left out); they outlive the call.
  std::span<const AddrRange> inputs, outputs;
};

/// Runs `plan` starting at absolute time `start` and returns when everything is timed (the
/// caller sets its quantum keeper to result.end_ps). Must be called from an SC_THREAD.
PipelineResult run_pipeline(const kernels::TilePlan& plan, Hbm& hbm, const sc_core::sc_time& start,
                            const PipelineOptions& opt);

}  // namespace probelab::chip
