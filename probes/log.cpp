#include "probes/log.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace probelab::probes::log {

bool enabled(std::string_view channel) {
  static const std::string spec = [] {
    const char* e = std::getenv("PROBELAB_DEBUG");
    return e ? fmt::format(",{},", e) : std::string();
  }();
  if (spec.empty()) return false;
  return spec.find(",all,") != std::string::npos || spec.find(fmt::format(",{},", channel)) != std::string::npos;
}

bool quiet() {
  static const bool q = std::getenv("PROBELAB_QUIET") != nullptr;
  return q;
}

namespace {

struct RankWarnings {
  using Key = std::pair<std::string, std::string>;  // (channel, message)
  struct Entry {
    std::uint32_t first = 0, latest = 0;
    std::set<std::uint32_t> ranks;  // every rank that gave it, `first` included
    bool printed = false;
  };
  std::mutex mu;
  std::map<Key, Entry> seen;
  std::vector<Key> pending;  // held back, in order of first appearance
  bool at_exit = false;

  void print(const Key& k, Entry& e) {
    const std::size_t more = e.ranks.size() - 1;
    fmt::print(stderr, "[probes:{}] warning: rank {}: {}{}\n", k.first, e.first, k.second,
               more ? fmt::format(" (and {} more rank{})", more, more > 1 ? "s" : "") : std::string());
    e.printed = true;
  }
  // Prints the held warnings up to and including `upto` (all of them when null).
  void print_pending(const Key* upto = nullptr) {
    std::size_t n = 0;
    while (n < pending.size() && (!upto || n == 0 || pending[n - 1] != *upto)) {
      print(pending[n], seen.at(pending[n]));
      ++n;
    }
    pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(n));
    std::fflush(stderr);
  }
  // A rank that gave a held warning, and other ranks did after it, gives something new: its
  // ranks have moved on, the held warnings have their counts.
  bool round_over(std::uint32_t rank) const {
    for (const Key& k : pending) {
      const Entry& e = seen.at(k);
      if (e.ranks.contains(rank) && e.latest != rank) return true;
    }
    return false;
  }
};

RankWarnings& rank_warnings() {
  static RankWarnings w;
  return w;
}

}  // namespace

void warn_rank(std::string_view channel, std::uint32_t rank, std::uint32_t ranks, const std::string& msg) {
  if (quiet()) return;
  RankWarnings& w = rank_warnings();
  const std::lock_guard lock(w.mu);
  RankWarnings::Key key(channel, msg);
  if (auto it = w.seen.find(key); it != w.seen.end()) {
    RankWarnings::Entry& e = it->second;
    if (e.printed) return;
    e.ranks.insert(rank);
    e.latest = rank;
    if (e.ranks.size() >= ranks) w.print_pending(&key);
    return;
  }
  if (w.round_over(rank)) w.print_pending();
  w.seen.emplace(key, RankWarnings::Entry{rank, rank, {rank}, false});
  w.pending.push_back(key);
  if (ranks <= 1) w.print_pending(&key);
  if (!w.at_exit) {
    w.at_exit = true;
    std::atexit(flush_rank_warnings);  // registered after `w` exists: runs before it is destroyed
  }
}

void flush_rank_warnings() {
  RankWarnings& w = rank_warnings();
  const std::lock_guard lock(w.mu);
  w.print_pending();
}

}  // namespace probelab::probes::log
