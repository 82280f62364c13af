#include "sim/run/mpi_session.h"

#include <cstdlib>
#include <initializer_list>

// Only the C API is used: keep the deprecated C++ bindings out.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

namespace probelab::sim {

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

namespace {
void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}
}  // namespace

MpiSession::MpiSession() {
  int done = 0;
  MPI_Initialized(&done);
  if (!done) {
    MPI_Init(nullptr, nullptr);
    std::atexit(finalize_at_exit);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession& MpiSession::instance() {
  static MpiSession s;
  return s;
}

void MpiSession::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

}  // namespace probelab::sim
