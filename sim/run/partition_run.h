// A distributed simulation: the chips of one job partitioned over several processes (whole
// servers each), every partition in its own process and SystemC kernel, synchronised
// conservatively in windows of one lookahead (sim/platform/partition_link.h) and exchanging the
// network's messages between windows.
//
// Process structure. SystemC elaborates once per process and a forked process must not call MPI,
// so every partition runs in a child process forked for the simulation; it talks to its parent
// over a socket (one frame per window: its report up, its grant down). The parents meet through a
// PartitionComm: one process holding every partition's child (local_partition_comm: `probelab run
// --partitions K`, no MPI), or one parent per MPI rank (mpi_partition_comm: `mpirun -np K
// probelab run`), which exchange window reports and messages with MPI_Allgatherv/Alltoallv.
// At the end the children send their PartitionResult up and the writer (process 0) merges them
// into the same result a single process gives.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/platform/partition_link.h"
#include "sim/run/simulation.h"

namespace probelab::sim {

/// How one partition's child ended: its result, or why it failed.
struct PartitionOutcome {
  bool ok = false;
  std::vector<std::uint8_t> result;  // PartitionResult::encode()
  std::string error;
  bool bad_input = false;
  std::vector<std::uint8_t> encode() const;
  static PartitionOutcome decode(const std::vector<std::uint8_t>& bytes);
};

class PartitionComm {
 public:
  virtual ~PartitionComm() = default;
  /// Partitions (processes of the run).
  virtual std::uint32_t processes() const = 0;
  /// The partitions whose children this process runs, ascending.
  virtual std::vector<std::uint32_t> local() const = 0;
  /// One window: the local partitions' reports (in local() order) -> their grants.
  virtual std::vector<WindowGrant> exchange(std::vector<WindowReport> reports, std::uint64_t lookahead_ps,
                                            std::uint64_t cell_ps) = 0;
  /// The local partitions' outcomes -> every partition's outcome (by partition) on the writer,
  /// nothing elsewhere.
  virtual std::vector<PartitionOutcome> gather(std::vector<PartitionOutcome> local) = 0;
  /// Whether this process writes the result (partition 0's process).
  virtual bool writer() const = 0;
  /// The writer's `value` on every process (also a barrier behind the writer).
  virtual int agree(int value) = 0;
};

/// Every partition's child in this process (no MPI).
std::unique_ptr<PartitionComm> local_partition_comm(std::uint32_t processes);
/// One partition per MPI rank of MPI_COMM_WORLD (MpiSession).
std::unique_ptr<PartitionComm> mpi_partition_comm();

/// The partition map of a run over `processes` processes: the scenario's cluster.partition, or
/// servers split evenly. Throws chip::ConfigError (bad input) when the job cannot be split so:
/// more processes than chips or servers, a map of the wrong size or process count, a split server.
chip::PartitionMap partition_map(const PreparedRun& run, std::uint32_t processes);

/// Runs `req` distributed over `comm`'s partitions. On the writer returns simulate()'s result or
/// {status: error, error, bad_input}; elsewhere null. `timeout_s` (0: none) bounds each child.
nlohmann::json simulate_distributed(const SimRequest& req, PartitionComm& comm, unsigned timeout_s);

}  // namespace probelab::sim
