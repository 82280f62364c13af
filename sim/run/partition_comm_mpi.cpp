// PartitionComm over MPI: partition p is simulated by a child of MPI rank p. Per window every rank
// sends its partition's report, messages included, to all (MPI_Allgather of the sizes, then
// MPI_Allgatherv); every rank then applies the same decide_window() to the same reports, so all
// agree on the window and on the end of the run, and takes the messages for its partition.
#include <algorithm>
#include <climits>
#include <stdexcept>

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include "sim/run/detail/partition_wire.h"
#include "sim/run/mpi_session.h"
#include "sim/run/partition_run.h"

namespace probelab::sim {
namespace {

using Bytes = std::vector<std::uint8_t>;

int checked_int(std::size_t n) {
  if (n > static_cast<std::size_t>(INT_MAX)) throw std::runtime_error("distributed run: a window exceeds 2 GiB of messages");
  return static_cast<int>(n);
}

/// Every rank's `mine`, by rank.
std::vector<Bytes> allgather(const Bytes& mine, int size) {
  int n = checked_int(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(size)), displs(static_cast<std::size_t>(size));
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::size_t total = 0;
  for (int i = 0; i < size; ++i) {
    displs[static_cast<std::size_t>(i)] = checked_int(total);
    total += static_cast<std::size_t>(counts[static_cast<std::size_t>(i)]);
  }
  Bytes all(std::max<std::size_t>(total, 1));
  MPI_Allgatherv(mine.data(), n, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, MPI_COMM_WORLD);
  std::vector<Bytes> out;
  for (int i = 0; i < size; ++i)
    out.emplace_back(all.begin() + displs[static_cast<std::size_t>(i)],
                     all.begin() + displs[static_cast<std::size_t>(i)] + counts[static_cast<std::size_t>(i)]);
  return out;
}

class MpiComm final : public PartitionComm {
 public:
  MpiComm() : rank_(MpiSession::instance().rank()), size_(MpiSession::instance().size()) {}
  std::uint32_t processes() const override { return static_cast<std::uint32_t>(size_); }
  std::vector<std::uint32_t> local() const override { return {static_cast<std::uint32_t>(rank_)}; }
  bool writer() const override { return rank_ == 0; }
  int agree(int value) override {
    MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return value;
  }

  std::vector<WindowGrant> exchange(std::vector<WindowReport> reports, std::uint64_t lookahead_ps,
                                    std::uint64_t cell_ps) override {
    // One all-gather of the whole reports (a window's messages are few and small): every rank
    // decides the same windows from the same reports and keeps the messages for its partition.
    std::vector<Bytes> all = allgather(detail::encode_report(reports.at(0)), size_);
    std::vector<WindowReport> decoded;
    for (const auto& b : all) decoded.push_back(detail::decode_report(b));
    return {decide_window(std::move(decoded), lookahead_ps, cell_ps).at(static_cast<std::size_t>(rank_))};
  }

  std::vector<PartitionOutcome> gather(std::vector<PartitionOutcome> local) override {
    const Bytes mine = local.at(0).encode();
    int n = checked_int(mine.size());
    std::vector<int> counts(static_cast<std::size_t>(size_)), displs(counts.size());
    MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::size_t total = 0;
    for (int i = 0; rank_ == 0 && i < size_; ++i) {
      displs[static_cast<std::size_t>(i)] = checked_int(total);
      total += static_cast<std::size_t>(counts[static_cast<std::size_t>(i)]);
    }
    Bytes all(std::max<std::size_t>(total, 1));
    MPI_Gatherv(mine.data(), n, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, 0, MPI_COMM_WORLD);
    std::vector<PartitionOutcome> out;
    for (int i = 0; rank_ == 0 && i < size_; ++i)
      out.push_back(PartitionOutcome::decode(Bytes(all.begin() + displs[static_cast<std::size_t>(i)],
                                                   all.begin() + displs[static_cast<std::size_t>(i)] +
                                                       counts[static_cast<std::size_t>(i)])));
    return out;
  }

 private:
  int rank_, size_;
};

}  // namespace

std::unique_ptr<PartitionComm> mpi_partition_comm() { return std::make_unique<MpiComm>(); }

}  // namespace probelab::sim
