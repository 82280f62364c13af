#include "graph/user_regex.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "graph/graph.h"

namespace probelab::graph {

namespace {

// Reads a counted repetition "{n}", "{n,}" or "{n,m}" at pattern[i] (which is '{'); returns the
// largest count it allows (n + 1 for "{n,}") and moves i past it, or 0 when it is not one (then
// std::regex decides).
std::uint64_t repetition(const std::string& p, std::size_t& i) {
  std::size_t j = i + 1;
  std::uint64_t n = 0, m = 0;
  bool digits = false, comma = false, second = false;
  for (; j < p.size() && p[j] != '}'; ++j) {
    const char c = p[j];
    if (c >= '0' && c <= '9') {
      std::uint64_t& v = comma ? m : n;
      v = std::min<std::uint64_t>(v * 10 + static_cast<std::uint64_t>(c - '0'), 1'000'000'000);
      (comma ? second : digits) = true;
    } else if (c == ',' && !comma) {
      comma = true;
    } else {
      return 0;
    }
  }
  if (j >= p.size() || !digits) return 0;
  i = j;
  return !comma ? n : second ? std::max(n, m) : n + 1;
}

// The limits of user_regex.h, checked on the pattern text before std::regex sees it.
void check_limits(const std::string& p) {
  if (p.size() > kMaxRegexLength)
    throw GraphError(fmt::format("regex of {} characters (at most {})", p.size(), kMaxRegexLength));
  // cost[d]: expanded size of the group open at depth d so far; last[d]: cost of its last atom
  std::vector<std::uint64_t> cost{0}, last{0};
  auto add_atom = [&](std::uint64_t c) {
    cost.back() += c;
    last.back() = c;
  };
  bool in_class = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {
      ++i;
      if (!in_class) add_atom(1);
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      continue;
    }
    if (c == '[') {
      in_class = true;
      add_atom(1);
    } else if (c == '(') {
      if (static_cast<int>(cost.size()) > kMaxRegexNesting)
        throw GraphError(fmt::format("regex nests groups deeper than {} levels", kMaxRegexNesting));
      cost.push_back(0);
      last.push_back(0);
    } else if (c == ')') {
      if (cost.size() == 1) continue;  // unbalanced: std::regex reports it
      const std::uint64_t group = cost.back() + 1;
      cost.pop_back();
      last.pop_back();
      add_atom(group);
    } else if (c == '{') {
      const std::uint64_t n = repetition(p, i);
      if (n == 0) {
        add_atom(1);
        continue;
      }
      // the repeated atom is expanded n times (its first copy is already counted)
      cost.back() += last.back() * (n - 1);
      last.back() *= n;
      if (cost.back() > kMaxRegexExpansion)
        throw GraphError(fmt::format("regex repetitions expand to more than {} states", kMaxRegexExpansion));
    } else if (c == '*' || c == '+' || c == '?' || c == '|') {
      add_atom(1);
    } else {
      add_atom(1);
    }
    if (cost.back() > kMaxRegexExpansion)
      throw GraphError(fmt::format("regex repetitions expand to more than {} states", kMaxRegexExpansion));
  }
}

}  // namespace

std::regex compile_user_regex(const std::string& pattern) {
  check_limits(pattern);
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw GraphError(e.what());
  }
}

bool user_regex_match(const std::string& text, const std::regex& re) {
  if (text.size() > kMaxRegexSubject)
    throw GraphError(fmt::format("cannot match a regex against a name of {} characters (at most {}): '{}...'",
                                 text.size(), kMaxRegexSubject, text.substr(0, 60)));
  return std::regex_match(text, re);
}

}  // namespace probelab::graph
