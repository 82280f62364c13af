// Performance faults: a degraded HBM channel, a degraded inter-chip link, a straggler rank
// (slower clock or throttled cores), one throttled AI core and a host launch delay. Each acts once, before the chip
// runs, through FaultHooks::on_perf_faults, and logs that proof (setting before and after).
#include <map>
#include <string>

#include <fmt/format.h>

#include "injectors/injector.h"

namespace probelab::inject {
namespace {

double fraction_param(const Params& p, const char* key) {
  const double f = p.number(key);
  if (!(f > 0.0 && f <= 1.0)) p.fail(key, fmt::format("a fraction of the bandwidth in (0, 1], got {}", f));
  return f;
}

double slowdown_param(const Params& p) {
  const double f = p.number("slowdown");
  if (!(f >= 1.0 && f <= 1000.0)) p.fail("slowdown", fmt::format("a factor in [1, 1000], got {}", f));
  return f;
}

std::uint32_t rank_param(const Params& p, const char* key, const InjectionEnv& env) {
  const std::uint64_t r = p.uinteger(key);
  if (r >= env.ranks) p.fail(key, fmt::format("a rank below ranks ({}), got {}", env.ranks, r));
  return static_cast<std::uint32_t>(r);
}

/// The `rank` set of a descriptor, each below the run's ranks.
IndexSet ranks_param(const Params& p, const InjectionEnv& env) {
  IndexSet set = p.index_set("rank");
  for (std::uint64_t r : set.values)
    if (r >= env.ranks) p.fail("rank", fmt::format("ranks below ranks ({}), got {}", env.ranks, r));
  return set;
}

class HbmChannelInjector final : public Injector {
 public:
  HbmChannelInjector(const Params& p, const InjectionEnv& env) {
    graph_ = env.executed;
    seed_ = read_seed(p, env);
    ranks_ = ranks_param(p, env);
    channel_ = p.uinteger("channel");
    if (env.hbm_channels && channel_ >= env.hbm_channels)
      p.fail("channel", fmt::format("an HBM channel below hbm_channels ({}), got {}", env.hbm_channels, channel_));
    fraction_ = fraction_param(p, "fraction");
  }
  std::uint32_t sites() const override { return chip::kFaultPerf; }
  void on_perf_faults(std::uint32_t rank, chip::PerfFaults& f) override {
    if (!ranks_.contains(rank)) return;
    const auto c = static_cast<std::uint32_t>(channel_);
    const double before = f.hbm_channel_fraction.count(c) ? f.hbm_channel_fraction[c] : 1.0;
    f.hbm_channel_fraction[c] = before * fraction_;
    chip::FaultSite s;
    s.rank = rank;
    record({s, "", fmt::format("HBM channel {}", channel_), fmt::format("{} of its bandwidth", before),
            fmt::format("{} of its bandwidth", before * fraction_)});
  }

 private:
  IndexSet ranks_;
  std::uint64_t channel_ = 0;
  double fraction_ = 1.0;
};

// A fault of the link chip `src` sends on towards `dst` (the first of the route), and of
// dst -> src too with both_directions: the endpoints, checked, and the links' names for proofs.
class LinkFaultInjector : public Injector {
 public:
  LinkFaultInjector(const Params& p, const InjectionEnv& env, const char* what) {
    graph_ = env.executed;
    seed_ = read_seed(p, env);
    if (env.ranks < 2) p.fail("src", fmt::format("a {} link needs a run of two or more ranks", what));
    src_ = rank_param(p, "src", env);
    dst_ = rank_param(p, "dst", env);
    if (src_ == dst_) p.fail("dst", "a rank other than src");
    both_ = p.boolean("both_directions");
    if (env.first_link) {
      const InjectionEnv::FirstLink l = env.first_link(src_, dst_);
      if (!l.direct)
        p.fail("dst", fmt::format("a neighbour of r{} on its server's HCCS ring (r{} is more than one link away)", src_, dst_));
      names_[src_] = l.name;
      names_[dst_] = env.first_link(dst_, src_).name;
    }
  }
  std::uint32_t sites() const override { return chip::kFaultPerf; }
  void on_perf_faults(std::uint32_t rank, chip::PerfFaults& f) override {
    if (rank == src_) apply(rank, dst_, f);
    else if (both_ && rank == dst_) apply(rank, src_, f);
  }

 protected:
  /// Applies the fault to the link `from` sends on towards `to` (and records it: proof()).
  virtual void apply(std::uint32_t from, std::uint32_t to, chip::PerfFaults& f) = 0;
  /// "link r1 -> r2 (r1 hccs->r2)" for a proof.
  std::string label(std::uint32_t from, std::uint32_t to) const {
    const auto name = names_.find(from);
    return name == names_.end() ? fmt::format("link r{} -> r{}", from, to)
                                : fmt::format("link r{} -> r{} ({})", from, to, name->second);
  }

 private:
  std::uint32_t src_ = 0, dst_ = 1;
  bool both_ = false;
  std::map<std::uint32_t, std::string> names_;  // sender -> the link it sends on
};

class LinkInjector final : public LinkFaultInjector {
 public:
  LinkInjector(const Params& p, const InjectionEnv& env)
      : LinkFaultInjector(p, env, "degraded"), fraction_(fraction_param(p, "fraction")) {}

 private:
  void apply(std::uint32_t from, std::uint32_t to, chip::PerfFaults& f) override {
    const double before = f.link_fraction.count(to) ? f.link_fraction[to] : 1.0;
    f.link_fraction[to] = before * fraction_;
    chip::FaultSite s;
    s.rank = from;
    record({s, "", label(from, to), fmt::format("{} of its bandwidth", before),
            fmt::format("{} of its bandwidth", before * fraction_)});
  }
  double fraction_ = 1.0;
};

// A link that dies at a device cycle: every message whose head reaches it from then on is lost
// (chip_model/collective/network.h), so the ranks waiting for one hang until their timeout.
class LinkDownInjector final : public LinkFaultInjector {
 public:
  LinkDownInjector(const Params& p, const InjectionEnv& env)
      : LinkFaultInjector(p, env, "dead"), cycle_(p.uinteger("cycle")) {}

 private:
  void apply(std::uint32_t from, std::uint32_t to, chip::PerfFaults& f) override {
    auto [it, fresh] = f.link_down_cycle.try_emplace(to, cycle_);
    if (!fresh) it->second = std::min(it->second, cycle_);
    chip::FaultSite s;
    s.rank = from;
    s.cycle = cycle_;
    record({s, "", label(from, to), "up", fmt::format("down from cycle {}", it->second)});
  }
  std::uint64_t cycle_ = 0;
};

class StragglerInjector final : public Injector {
 public:
  StragglerInjector(const Params& p, const InjectionEnv& env) {
    graph_ = env.executed;
    seed_ = read_seed(p, env);
    rank_ = rank_param(p, "rank", env);
    slowdown_ = slowdown_param(p);
  }
  std::uint32_t sites() const override { return chip::kFaultPerf; }
  void on_perf_faults(std::uint32_t rank, chip::PerfFaults& f) override {
    if (rank != rank_) return;
    const double before = f.compute_slowdown;
    f.compute_slowdown = before * slowdown_;
    chip::FaultSite s;
    s.rank = rank;
    record({s, "", "Cube and Vector steps, MTE and L2 port time", fmt::format("x{}", before), fmt::format("x{}", f.compute_slowdown)});
  }

 private:
  std::uint32_t rank_ = 0;
  double slowdown_ = 2.0;
};

class CoreThrottleInjector final : public Injector {
 public:
  CoreThrottleInjector(const Params& p, const InjectionEnv& env) {
    graph_ = env.executed;
    seed_ = read_seed(p, env);
    rank_ = rank_param(p, "rank", env);
    core_ = p.uinteger("core");
    if (env.cores && core_ >= env.cores) p.fail("core", fmt::format("an AI core below {} (the chip's cores), got {}", env.cores, core_));
    slowdown_ = slowdown_param(p);
  }
  std::uint32_t sites() const override { return chip::kFaultPerf; }
  void on_perf_faults(std::uint32_t rank, chip::PerfFaults& f) override {
    if (rank != rank_) return;
    const auto c = static_cast<std::uint32_t>(core_);
    const double before = f.core_slowdown.count(c) ? f.core_slowdown[c] : 1.0;
    f.core_slowdown[c] = before * slowdown_;
    chip::FaultSite s;
    s.rank = rank;
    record({s, "", fmt::format("AI core {}: Cube and Vector steps", c), fmt::format("x{}", before),
            fmt::format("x{}", f.core_slowdown[c])});
  }

 private:
  std::uint32_t rank_ = 0;
  std::uint64_t core_ = 0;
  double slowdown_ = 2.0;
};

class LaunchDelayInjector final : public Injector {
 public:
  LaunchDelayInjector(const Params& p, const InjectionEnv& env) {
    graph_ = env.executed;
    seed_ = read_seed(p, env);
    ranks_ = ranks_param(p, env);
    delay_ns_ = p.uinteger("delay_ns");
    if (delay_ns_ == 0 || delay_ns_ > 1'000'000'000) p.fail("delay_ns", "a delay in [1, 1e9] ns");
  }
  std::uint32_t sites() const override { return chip::kFaultPerf; }
  void on_perf_faults(std::uint32_t rank, chip::PerfFaults& f) override {
    if (!ranks_.contains(rank)) return;
    const std::uint64_t before = f.launch_delay_ps;
    f.launch_delay_ps += delay_ns_ * 1000;
    chip::FaultSite s;
    s.rank = rank;
    record({s, "", "dispatch of every task", fmt::format("+{} ns", before / 1000),
            fmt::format("+{} ns", f.launch_delay_ps / 1000)});
  }

 private:
  IndexSet ranks_;
  std::uint64_t delay_ns_ = 0;
};

}  // namespace

void register_perf_fault_injectors(InjectorRegistry& r) {
  r.add({"hbm_channel_degraded", "one HBM channel serves at a fraction of its bandwidth (a slow or degraded channel)",
         {{"channel", "int", "", "HBM channel (0 .. hbm_channels-1)"},
          {"fraction", "number in (0, 1]", "", "share of the channel's bandwidth left"},
          {"rank", "int | list | all", "0", "ranks whose chip has the degraded channel"},
          seed_param()},
         [](const Params& p, const InjectionEnv& env) { return std::make_unique<HbmChannelInjector>(p, env); }});
  r.add({"link_degraded", "one link a chip sends on (HCCS or its NIC) runs at a fraction of its bandwidth",
         {{"src", "int", "", "sending rank"},
          {"dst", "int", "", "receiving rank: the link degraded is the first of the route, src's HCCS link to dst (a "
                             "neighbour when its server's chips form a ring) or its NIC when dst is in another server"},
          {"fraction", "number in (0, 1]", "", "share of the link's bandwidth left"},
          {"both_directions", "bool", "false", "degrade dst -> src too"},
          seed_param()},
         [](const Params& p, const InjectionEnv& env) { return std::make_unique<LinkInjector>(p, env); }});
  r.add({"link_down", "one link a chip sends on (HCCS or its NIC) dies at a device cycle: the messages sent on it "
                      "from then on are lost, and the ranks waiting for them hang (report.json hang)",
         {{"src", "int", "", "sending rank"},
          {"dst", "int", "", "receiving rank: the dead link is the first of the route, as for link_degraded"},
          {"cycle", "int", "0", "device cycle from which the link delivers nothing"},
          {"both_directions", "bool", "false", "dst -> src dies too"},
          seed_param()},
         [](const Params& p, const InjectionEnv& env) { return std::make_unique<LinkDownInjector>(p, env); }});
  r.add({"straggler", "one rank computes slower (a slower clock or throttled cores): its Cube and Vector steps take "
                      "`slowdown` times as long and its cores' MTE and L2 ports run that much slower",
         {{"rank", "int", "", "the straggler"}, {"slowdown", "number in [1, 1000]", "2", "compute time factor"},
          seed_param()},
         [](const Params& p, const InjectionEnv& env) { return std::make_unique<StragglerInjector>(p, env); }});
  r.add({"core_throttled", "one AI core of a chip computes slower (throttled): its Cube and Vector steps take "
                           "`slowdown` times as long, so every op it takes part in waits for its tiles",
         {{"rank", "int", "0", "the chip"}, {"core", "int", "", "AI core id (0 .. cores-1)"},
          {"slowdown", "number in [1, 1000]", "2", "compute time factor"}, seed_param()},
         [](const Params& p, const InjectionEnv& env) { return std::make_unique<CoreThrottleInjector>(p, env); }});
  r.add({"launch_delay", "every task reaches the chip's cores later (a slow host launch path)",
         {{"delay_ns", "int", "", "extra dispatch time of each task, ns"},
          {"rank", "int | list | all", "all", "ranks"},
          seed_param()},
         [](const Params& p, const InjectionEnv& env) { return std::make_unique<LaunchDelayInjector>(p, env); }});
}

}  // namespace probelab::inject
