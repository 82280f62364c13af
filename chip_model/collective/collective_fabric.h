// The multi-chip side of one simulation partition: the cluster topology, the network carrying the
// collectives' messages, and one CollectiveEngine per chip simulated here. Everything is O(chips +
// links): no per-pair state, no copy of another rank's data, no global meeting point. A
// collective completes on each rank when its own program is done.
//
// Usage (platform assembly): create the local Chips, then a CollectiveFabric over the topology,
// then attach(chip) for each. In a distributed run pass the partition map and this process's
// index, and connect the network's boundary (network.h). A rank whose peers never issue the
// collective waits for ever; pending() lists such waits ("r5 waits for r4 ...").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <systemc>

#include "chip_model/collective/cluster_topology.h"
#include "chip_model/collective/collective_engine.h"
#include "chip_model/collective/network.h"

namespace probelab::chip {

class Chip;
class Trace;

class CollectiveFabric : public sc_core::sc_module {
 public:
  struct Options {
    const PartitionMap* partition = nullptr;  // nullptr: every chip is simulated here
    std::uint32_t process = 0;
    Trace* trace = nullptr;
    bool keep_records = false;  // engines keep a CollectiveRecord per collective (tests)
  };

  CollectiveFabric(sc_core::sc_module_name name, ClusterTopology topology, Options opts);
  ~CollectiveFabric() override;

  const ClusterTopology& topology() const { return topo_; }
  std::uint32_t size() const { return topo_.ranks(); }
  Network& network() { return *network_; }
  const Network& network() const { return *network_; }
  bool local(std::uint32_t rank) const { return rank < engines_.size() && engines_[rank] != nullptr; }
  /// The engine of a chip simulated here; throws std::out_of_range otherwise.
  CollectiveEngine& engine(std::uint32_t rank);
  /// Connects chip `chip.rank()` to its engine (Chip::set_collective_handler).
  void attach(Chip& chip);
  CommGroup group(CommKind kind, std::uint32_t rank) const { return topo_.group(kind, rank); }
  bool keep_records() const { return opts_.keep_records; }
  Trace* trace() const { return opts_.trace; }

  /// Engines blocked on a message: "r5 waits for r4 in comm 0 #3 (message 2)".
  std::vector<std::string> pending() const;
  /// Every local rank's blocked collectives, by rank.
  std::vector<BlockedCollective> blocked() const;

 private:
  void start_of_simulation() override;  // applies the chips' degraded and dead links (PerfFaults)
  /// The link `src` sends on towards `dst`; throws std::invalid_argument naming the `what` link
  /// when there is none of its own (dst outside the job, or further along an HCCS ring).
  std::size_t first_link(std::uint32_t src, std::uint32_t dst, const char* what) const;

  ClusterTopology topo_;
  Options opts_;
  std::vector<Chip*> chips_;
  std::unique_ptr<Network> network_;
  std::vector<std::unique_ptr<CollectiveEngine>> engines_;  // by rank; null: simulated elsewhere
};

}  // namespace probelab::chip
