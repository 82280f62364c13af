// N chips in one simulation: the inter-chip links, one CollectiveEngine per chip, and the meeting
// point where the ranks of a collective find each other.
//
// Topologies (links are per direction, each with the bandwidth and latency of the config):
//   FullMesh  a link between every ordered pair of chips (Atlas 800T A2-like: 8 chips, 7 HCCS
//             links each); every transfer takes one hop.
//   Ring      links only between chip r and r+1 (both directions); a transfer between chips that
//             are not neighbours is routed the shorter way round (ties: increasing rank),
//             cut-through over the hops, and shares those links.
// FabricConfig::from_chip_config takes link_bandwidth_gbps / link_latency_ns of the chip config
// (sources documented there) and picks FullMesh when link_count >= N-1, else Ring.
//
// Usage (platform assembly): create the N Chips, then a CollectiveFabric of N chips, then
// attach(chip) for each. A collective completes once every rank of its group issued it; a rank
// that never does leaves its peers waiting (the fabric lists such collectives in pending()).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <systemc>

#include "chip_model/chip_config.h"
#include "chip_model/collective/collective_engine.h"
#include "chip_model/collective/collective_record.h"
#include "chip_model/hooks/fault_hooks.h"
#include "chip_model/collective/link.h"
#include "numerics/bulk.h"
#include "numerics/mode.h"
#include "chip_model/spec/collective_args.h"

namespace probelab::chip {

class Chip;
class Hbm;
class Trace;

enum class Topology : std::uint8_t { FullMesh, Ring };
std::string_view topology_name(Topology t);
/// "full_mesh" or "ring"; throws ConfigError naming the value otherwise.
Topology parse_topology(std::string_view s);

struct FabricConfig {
  Topology topology = Topology::FullMesh;
  double link_bandwidth_gbps = 56.0;   // per link and direction
  std::uint32_t link_latency_ns = 1000;
  static FabricConfig from_chip_config(const ChipConfig& cfg, std::uint32_t num_chips);
};

/// What one rank brings to a collective (filled by its engine).
struct CollectiveJoin {
  std::uint32_t rank = 0;
  std::uint32_t task_id = 0;
  spec::CollectiveArgs args;
  std::optional<CollectiveOverride> override_;
  std::vector<std::byte> input;      // staged input (empty for Broadcast non-roots)
  num::Mode mode;
  std::uint64_t arrival_ps = 0;
  Hbm* hbm = nullptr;
};

/// What it takes home once every rank arrived.
struct CollectiveTicket {
  bool resolved = false;
  std::uint32_t position = 0;
  std::uint64_t done_ps = 0;
  std::vector<std::byte> output;
  num::BulkReport report;
  std::shared_ptr<CollectiveRecord> record;
};

class CollectiveFabric : public sc_core::sc_module {
 public:
  CollectiveFabric(sc_core::sc_module_name name, std::uint32_t num_chips, const FabricConfig& cfg,
                   Trace* trace = nullptr);
  ~CollectiveFabric() override;

  std::uint32_t size() const { return static_cast<std::uint32_t>(engines_.size()); }
  const FabricConfig& config() const { return cfg_; }
  CollectiveEngine& engine(std::uint32_t rank) { return *engines_.at(rank); }
  /// Connects chip `chip.rank()` to its engine (Chip::set_collective_handler).
  void attach(Chip& chip);

  /// Links from chip `src` to chip `dst` (one for FullMesh). Throws std::out_of_range.
  std::vector<Link*> route(std::uint32_t src, std::uint32_t dst) const;
  /// Every link, in (src, dst) order.
  std::vector<const Link*> links() const;

  /// Completed collectives in completion order.
  const std::vector<std::shared_ptr<CollectiveRecord>>& history() const { return history_; }
  /// Collectives some ranks joined and others did not (yet): "comm 3 #0: waiting for r5, r7".
  std::vector<std::string> pending() const;

  /// Called by engines: joins collective number `seq` of communicator `join.args.comm_id`. If
  /// this was the last rank, the collective is resolved before returning.
  std::shared_ptr<CollectiveTicket> join(CollectiveJoin join, std::uint32_t seq);

 private:
  struct Pending;
  void resolve(std::pair<std::uint32_t, std::uint32_t> key, Pending& p);
  void end_of_simulation() override;

  FabricConfig cfg_;
  Trace* trace_;
  void start_of_simulation() override;  // applies the chips' degraded links (PerfFaults::link_fraction)
  std::vector<Chip*> chips_;
  std::vector<std::unique_ptr<CollectiveEngine>> engines_;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::unique_ptr<Link>> links_;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::unique_ptr<Pending>> pending_;
  std::vector<std::shared_ptr<CollectiveRecord>> history_;
};

/// The name the platform assembly uses for the N-chip helper.
using MultiChipFabric = CollectiveFabric;

}  // namespace probelab::chip
