#include "chip_model/core_scheduler.h"

#include <algorithm>
#include <bit>
#include <stdexcept>

#include <fmt/format.h>

namespace probelab::chip {

CoreScheduler::CoreScheduler(sc_core::sc_module_name name, std::uint32_t num_cores)
    : sc_module(name), num_cores_(num_cores) {
  if (num_cores == 0 || num_cores > 64) throw std::invalid_argument("CoreScheduler: 1..64 cores supported");
}

std::uint64_t CoreScheduler::full_mask() const {
  return num_cores_ == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << num_cores_) - 1;
}

std::vector<std::uint32_t> CoreScheduler::acquire(std::uint32_t mask, bool any_one, tlm_utils::tlm_quantumkeeper& qk) {
  const std::uint64_t want = mask == 0 ? full_mask() : (std::uint64_t{mask} & full_mask());
  if (want == 0)
    throw std::invalid_argument(fmt::format("{}: core mask 0x{:x} names no core of {}", name(), mask, num_cores_));
  qk.sync();
  const std::uint64_t ticket = next_ticket_++;
  queue_.push_back(ticket);
  std::uint64_t grant = 0;
  for (;;) {
    if (queue_.front() == ticket) {
      const std::uint64_t free = want & ~busy_mask_;
      if (any_one && free != 0)
        grant = free & (~free + 1);  // lowest free core
      else if (!any_one && free == want)
        grant = want;
      if (grant != 0) break;
    }
    sc_core::wait(changed_);
  }
  queue_.pop_front();
  busy_mask_ |= grant;
  ++grants_;
  // The next request in line may be satisfiable with the remaining cores.
  changed_.notify(sc_core::SC_ZERO_TIME);
  std::vector<std::uint32_t> cores;
  cores.reserve(static_cast<std::size_t>(std::popcount(grant)));
  for (std::uint64_t g = grant; g != 0; g &= g - 1) cores.push_back(static_cast<std::uint32_t>(std::countr_zero(g)));
  return cores;
}

void CoreScheduler::release(const std::vector<std::uint32_t>& cores) {
  for (const auto c : cores) busy_mask_ &= ~(std::uint64_t{1} << c);
  changed_.notify(sc_core::SC_ZERO_TIME);
}

}  // namespace probelab::chip
