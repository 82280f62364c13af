#include "sim/campaign/campaign_store.h"

#include <cerrno>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

namespace probelab::sim {

namespace fs = std::filesystem;

namespace {

std::string line_list(const std::vector<std::size_t>& lines) {
  std::string s;
  for (std::size_t i = 0; i < lines.size() && i < 10; ++i) s += (i ? ", " : "") + std::to_string(lines[i]);
  if (lines.size() > 10) s += fmt::format(" and {} more", lines.size() - 10);
  return s;
}

}  // namespace

std::vector<std::string> LoadedTrials::warnings(const std::string& file) const {
  std::vector<std::string> out;
  if (!unreadable_lines.empty())
    out.push_back(fmt::format("{}: {} line(s) are not trial records and were ignored (line {}); their trials run again",
                              file, unreadable_lines.size(), line_list(unreadable_lines)));
  if (!repeated_lines.empty())
    out.push_back(fmt::format("{}: {} line(s) repeat an earlier trial and were ignored (line {})", file,
                              repeated_lines.size(), line_list(repeated_lines)));
  if (truncated_tail)
    out.push_back(fmt::format("{}: the last line was cut short (an interrupted write) and was dropped", file));
  return out;
}

LoadedTrials load_trials(const fs::path& file) {
  LoadedTrials out;
  std::error_code ec;
  if (!fs::exists(file, ec)) return out;
  if (!fs::is_regular_file(file, ec))
    throw std::system_error(EISDIR, std::generic_category(), file.string() + " is not a regular file");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::system_error(errno, std::generic_category(), "cannot read " + file.string());
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::set<std::uint64_t> seen;
  std::size_t begin = 0, number = 0;
  while (begin < text.size()) {
    const std::size_t end = text.find('\n', begin);
    ++number;
    if (end == std::string::npos) {  // a truncated last line
      ++out.skipped;
      out.truncated_tail = true;
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
        out.repeated_lines.push_back(number);
        continue;
      }
      out.records.push_back(std::move(r));
    } catch (const std::exception&) {
      ++out.skipped;
      out.unreadable_lines.push_back(number);
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
