// The host side of the debug capture unit: programs the ping-pong (or single) HBM buffers,
// drains ready buffers over DMA on kIrqCaptureFull, parses and validates records (magic, size,
// CRC-32 of the payload), releases buffers, and keeps exact accounting so that nothing is lost
// silently: produced (kRegCapRecords) = drained + corrupt + dropped (kRegCapDropped) once flushed
// and settled (records lost inside corrupt buffer regions are counted from the production count).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chip_model/spec/capture_math.h"
#include "chip_model/spec/capture_record.h"
#include "probes/device.h"
#include "probes/probe_config.h"

namespace probelab::probes {

struct CaptureRecord {
  spec::CaptureRecordHeader header;
  std::vector<std::byte> payload;
};

using spec::crc32;  // a record's checksum, as the device computes it (capture_math.h)

/// Serializes a record as the device writes it (header, payload, zero padding to 8 bytes),
/// filling record_bytes, payload_bytes and checksum. Used by FakeDevice and tests.
std::vector<std::byte> encode_record(spec::CaptureRecordHeader header, std::span<const std::byte> payload);

struct ParseResult {
  std::vector<CaptureRecord> records;
  std::uint64_t corrupt = 0;        // records rejected (bad magic/size/CRC/payload kind)
  std::uint64_t bytes_skipped = 0;  // bytes skipped while resynchronising on the next magic
  std::vector<std::string> errors;  // first few problems, with buffer offsets
};

/// Parses a buffer of back-to-back records. Never throws on bad content: a record whose header
/// is unusable makes the parser resynchronise at the next 8-byte aligned magic; a record with a
/// good header but bad CRC/payload is skipped whole.
ParseResult parse_capture_buffer(std::span<const std::byte> buffer);

struct CaptureAccounting {
  std::uint64_t produced = 0;      // device: kRegCapRecords
  std::uint64_t dropped = 0;       // device: kRegCapDropped
  std::uint64_t drained = 0;       // valid records parsed by the host
  std::uint64_t corrupt = 0;       // records rejected by the parser
  std::uint64_t seq_gaps = 0;      // missing sequence numbers (dropped or corrupt)
  std::uint64_t seq_reorders = 0;  // sequence numbers that went backwards (should be 0)
  std::uint64_t buffers = 0;       // buffers drained
  std::uint64_t bytes = 0;         // bytes DMA-read
  std::uint64_t device_bytes = 0;  // device: kRegCapBytes
  std::uint64_t stall_cycles = 0;  // device: kRegCapStall
  std::uint64_t bytes_skipped = 0;
  std::uint64_t oversize = 0;          // device: kRegCapOversize (records larger than a buffer; in `dropped`)
  std::uint64_t oversize_max_bytes = 0;  // device: kRegCapOversizeMax
  /// Records whose headers were destroyed inside skipped (corrupt) buffer regions: counted from
  /// the device's production count once everything was drained (settle()); in `corrupt`.
  std::uint64_t lost_in_corrupt_regions = 0;
  /// produced - (drained + corrupt + dropped): records neither drained nor reported dropped.
  std::int64_t unaccounted() const;
  bool balanced() const { return unaccounted() == 0; }
  std::vector<std::string> errors;
};
nlohmann::json to_json(const CaptureAccounting& a);

class CaptureDrain {
 public:
  using Sink = std::function<void(CaptureRecord&&)>;
  CaptureDrain(Device& dev, CaptureUnitOptions opts, Sink sink);
  ~CaptureDrain();

  /// Allocates the buffer(s) and writes the capture registers (buffers, size, ctrl).
  void program();
  /// Drains every ready buffer (oldest first, by the sequence numbers it holds), releasing each,
  /// and takes the device counters from the same status reads. Re-entry (an interrupt during a
  /// drain) is folded into the running drain. `device_idle`: nothing produces records now (the
  /// streams and the capture DMA engine are idle), so no status re-read after a release.
  void drain(bool device_idle = false);
  /// kRegCapFlush, then drains until nothing is ready.
  void flush(bool device_idle = false);
  /// Reads kRegCapRecords/Dropped/Bytes/Stall/Oversize into the accounting.
  void read_counters();
  /// After the final flush, with the device idle: records still unaccounted while parsing had
  /// to skip corrupt bytes were in those bytes (their headers destroyed), so they are counted as
  /// corrupt (lost_in_corrupt_regions) and the accounting balances. Otherwise nothing changes.
  void settle();
  const CaptureAccounting& accounting() const { return acc_; }
  bool programmed() const { return programmed_; }

 private:
  void drain_buffer(std::uint32_t index, std::uint32_t ready_bytes);
  void take_counters(std::span<const std::uint32_t> block);  // from kRegCapReady on
  Device& dev_;
  CaptureUnitOptions opts_;
  Sink sink_;
  std::uint64_t buf_[2] = {0, 0};
  bool programmed_ = false;
  bool draining_ = false;
  bool pending_ = false;
  bool have_seq_ = false;
  std::uint32_t last_seq_ = 0;
  CaptureAccounting acc_;
};

}  // namespace probelab::probes
