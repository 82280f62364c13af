#include "sim/campaign/campaign_store.h"

#include <cerrno>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

#include <fcntl.h>
#include <unistd.h>

namespace probelab::sim {

namespace fs = std::filesystem;

LoadedTrials load_trials(const fs::path& file) {
  LoadedTrials out;
  std::ifstream in(file, std::ios::binary);
  if (!in) return out;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::set<std::uint64_t> seen;
  std::size_t begin = 0;
  while (begin < text.size()) {
    const std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) {  // a truncated last line
      ++out.skipped;
      break;
    }
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    out.valid_bytes = begin;
    if (line.empty()) continue;
    try {
      TrialRecord r = TrialRecord::from_json(nlohmann::json::parse(line));
      if (!seen.insert(r.index).second) {
        ++out.skipped;
        continue;
      }
      out.records.push_back(std::move(r));
    } catch (const std::exception&) {
      ++out.skipped;
    }
  }
  return out;
}

TrialLog::TrialLog(const fs::path& file, std::uint64_t keep_bytes) : file_(file) {
  fs::create_directories(file.parent_path());
  fd_ = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "open " + file.string());
  if (::ftruncate(fd_, static_cast<off_t>(keep_bytes)) != 0) {
    const int e = errno;
    ::close(fd_);
    throw std::system_error(e, std::generic_category(), "truncate " + file.string());
  }
}

TrialLog::~TrialLog() {
  if (fd_ >= 0) ::close(fd_);
}

void TrialLog::append(const TrialRecord& r) { append_line(r.to_json().dump()); }

void TrialLog::append_line(const std::string& line) {
  const std::string text = line + "\n";
  // One write() on an O_APPEND descriptor: the line lands whole at the end of the file (a
  // regular file's write is not split by signals once it started; a short write is an error).
  ssize_t n;
  do {
    n = ::write(fd_, text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) throw std::system_error(errno, std::generic_category(), "write " + file_.string());
  if (static_cast<std::size_t>(n) != text.size())
    throw std::system_error(EIO, std::generic_category(), "short write to " + file_.string());
  if (::fsync(fd_) != 0) throw std::system_error(errno, std::generic_category(), "fsync " + file_.string());
}

}  // namespace probelab::sim
