#include "sim/run/partition_run.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <stdexcept>

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "chip_model/collective/network.h"
#include "sim/run/detail/partition_wire.h"
#include "sim/run/process_pool.h"
#include "sim/scenario/bad_input.h"

namespace probelab::sim {

using nlohmann::json;

std::vector<std::uint8_t> PartitionOutcome::encode() const {
  return json::to_msgpack(json{{"ok", ok}, {"result", json::binary_t(result)}, {"error", error}, {"bad_input", bad_input}});
}

PartitionOutcome PartitionOutcome::decode(const std::vector<std::uint8_t>& bytes) {
  try {
    const json j = json::from_msgpack(bytes);
    PartitionOutcome o;
    o.ok = j.at("ok");
    o.result = j.at("result").get_binary();
    o.error = j.at("error");
    o.bad_input = j.at("bad_input");
    return o;
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("distributed run: malformed partition outcome: ") + e.what());
  }
}

chip::PartitionMap partition_map(const PreparedRun& run, std::uint32_t processes) {
  const chip::ClusterTopology topo(run.chip, run.cluster, static_cast<std::uint32_t>(run.scenario.ranks));
  if (run.scenario.cluster.partition.empty()) return chip::PartitionMap::even(topo, processes);
  return chip::PartitionMap::explicit_map(topo, run.scenario.cluster.partition, processes, "cluster.partition");
}

namespace {

/// The child's end of its socket.
class ChildLink final : public PartitionLink {
 public:
  ChildLink(int fd, std::uint32_t process, std::uint32_t processes) : fd_(fd), process_(process), processes_(processes) {}
  std::uint32_t process() const override { return process_; }
  std::uint32_t processes() const override { return processes_; }
  WindowGrant exchange(WindowReport report) override {
    detail::write_frame(fd_, 'R', detail::encode_report(report));
    auto f = detail::read_frame(fd_);
    if (!f || f->first != 'G') throw std::runtime_error("distributed run: lost the coordinator");
    return detail::decode_grant(f->second);
  }

 private:
  int fd_;
  std::uint32_t process_, processes_;
};

[[noreturn]] void run_child(int fd, SimRequest req, const chip::PartitionMap& map, std::uint32_t p, unsigned timeout_s) {
  ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  ::dup2(2, 1);  // SystemC reports go to stdout; keep the parent's stdout for its own output
  if (timeout_s) ::alarm(timeout_s);
  ChildLink link(fd, p, map.processes);
  req.partition = &map;
  req.process = p;
  req.link = &link;
  PartitionOutcome o;
  try {
    o.result = simulate_partition(req).encode();
    o.ok = true;
  } catch (const std::exception& e) {
    o.error = e.what();
    o.bad_input = is_bad_input(e);
  }
  try {
    detail::write_frame(fd, 'F', o.encode());
  } catch (const std::exception&) {
  }
  std::fflush(nullptr);
  ::_exit(0);
}

struct Child {
  std::uint32_t partition = 0;
  pid_t pid = -1;
  int fd = -1;
  bool done = false;
  bool no_result = false;  // ended without its final frame (killed, e.g. by --timeout)
  PartitionOutcome outcome;
};

void end_child(Child& c, const std::optional<std::pair<char, std::vector<std::uint8_t>>>& f) {
  c.done = true;
  if (f && f->first == 'F') {
    c.outcome = PartitionOutcome::decode(f->second);
    return;
  }
  c.no_result = true;
  c.outcome.ok = false;
  c.outcome.error = fmt::format("the process of partition {} ended without a result", c.partition);
}

/// Sends a grant; a child that died meanwhile (its socket closed) ends with what it left.
void grant(Child& c, const WindowGrant& g) {
  try {
    detail::write_frame(c.fd, 'G', detail::encode_grant(g));
  } catch (const std::runtime_error&) {
    end_child(c, detail::read_frame(c.fd));
  }
}

/// Every partition in this process.
class LocalComm final : public PartitionComm {
 public:
  explicit LocalComm(std::uint32_t n) : n_(n) {}
  std::uint32_t processes() const override { return n_; }
  std::vector<std::uint32_t> local() const override {
    std::vector<std::uint32_t> v(n_);
    for (std::uint32_t i = 0; i < n_; ++i) v[i] = i;
    return v;
  }
  std::vector<WindowGrant> exchange(std::vector<WindowReport> reports, std::uint64_t lookahead_ps,
                                    std::uint64_t cell_ps) override {
    return decide_window(std::move(reports), lookahead_ps, cell_ps);
  }
  std::vector<PartitionOutcome> gather(std::vector<PartitionOutcome> local) override { return local; }
  bool writer() const override { return true; }
  int agree(int value) override { return value; }

 private:
  std::uint32_t n_;
};

}  // namespace

std::unique_ptr<PartitionComm> local_partition_comm(std::uint32_t processes) { return std::make_unique<LocalComm>(processes); }

json simulate_distributed(const SimRequest& req, PartitionComm& comm, unsigned timeout_s) {
  const chip::PartitionMap map = partition_map(*req.run, comm.processes());
  const chip::ClusterTopology topo(req.run->chip, req.run->cluster, static_cast<std::uint32_t>(req.run->scenario.ranks));
  const std::uint64_t lookahead = map.lookahead_ps(topo), cell = chip::Network::cell_ps(topo);
  std::fflush(nullptr);
  std::vector<Child> kids;
  for (std::uint32_t p : comm.local()) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) throw std::runtime_error("distributed run: socketpair failed");
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("distributed run: fork failed");
    if (pid == 0) {
      ::close(sv[0]);
      for (const auto& k : kids) ::close(k.fd);
      run_child(sv[1], req, map, p, timeout_s);
    }
    ::close(sv[1]);
    kids.push_back({p, pid, sv[0], false, false, {}});
  }
  for (;;) {
    std::vector<WindowReport> reports;
    for (auto& k : kids) {
      WindowReport r;
      if (!k.done) {
        auto f = detail::read_frame(k.fd);
        if (f && f->first == 'R') r = detail::decode_report(f->second);
        else end_child(k, f);
      }
      if (k.done) r.failed = true;
      reports.push_back(std::move(r));
    }
    std::vector<WindowGrant> grants = comm.exchange(std::move(reports), lookahead, cell);
    const bool stop = grants.at(0).stop;
    for (std::size_t i = 0; i < kids.size(); ++i)
      if (!kids[i].done) grant(kids[i], grants[i]);
    if (!stop) continue;
    for (auto& k : kids)
      if (!k.done) end_child(k, detail::read_frame(k.fd));
    break;
  }
  std::vector<PartitionOutcome> local;
  for (auto& k : kids) {
    ::close(k.fd);
    int status = 0;
    ::waitpid(k.pid, &status, 0);
    if (k.no_result) {  // as one process describes its simulation's child
      ChildStatus st;
      if (WIFSIGNALED(status)) st.signal = WTERMSIG(status);
      else if (WIFEXITED(status)) st.exit_code = WEXITSTATUS(status);
      k.outcome.error += fmt::format(" ({})", st.describe());
    }
    local.push_back(std::move(k.outcome));
  }
  std::vector<PartitionOutcome> all = comm.gather(std::move(local));
  if (!comm.writer()) return nullptr;
  // The first real error (a partition stopped because another failed says nothing).
  const PartitionOutcome* failed = nullptr;
  for (const auto& o : all)
    if (!o.ok && (!failed || failed->error.starts_with("distributed simulation: another partition failed"))) failed = &o;
  if (failed) return {{"status", "error"}, {"error", failed->error}, {"bad_input", failed->bad_input}};
  std::vector<PartitionResult> parts;
  for (const auto& o : all) parts.push_back(PartitionResult::decode(o.result));
  try {
    return merge_partitions(req, std::move(parts));
  } catch (const std::exception& e) {
    return {{"status", "error"}, {"error", e.what()}, {"bad_input", false}};
  }
}

}  // namespace probelab::sim
