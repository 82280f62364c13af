// HBM of one chip: a byte-accurate backing store and the bandwidth/latency model every
// initiator contends on (AI-core MTEs, capture unit, stream descriptor fetch, host DMA arriving
// over PCIe, collectives).
//
// Store: sparse 64 KiB pages created on first write; never-written bytes read as zero.
// Timing: the address space is interleaved over `hbm_channels` channels in
// `hbm_interleave_bytes` granules. A transfer of B bytes at `addr` starting at absolute time
// `start` puts its share of bytes on each channel it touches; each channel serves its share
// after it is free (`busy_until`), at hbm_bandwidth/channels; the transfer completes when its
// last channel is done plus `hbm_latency_ns`. So two initiators moving B bytes over the same
// channels at the same time take twice as long as one. With temporal decoupling, requests are
// served in the order they are made (simulation order), each no earlier than its own `start`.
// An optional `port_gbps` caps the initiator's own rate (e.g. a core's MTE port).
//
// Data moves at the moment of the call; the returned time says when the transfer is done and
// the caller (which owns a quantum keeper) must not use the data before that time.
//
// The backdoor (debug_read/debug_write) costs no time and bypasses the model: for injectors and
// tests only, never for a modelled hardware unit or the probe runtime.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_target_socket.h>
#include <tlm_utils/tlm_quantumkeeper.h>

#include "chip_model/chip_config.h"
#include "chip_model/scan_memo.h"

namespace probelab::chip {

class Trace;
class L2Cache;

/// Who moves the bytes (statistics and trace labels).
enum class HbmClient : std::uint8_t { Core, Capture, Stream, HostDma, Collective };
inline constexpr int kHbmClientCount = 5;
std::string_view hbm_client_name(HbmClient c);

class Hbm : public sc_core::sc_module {
 public:
  /// Bus side (address 0 = first HBM byte): TLM_READ/TLM_WRITE of any length, no byte enables
  /// (TLM_BYTE_ENABLE_ERROR_RESPONSE), out of range -> TLM_ADDRESS_ERROR_RESPONSE. The delay is
  /// increased by the modelled transfer time (client HostDma). Also serves transport_dbg.
  tlm_utils::simple_target_socket_optional<Hbm> socket;  // may stay unbound

  Hbm(sc_core::sc_module_name name, const ChipConfig& cfg, std::uint32_t rank = 0,
      Trace* trace = nullptr);

  std::uint64_t size() const { return size_; }

  // ---- timed access on behalf of a hardware unit ----
  /// Copies the bytes now; returns the absolute completion time of the transfer started at
  /// absolute `start`. Throws std::out_of_range if [addr, addr+len) is outside HBM.
  sc_core::sc_time read(std::uint64_t addr, std::span<std::byte> dst, const sc_core::sc_time& start,
                        HbmClient who, double port_gbps = 0);
  sc_core::sc_time write(std::uint64_t addr, std::span<const std::byte> src,
                         const sc_core::sc_time& start, HbmClient who, double port_gbps = 0);
  /// Same, advancing the caller's local time: starts at qk.get_current_time() and sets the
  /// local time to the completion time (the caller decides when to sync).
  void read(std::uint64_t addr, std::span<std::byte> dst, tlm_utils::tlm_quantumkeeper& qk,
            HbmClient who, double port_gbps = 0);
  void write(std::uint64_t addr, std::span<const std::byte> src, tlm_utils::tlm_quantumkeeper& qk,
             HbmClient who, double port_gbps = 0);
  /// Timing only: charges `bytes` at `addr` to the model without moving data (for traffic whose
  /// bytes are accounted elsewhere, e.g. a modelled write whose data is written separately).
  /// `traced` = false leaves it off the timeline (a collective traces one span per collective
  /// rather than one per chunk it moves).
  /// `l2_managed` = true: the caller has looked the bytes up in the shared L2 itself (the AI
  /// cores' tile pipeline: misses, stores it evicts); false: the access is made coherent here.
  sc_core::sc_time transfer(std::uint64_t addr, std::uint64_t bytes, const sc_core::sc_time& start,
                            HbmClient who, bool is_write, double port_gbps = 0, bool traced = true,
                            bool l2_managed = false);
  /// The same in picoseconds (start and completion), made coherent with the L2 here.
  std::uint64_t transfer_at_ps(std::uint64_t addr, std::uint64_t bytes, std::uint64_t start_ps, HbmClient who,
                               bool is_write, double port_gbps = 0, bool traced = true);

  // ---- coherence with the shared L2 ----
  /// Attached by the Chip when its l2_model is "shared" (l2_cache.h). The AI cores' tile
  /// pipeline looks the L2 up itself (transfer(..., l2_managed = true)); every other access —
  /// read()/write() of any unit, the bus (host DMA), transfer() without l2_managed — is made
  /// coherent here, so no initiator sees or leaves a stale copy:
  ///  - reads look the L2 up without allocating (L2Cache::lookup): resident bytes (a dirty line
  ///    is the only current copy) move at the L2 rate `l2_read_gbps` (capped by the caller's
  ///    port), missing bytes come from the channels;
  ///  - writes invalidate the lines they touch (a partly covered dirty line is written back
  ///    first) and go to the channels; capture-record writes (client Capture) are the exception
  ///    when `capture_allocates`: they are written into the L2 like core stores (allocated
  ///    dirty at `l2_write_gbps`; the dirty lines they evict are written back to the channels).
  void attach_l2(L2Cache* l2, double l2_read_gbps, double l2_write_gbps, bool capture_allocates);
  /// Per client, what the coherent accesses did in the L2.
  struct L2Stats {
    std::uint64_t hit_bytes = 0;          // read bytes served by resident lines
    std::uint64_t miss_bytes = 0;         // read bytes served by the channels
    std::uint64_t invalidated_bytes = 0;  // resident line bytes dropped by writes
    std::uint64_t writeback_bytes = 0;    // dirty lines written back (partial overwrites, evictions)
    std::uint64_t allocated_bytes = 0;    // bytes written into the L2 (capture_allocates)
  };
  const L2Stats& l2_stats(HbmClient c) const { return l2_stats_[static_cast<int>(c)]; }

  /// Scans of stored tensors, forgotten by every write over them (scan_memo.h).
  ScanMemo& scans() { return scans_; }
  const ScanMemo& scans() const { return scans_; }

  // ---- zero-time backdoor: injectors and tests only ----
  void debug_read(std::uint64_t addr, std::span<std::byte> dst) const;
  void debug_write(std::uint64_t addr, std::span<const std::byte> src);

  // ---- statistics ----
  struct ClientStats {
    std::uint64_t bytes_read = 0, bytes_written = 0, transfers = 0;
  };
  const ClientStats& stats(HbmClient c) const { return stats_[static_cast<int>(c)]; }
  /// Sum over channels of the time they were busy moving data, in ps.
  std::uint64_t channel_busy_ps() const { return busy_ps_total_; }
  /// Per channel: bytes moved and time busy moving them (ps).
  struct ChannelStats {
    std::uint64_t bytes = 0, busy_ps = 0;
  };
  std::vector<ChannelStats> channel_stats() const;
  /// A degraded channel (performance fault): channel `c` serves at `fraction` (0, 1] of its
  /// bandwidth from now on. Throws std::out_of_range / std::invalid_argument.
  void set_channel_fraction(std::uint32_t c, double fraction);

 private:
  static constexpr std::uint64_t kPageBytes = 64 * 1024;
  void check_range(std::uint64_t addr, std::uint64_t len, const char* what) const;
  void copy_out(std::uint64_t addr, std::span<std::byte> dst) const;
  void copy_in(std::uint64_t addr, std::span<const std::byte> src);
  std::uint64_t model(std::uint64_t addr, std::uint64_t bytes, std::uint64_t start_ps, HbmClient who,
                      bool is_write, double port_gbps, bool traced = true, bool l2_managed = false);
  std::uint64_t coherent(std::uint64_t addr, std::uint64_t bytes, std::uint64_t start_ps, HbmClient who,
                         bool is_write, double port_gbps, bool traced);
  std::uint64_t channels(std::uint64_t addr, std::uint64_t bytes, std::uint64_t start_ps, HbmClient who,
                         bool is_write, double port_gbps, bool traced);
  /// True when model() would touch one channel and at most one L2 line, untraced and without
  /// allocating in the L2: then single() has the same effects and result, without the general
  /// loops (a collective's messages at scale move a few elements each).
  bool is_single(std::uint64_t addr, std::uint64_t bytes, HbmClient who, bool is_write) const;
  std::uint64_t single(std::uint64_t addr, std::uint64_t bytes, std::uint64_t start_ps, HbmClient who, bool is_write,
                       double port_gbps);
  /// Interleave granule of `addr` and the channel of granule `g` (a shift and a mask when the
  /// sizes are powers of two, as they are by default).
  std::uint64_t granule_of(std::uint64_t addr) const { return granule_shift_ >= 0 ? addr >> granule_shift_ : addr / interleave_; }
  std::uint32_t channel_of(std::uint64_t g) const {
    return static_cast<std::uint32_t>(channel_mask_ != 0 ? g & channel_mask_ : g % channels_);
  }
  void b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  unsigned int transport_dbg(tlm::tlm_generic_payload& trans);

  std::uint64_t size_;
  std::uint32_t channels_;
  std::uint64_t interleave_;
  int granule_shift_ = -1;          // log2(interleave_), -1: not a power of two
  std::uint64_t channel_mask_ = 0;  // channels_ - 1 when a power of two (> 1), else 0
  double channel_gbps_;
  std::uint64_t latency_ps_;
  std::uint32_t rank_;
  Trace* trace_;
  /// A channel's state, together: a transfer reads and updates all of it (one cache line, not three).
  struct Channel {
    std::uint64_t busy_until_ps = 0;
    double rate = 0;  // GB/s
    ChannelStats stats;
    /// Serves `share` bytes after what the channel already queued, from `start_ps` on, its
    /// accounting updated: {when the share began, how long it took}.
    std::pair<std::uint64_t, std::uint64_t> serve(std::uint64_t share, std::uint64_t start_ps);
  };
  std::vector<Channel> channel_;
  std::vector<std::uint64_t> share_;  // scratch: bytes per channel of the current transfer
  std::uint64_t busy_ps_total_ = 0;
  ClientStats stats_[kHbmClientCount];
  L2Cache* l2_ = nullptr;
  double l2_read_gbps_ = 0, l2_write_gbps_ = 0;
  bool capture_allocates_ = false;
  L2Stats l2_stats_[kHbmClientCount];
  std::unordered_map<std::uint64_t, std::unique_ptr<std::byte[]>> pages_;  // lookup only
  ScanMemo scans_;
};

}  // namespace probelab::chip
