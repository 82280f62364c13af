#include "sim/platform/platform.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace probelab::sim {

Platform::Platform(sc_core::sc_module_name name, const PlatformOptions& opts) : sc_core::sc_module(name) {
  if (opts.ranks == 0) throw std::invalid_argument("platform: ranks must be >= 1");
  if (!opts.trace) throw std::invalid_argument("platform: a trace recorder is required");
  for (std::uint32_t r = 0; r < opts.ranks; ++r) {
    chip::Chip::Options co;
    co.rank = r;
    co.faults = opts.faults;
    co.trace = opts.trace;
    co.make_cores = opts.make_cores;
    chips_.push_back(std::make_unique<chip::Chip>(fmt::format("chip{}", r).c_str(), opts.chip, co));
  }
  if (opts.ranks > 1) {
    fabric_ = std::make_unique<chip::CollectiveFabric>(
        "fabric", opts.ranks, chip::FabricConfig::from_chip_config(opts.chip, opts.ranks), opts.trace);
    for (auto& c : chips_) fabric_->attach(*c);
  }
  for (std::uint32_t r = 0; r < opts.ranks; ++r) {
    hosts_.push_back(std::make_unique<HostModel>(fmt::format("host{}", r).c_str(), *chips_[r], opts.trace, opts.host));
    hosts_.back()->set_on_finish([this] {
      if (++finished_ == hosts_.size()) {
        end_time_ = sc_core::sc_time_stamp();
        sc_core::sc_stop();
      } else if (hosts_.back() && std::any_of(hosts_.begin(), hosts_.end(), [](const auto& h) { return h->error(); })) {
        end_time_ = sc_core::sc_time_stamp();
        sc_core::sc_stop();
      }
    });
  }
}

Platform::~Platform() = default;

void Platform::run() {
  // The platform stops the kernel itself once every host program is done: not worth a report.
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  sc_core::sc_start();
  for (auto& h : hosts_)
    if (h->error()) std::rethrow_exception(h->error());
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

}  // namespace probelab::sim
