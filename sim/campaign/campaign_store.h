// trials.jsonl: one JSON object per line, one line per finished trial. Each line is written
// whole with a single write() on an O_APPEND descriptor and fsync'ed, so an interrupted campaign
// leaves complete lines plus at most one truncated last line; loading skips (and reports) it, and
// opening for append cuts the file back to its last complete line first.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/campaign/campaign_outcome.h"

namespace probelab::sim {

struct LoadedTrials {
  std::vector<TrialRecord> records;  // in file order, first occurrence of each index
  std::uint64_t valid_bytes = 0;     // length of the file up to its last complete line
  std::size_t skipped = 0;           // truncated or unreadable lines (and repeated indices)
  std::vector<std::size_t> unreadable_lines;  // 1-based numbers of lines that are not a trial record
  std::vector<std::size_t> repeated_lines;    // 1-based numbers of lines repeating an earlier index
  bool truncated_tail = false;                // the last line has no newline (an interrupted write)
  /// One line for the user per kind of skipped line ("" when none): the trials of skipped lines
  /// run again.
  std::vector<std::string> warnings(const std::string& file) const;
};

/// Reads trials.jsonl; a missing file gives nothing. Throws std::system_error when `file` exists
/// but is not a readable regular file.
LoadedTrials load_trials(const std::filesystem::path& file);

class TrialLog {
 public:
  /// Opens (creating) `file` for appending; truncates it to `keep_bytes` first (the valid part
  /// reported by load_trials; pass 0 to start afresh). Throws std::system_error.
  TrialLog(const std::filesystem::path& file, std::uint64_t keep_bytes);
  ~TrialLog();
  TrialLog(const TrialLog&) = delete;
  TrialLog& operator=(const TrialLog&) = delete;

  /// Appends one record as a line, atomically (one write, then fsync).
  void append(const TrialRecord& r);
  /// Appends a ready line (without its newline).
  void append_line(const std::string& line);

 private:
  int fd_ = -1;
  std::filesystem::path file_;
};

}  // namespace probelab::sim
