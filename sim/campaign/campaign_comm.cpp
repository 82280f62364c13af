#include "sim/campaign/campaign_comm.h"

#include "sim/run/mpi_session.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

// Only the C API is used: keep the deprecated C++ bindings out.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

namespace probelab::sim {

namespace {

constexpr int kTagLine = 1;
constexpr int kTagDone = 2;

class Single final : public CampaignComm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::vector<std::uint8_t> broadcast(std::vector<std::uint8_t> data) override { return data; }
  void send(const std::string&) override { throw std::logic_error("campaign: send() on a single process"); }
  void finish() override {}
  std::vector<std::string> receive(bool) override { return {}; }
  [[noreturn]] void abort(int code) override { std::exit(code); }
};

class Mpi final : public CampaignComm {
 public:
  Mpi() : rank_(MpiSession::instance().rank()), size_(MpiSession::instance().size()) { pending_ = size_ - 1; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::vector<std::uint8_t> broadcast(std::vector<std::uint8_t> data) override {
    std::uint64_t n = data.size();
    MPI_Bcast(&n, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    data.resize(n);
    // In chunks below INT_MAX bytes.
    for (std::uint64_t off = 0; off < n;) {
      const int chunk = static_cast<int>(std::min<std::uint64_t>(n - off, 1u << 30));
      MPI_Bcast(data.data() + off, chunk, MPI_BYTE, 0, MPI_COMM_WORLD);
      off += static_cast<std::uint64_t>(chunk);
    }
    return data;
  }

  void send(const std::string& line) override {
    MPI_Send(line.data(), static_cast<int>(line.size()), MPI_CHAR, 0, kTagLine, MPI_COMM_WORLD);
  }
  void finish() override { MPI_Send(nullptr, 0, MPI_CHAR, 0, kTagDone, MPI_COMM_WORLD); }

  std::vector<std::string> receive(bool wait) override {
    std::vector<std::string> out;
    while (true) {
      MPI_Status st;
      int flag = 0;
      if (wait && pending_ > 0) {
        MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        flag = 1;
      } else {
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
      }
      if (!flag) break;
      int count = 0;
      MPI_Get_count(&st, MPI_CHAR, &count);
      std::string line(static_cast<std::size_t>(count), '\0');
      MPI_Recv(line.data(), count, MPI_CHAR, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (st.MPI_TAG == kTagDone)
        --pending_;
      else
        out.push_back(std::move(line));
    }
    return out;
  }

  [[noreturn]] void abort(int code) override { MpiSession::instance().abort(code); }

 private:
  int rank_ = 0, size_ = 1, pending_ = 0;
};

}  // namespace

std::unique_ptr<CampaignComm> make_campaign_comm() {
  if (launched_by_mpi()) return std::make_unique<Mpi>();
  return std::make_unique<Single>();
}

}  // namespace probelab::sim
