// The simulated system of one run (or of one partition of a distributed run): the chips simulated
// here, the cluster fabric (topology, network, collective engines), and one host CPU model per
// chip whose SimDevice talks TLM-2.0 to it. Elaborate once per process.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <systemc>

#include "chip_model/chip.h"
#include "chip_model/collective/cluster_config.h"
#include "chip_model/collective/collective_fabric.h"
#include "chip_model/core_interface.h"
#include "chip_model/hooks/fault_hooks.h"
#include "chip_model/kernels/prepared_op_pool.h"
#include "chip_model/trace.h"
#include "sim/platform/host_model.h"
#include "sim/platform/job_hang.h"
#include "sim/platform/partition_link.h"

namespace probelab::sim {

struct PlatformOptions {
  chip::ChipConfig chip;
  chip::ClusterConfig cluster;
  std::uint32_t ranks = 1;
  /// Distributed run: which process simulates each chip, and this process (nullptr: all here).
  const chip::PartitionMap* partition = nullptr;
  std::uint32_t process = 0;
  chip::CoreFactory make_cores;          // the AI core model
  chip::FaultHooks* faults = nullptr;    // non-owning; nullptr: no faults
  chip::Trace* trace = nullptr;          // non-owning; required
  HostCosts host;
  bool keep_collective_records = false;  // tests
};

class Platform : public sc_core::sc_module {
 public:
  /// Throws chip::ConfigError when the ranks do not fit the cluster.
  Platform(sc_core::sc_module_name name, const PlatformOptions& opts);
  ~Platform() override;

  /// Chips of the job.
  std::uint32_t ranks() const { return ranks_; }
  /// Chips simulated here, ascending.
  const std::vector<std::uint32_t>& local_ranks() const { return local_; }
  bool is_local(std::uint32_t rank) const { return rank < index_.size() && index_[rank] >= 0; }
  chip::Chip& chip(std::uint32_t rank) { return *chips_.at(at(rank)); }
  HostModel& host(std::uint32_t rank) { return *hosts_.at(at(rank)); }
  /// nullptr for a single chip.
  chip::CollectiveFabric* fabric() { return fabric_.get(); }
  const chip::ClusterTopology& topology() const { return *topology_; }

  /// Runs the simulation until every host program returned (or one failed), then stops.
  /// Rethrows the first host program error (lowest rank first), except a job hang (job_hang.h):
  /// then returns with hang() set.
  void run();
  /// The same for one partition of a distributed run: windows granted by `link` (partition_link.h)
  /// until the coordinator stops the run. Rethrows a local host program error; throws
  /// std::runtime_error with the coordinator's reason when the job could not finish; returns with
  /// hang() set to this partition's part when the coordinator found the job hung.
  void run_partition(PartitionLink& link);
  /// Simulated time when the last host program of the job returned (a hang: hang()->time_ps).
  sc_core::sc_time end_time() const { return end_time_; }
  /// The job hang the run ended in (this partition's ranks), if it did.
  const std::optional<JobHang>& hang() const { return hang_; }
  /// When rank `rank`'s program ended (simulated ps): a rank still waiting in a job hang waited
  /// until the hang was noticed.
  std::uint64_t finish_ps(std::uint32_t rank);

 private:
  class Outbox;
  std::size_t at(std::uint32_t rank) const;
  WindowReport report(Outbox& out) const;
  void rethrow_host_error() const;
  std::vector<HostEnd> host_ends() const;
  /// Sets hang_ (and the end time) when the run ended in a job hang; true then. A partition is
  /// given the time the job's first host timed out (its own hosts may have timed out later).
  bool note_hang(std::optional<std::uint64_t> first_timeout_ps = std::nullopt);

  std::uint32_t ranks_ = 1;
  std::unique_ptr<chip::ClusterTopology> topology_;
  std::vector<std::uint32_t> local_;
  std::vector<int> index_;  // rank -> index into chips_/hosts_, -1 when simulated elsewhere
  std::unique_ptr<chip::kernels::PreparedOpPool> ops_;  // shared by chips_ (declared first: outlives them)
  std::vector<std::unique_ptr<chip::Chip>> chips_;
  std::unique_ptr<chip::CollectiveFabric> fabric_;
  std::vector<std::unique_ptr<HostModel>> hosts_;
  std::uint32_t finished_ = 0;
  bool partitioned_ = false;
  bool stopping_ = false;
  sc_core::sc_time end_time_;
  std::optional<JobHang> hang_;
};

}  // namespace probelab::sim
