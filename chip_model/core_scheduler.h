// Grants AI cores to tasks of the streams.
//
// Policy: a Kernel task asks for the cores of its descriptor's core_mask (bit i = core i), or for
// all cores when the mask is 0 (like a kernel launched with blockDim = number of cores); a
// Capture or Breakpoint task asks for one core: the lowest-numbered free core within its mask.
// Requests are served strictly first come, first served (in the order acquire() is called, which
// is simulation order): a request waits until it is the oldest and its cores are free, so a later
// small request never overtakes an earlier large one. Cores are held until release().
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include <systemc>
#include <tlm_utils/tlm_quantumkeeper.h>

namespace probelab::chip {

class CoreScheduler : public sc_core::sc_module {
 public:
  CoreScheduler(sc_core::sc_module_name name, std::uint32_t num_cores);

  std::uint32_t num_cores() const { return num_cores_; }
  /// All cores in `mask` (0 = all), or with `any_one` the lowest free core in `mask`. SC_THREAD
  /// context: syncs qk first, then waits as needed; returns the granted cores, ascending.
  /// Throws std::invalid_argument if the mask names no existing core.
  std::vector<std::uint32_t> acquire(std::uint32_t mask, bool any_one, tlm_utils::tlm_quantumkeeper& qk);
  void release(const std::vector<std::uint32_t>& cores);

  std::uint64_t grants() const { return grants_; }
  bool busy(std::uint32_t core) const { return (busy_mask_ >> core) & 1u; }

 private:
  std::uint64_t full_mask() const;
  std::uint32_t num_cores_;
  std::uint64_t busy_mask_ = 0;
  std::uint64_t next_ticket_ = 0;
  std::deque<std::uint64_t> queue_;  // tickets waiting, oldest first
  std::uint64_t grants_ = 0;
  sc_core::sc_event changed_;
};

}  // namespace probelab::chip
