// PartitionComm over MPI: partition p is simulated by a child of MPI rank p. Per window every rank
// sends its partition's header (the report without its messages) to all (MPI_Allgatherv) and each
// message to the rank that owns its next hop (MPI_Alltoallv); every rank then applies the same
// decide_window() to the same headers, so all agree on the window and on the end of the run.
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

/// send[i] to rank i; returns what each rank sent here.
std::vector<Bytes> alltoall(const std::vector<Bytes>& send, int size) {
  std::vector<int> sc(static_cast<std::size_t>(size)), sd(sc.size()), rc(sc.size()), rd(sc.size());
  Bytes flat;
  for (int i = 0; i < size; ++i) {
    sd[static_cast<std::size_t>(i)] = checked_int(flat.size());
    sc[static_cast<std::size_t>(i)] = checked_int(send[static_cast<std::size_t>(i)].size());
    flat.insert(flat.end(), send[static_cast<std::size_t>(i)].begin(), send[static_cast<std::size_t>(i)].end());
  }
  MPI_Alltoall(sc.data(), 1, MPI_INT, rc.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::size_t total = 0;
  for (int i = 0; i < size; ++i) {
    rd[static_cast<std::size_t>(i)] = checked_int(total);
    total += static_cast<std::size_t>(rc[static_cast<std::size_t>(i)]);
  }
  Bytes in(std::max<std::size_t>(total, 1));
  if (flat.empty()) flat.resize(1);
  MPI_Alltoallv(flat.data(), sc.data(), sd.data(), MPI_BYTE, in.data(), rc.data(), rd.data(), MPI_BYTE, MPI_COMM_WORLD);
  std::vector<Bytes> out;
  for (int i = 0; i < size; ++i)
    out.emplace_back(in.begin() + rd[static_cast<std::size_t>(i)],
                     in.begin() + rd[static_cast<std::size_t>(i)] + rc[static_cast<std::size_t>(i)]);
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

  std::vector<WindowGrant> exchange(std::vector<WindowReport> reports, std::uint64_t lookahead_ps) override {
    WindowReport& mine = reports.at(0);
    std::vector<Bytes> headers = allgather(detail::encode_header(mine), size_);
    std::vector<std::vector<chip::Message>> by_dest(static_cast<std::size_t>(size_));
    for (auto& [to, m] : mine.outgoing) by_dest.at(to).push_back(std::move(m));
    std::vector<Bytes> send;
    for (const auto& ms : by_dest) send.push_back(ms.empty() ? Bytes{} : detail::encode_messages(ms));
    std::vector<Bytes> recv = alltoall(send, size_);
    std::vector<WindowReport> all;
    for (const auto& h : headers) all.push_back(detail::decode_header(h));
    WindowGrant g = decide_window(std::move(all), lookahead_ps).at(static_cast<std::size_t>(rank_));
    for (const auto& b : recv)
      for (auto& m : detail::decode_messages(b)) g.incoming.push_back(std::move(m));
    std::sort(g.incoming.begin(), g.incoming.end(), [](const chip::Message& a, const chip::Message& b) {
      return std::tie(a.head_ps, a.src, a.seq) < std::tie(b.head_ps, b.src, b.seq);
    });
    return {std::move(g)};
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
