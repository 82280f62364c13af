// The peers of a campaign: one process alone, or the ranks of an MPI job started by mpirun. MPI is
// initialised only when the process was launched by an MPI starter (OMPI_COMM_WORLD_SIZE,
// PMI_SIZE or PMIX_RANK in the environment), so a plain `probelab` never touches it. Worker
// processes forked by a rank must never call into this object.
//
// Protocol: rank 0 broadcasts what every rank needs (golden envelope, timeout, finished trials);
// every rank runs the trials i with i mod size == rank and sends each result line to rank 0, then
// says it is finished; rank 0 receives while its own workers run and writes every output.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/run/mpi_session.h"

namespace probelab::sim {

class CampaignComm {
 public:
  virtual ~CampaignComm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Collective: every rank gets rank 0's `data`.
  virtual std::vector<std::uint8_t> broadcast(std::vector<std::uint8_t> data) = 0;
  /// Rank > 0: one result line to rank 0.
  virtual void send(const std::string& line) = 0;
  /// Rank > 0: no more lines from this rank.
  virtual void finish() = 0;
  /// Rank 0: the lines that have arrived (wait = false), or every line until all other ranks
  /// finished (wait = true).
  virtual std::vector<std::string> receive(bool wait) = 0;
  /// Ends the whole job after a fatal error on one rank.
  [[noreturn]] virtual void abort(int code) = 0;
};

/// MPI when launched by mpirun, else a single-process stand-in.
std::unique_ptr<CampaignComm> make_campaign_comm();

}  // namespace probelab::sim
