#include "sim/platform/platform.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace probelab::sim {

/// Collects the messages the network hands to other partitions during a window.
class Platform::Outbox : public chip::Network::Boundary {
 public:
  void forward(chip::Message m, std::uint32_t process) override { out.emplace_back(process, std::move(m)); }
  std::vector<std::pair<std::uint32_t, chip::Message>> out;
};

Platform::Platform(sc_core::sc_module_name name, const PlatformOptions& opts)
    : sc_core::sc_module(name), ranks_(opts.ranks) {
  if (opts.ranks == 0) throw std::invalid_argument("platform: ranks must be >= 1");
  if (!opts.trace) throw std::invalid_argument("platform: a trace recorder is required");
  topology_ = std::make_unique<chip::ClusterTopology>(opts.chip, opts.cluster, opts.ranks);
  partitioned_ = opts.partition && opts.partition->processes > 1;
  index_.assign(opts.ranks, -1);
  ops_ = std::make_unique<chip::kernels::PreparedOpPool>();
  for (std::uint32_t r = 0; r < opts.ranks; ++r) {
    if (opts.partition && opts.partition->of_rank.at(r) != opts.process) continue;
    index_[r] = static_cast<int>(local_.size());
    local_.push_back(r);
    chip::Chip::Options co;
    co.rank = r;
    co.faults = opts.faults;
    co.trace = opts.trace;
    co.make_cores = opts.make_cores;
    co.ops = ops_.get();
    chips_.push_back(std::make_unique<chip::Chip>(fmt::format("chip{}", r).c_str(), opts.chip, co));
  }
  if (opts.ranks > 1) {
    chip::CollectiveFabric::Options fo;
    fo.partition = opts.partition;
    fo.process = opts.process;
    fo.trace = opts.trace;
    fo.keep_records = opts.keep_collective_records;
    fabric_ = std::make_unique<chip::CollectiveFabric>("fabric", *topology_, fo);
    for (auto& c : chips_) fabric_->attach(*c);
    if (opts.trace->enabled())
      for (const auto& [pid, n] : topology_->switch_names())
        if (!opts.partition || opts.partition->of_rank.at(0) == opts.process) opts.trace->set_process_name(pid, n);
  }
  for (std::size_t i = 0; i < chips_.size(); ++i) {
    hosts_.push_back(std::make_unique<HostModel>(fmt::format("host{}", local_[i]).c_str(), *chips_[i], opts.trace, opts.host));
    hosts_.back()->set_on_finish([this] {
      if (partitioned_) {
        ++finished_;  // the coordinator ends the run (partition_link.h)
        return;
      }
      if (++finished_ == hosts_.size()) {
        if (stopping_) return;  // a failure stopped the run in this delta cycle already
        end_time_ = sc_core::sc_time_stamp();
        sc_core::sc_stop();
      } else if (!stopping_ && hosts_.back() &&
                 std::any_of(hosts_.begin(), hosts_.end(), [](const auto& h) { return h->error(); })) {
        end_time_ = sc_core::sc_time_stamp();
        stopping_ = true;  // another host failing in the same delta cycle stops nothing more
        sc_core::sc_stop();
      }
    });
  }
}

Platform::~Platform() = default;

std::size_t Platform::at(std::uint32_t rank) const {
  if (!is_local(rank)) throw std::out_of_range(fmt::format("platform: r{} is not simulated in this process", rank));
  return static_cast<std::size_t>(index_[rank]);
}

void Platform::rethrow_host_error() const {
  for (const auto& c : chips_)  // a task's error stopped the run: the host's wait is its consequence
    if (c->error()) std::rethrow_exception(c->error());
  for (auto& h : hosts_) {
    if (!h->error()) continue;
    try {
      std::rethrow_exception(h->error());
    } catch (const SyncTimeout& e) {  // what the chips wait for
      std::string pend;
      if (fabric_)
        for (const auto& p : fabric_->pending()) pend += "; " + p;
      throw SyncTimeout(e.what() + pend);
    }
  }
}

std::vector<HostEnd> Platform::host_ends() const {
  std::vector<HostEnd> out;
  for (const auto& h : hosts_) {
    HostEnd e{h->rank(), h->finished(), false, false, chip::ChipClock::to_ps(h->finish_time()), {}};
    if (h->error()) {
      try {
        std::rethrow_exception(h->error());
      } catch (const SyncTimeout& t) {
        e.timed_out = true;
        e.error = t.what();
      } catch (const std::exception& x) {
        e.failed = true;
        e.error = x.what();
      } catch (...) {
        e.failed = true;
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

bool Platform::note_hang(std::optional<std::uint64_t> first_timeout_ps) {
  const bool chip_failed = std::any_of(chips_.begin(), chips_.end(), [](const auto& c) { return c->error() != nullptr; });
  hang_ = find_hang(host_ends(), fabric_ ? fabric_->blocked() : std::vector<chip::BlockedCollective>{}, chip_failed);
  if (hang_ && first_timeout_ps) hang_->time_ps = *first_timeout_ps;  // the job's, maybe another partition's
  if (hang_ && fabric_)
    for (const auto& l : fabric_->network().lost())
      hang_->lost.push_back({topology_->link_name(l.link), l.src, l.dst, l.key.comm, l.key.seq, l.at_ps});
  if (hang_) end_time_ = chip::ChipClock::from_ps(hang_->time_ps);
  return hang_.has_value();
}

std::uint64_t Platform::finish_ps(std::uint32_t rank) {
  if (hang_ && std::find(hang_->waiting.begin(), hang_->waiting.end(), rank) != hang_->waiting.end())
    return hang_->time_ps;
  return chip::ChipClock::to_ps(host(rank).finish_time());
}

void Platform::run() {
  // The platform stops the kernel itself once every host program is done: not worth a report.
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  sc_core::sc_start();
  if (fabric_) fabric_->network().flush_trace();
  if (note_hang()) return;
  rethrow_host_error();
  if (finished_ != hosts_.size()) {
    std::string waiting;
    for (auto& h : hosts_)
      if (!h->finished()) waiting += fmt::format(" host{}", h->rank());
    std::string pend;
    if (fabric_)
      for (const auto& p : fabric_->pending()) pend += "; " + p;
    throw std::runtime_error(fmt::format("simulation ended before every host program finished (still running:{}){}",
                                         waiting, pend));
  }
}

WindowReport Platform::report(Outbox& out) const {
  WindowReport r;
  using sc_core::sc_time_stamp;
  const bool stopped = sc_core::sc_get_status() == sc_core::SC_STOPPED;
  if (!stopped && sc_core::sc_pending_activity())
    r.next_ps = chip::ChipClock::to_ps(sc_time_stamp() + sc_core::sc_time_to_pending_activity());
  r.hosts_done = finished_ == hosts_.size();
  for (const auto& c : chips_) r.failed = r.failed || c->error() != nullptr;
  for (const HostEnd& e : host_ends()) {
    r.failed = r.failed || e.failed;
    r.timed_out = r.timed_out || e.timed_out;
    if (e.timed_out) r.timeout_ps = std::min(r.timeout_ps, e.end_ps);
    if (e.finished) r.finish_ps = std::max(r.finish_ps, e.end_ps);
    else r.running += fmt::format(" host{}", e.rank);
  }
  r.failed = r.failed || (stopped && !r.timed_out);
  if (fabric_)
    for (const auto& p : fabric_->pending()) r.waiting += "; " + p;
  r.outgoing = std::move(out.out);
  out.out.clear();
  return r;
}

void Platform::run_partition(PartitionLink& link) {
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  Outbox out;
  if (fabric_) fabric_->network().set_boundary(&out);
  if (fabric_) fabric_->network().set_horizon(0);
  sc_core::sc_start(sc_core::SC_ZERO_TIME);  // elaborate and run the delta cycles at time 0
  for (;;) {
    WindowGrant g = link.exchange(report(out));
    if (fabric_)
      for (auto& m : g.incoming) fabric_->network().inject(std::move(m));
    if (g.stop) {
      end_time_ = chip::ChipClock::from_ps(g.end_ps);
      if (fabric_) fabric_->network().flush_trace();
      if (g.deadlock) {  // this partition's part of the hang (none when its ranks were done)
        const auto timeout = g.error.empty() ? std::optional<std::uint64_t>(g.end_ps) : std::nullopt;
        if (note_hang(timeout)) return;
        // Every local program returned without an error: the hang is elsewhere.
        if (!hosts_.empty() && finished_ == hosts_.size() &&
            std::none_of(hosts_.begin(), hosts_.end(), [](const auto& h) { return h->error() != nullptr; }))
          return;
      }
      rethrow_host_error();
      if (!g.error.empty()) throw std::runtime_error(g.error);
      if (sc_core::sc_get_status() == sc_core::SC_STOPPED || finished_ != hosts_.size())
        throw std::runtime_error("distributed simulation: another partition failed");
      return;
    }
    const std::uint64_t now = chip::ChipClock::to_ps(sc_core::sc_time_stamp());
    // sc_start(d) runs every event before now + d and stops at that time.
    if (fabric_) fabric_->network().set_horizon(g.until_ps);
    if (g.until_ps > now) sc_core::sc_start(chip::ChipClock::from_ps(g.until_ps - now));
  }
}

}  // namespace probelab::sim
