// MPI for the whole process, initialised only when an MPI starter launched it (OMPI_COMM_WORLD_SIZE,
// PMI_SIZE or PMIX_RANK in the environment), so a plain `probelab` never touches MPI. One session
// per process, finalized at exit; processes forked from an MPI process must never call MPI (they
// talk to their parent instead: distributed runs, sim/run/partition_run.h, and campaign workers).
#pragma once

namespace probelab::sim {

/// True when an MPI starter launched this process.
bool launched_by_mpi();

class MpiSession {
 public:
  /// Initialises MPI on first use (MPI_COMM_WORLD); finalized when the process exits.
  static MpiSession& instance();
  int rank() const { return rank_; }
  int size() const { return size_; }
  /// Ends the whole job after a fatal error on one rank.
  [[noreturn]] void abort(int code);

 private:
  MpiSession();
  int rank_ = 0, size_ = 1;
};

}  // namespace probelab::sim
