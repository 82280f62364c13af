// Glob and regex selection of ops and tensors.
#include <regex>

#include <fmt/format.h>

#include "graph/graph.h"
#include "graph/user_regex.h"

namespace probelab::graph {
namespace {

// Index just past the ']' closing the class opened at pat[open], or npos when unclosed.
std::size_t class_end(const std::string& pat, std::size_t open) {
  std::size_t p = open + 1;
  if (p < pat.size() && (pat[p] == '!' || pat[p] == '^')) ++p;
  if (p < pat.size() && pat[p] == ']') ++p;  // a leading ']' is literal
  while (p < pat.size() && pat[p] != ']') ++p;
  return p < pat.size() ? p + 1 : std::string::npos;
}

void check_pattern(const std::string& pat) {
  for (std::size_t p = 0; p < pat.size(); ++p) {
    if (pat[p] == '\\') {
      if (++p == pat.size()) throw GraphError(fmt::format("glob '{}': trailing backslash", pat));
    } else if (pat[p] == '[') {
      const std::size_t e = class_end(pat, p);
      if (e == std::string::npos)
        throw GraphError(fmt::format("glob '{}': '[' at position {} is not closed", pat, p));
      p = e - 1;
    }
  }
}

// Matches one text character against the pattern element at pat[p]; advances p past it.
bool match_one(const std::string& pat, std::size_t& p, char c) {
  const char pc = pat[p];
  if (pc == '?') {
    ++p;
    return true;
  }
  if (pc == '\\') {
    p += 2;
    return pat[p - 1] == c;
  }
  if (pc != '[') {
    ++p;
    return pc == c;
  }
  const std::size_t end = class_end(pat, p);
  std::size_t q = p + 1;
  const bool negate = pat[q] == '!' || pat[q] == '^';
  if (negate) ++q;
  bool hit = false;
  for (bool first = true; q < end - 1; first = false) {
    if (pat[q] == ']' && !first) break;
    const char lo = pat[q];
    if (q + 2 < end - 1 && pat[q + 1] == '-') {
      hit |= lo <= c && c <= pat[q + 2];
      q += 3;
    } else {
      hit |= lo == c;
      ++q;
    }
  }
  p = end;
  return hit != negate;
}

}  // namespace

bool glob_match(const std::string& pat, const std::string& text) {
  check_pattern(pat);
  std::size_t p = 0, t = 0, star_p = std::string::npos, star_t = 0;
  while (t < text.size()) {
    if (p < pat.size() && pat[p] == '*') {
      star_p = ++p;
      star_t = t;
      continue;
    }
    if (p < pat.size()) {
      std::size_t np = p;
      if (match_one(pat, np, text[t])) {
        p = np;
        ++t;
        continue;
      }
    }
    if (star_p == std::string::npos) return false;
    p = star_p;
    t = ++star_t;
  }
  while (p < pat.size() && pat[p] == '*') ++p;
  return p == pat.size();
}

std::vector<const Op*> Graph::select_ops(const std::string& glob) const {
  check_pattern(glob);
  std::vector<const Op*> out;
  for (const Op& op : ops_)
    if (glob_match(glob, op.name)) out.push_back(&op);
  return out;
}

std::vector<const TensorInfo*> Graph::select_tensors(const std::string& glob) const {
  check_pattern(glob);
  std::vector<const TensorInfo*> out;
  for (const auto& [name, t] : tensors_)
    if (glob_match(glob, name)) out.push_back(&t);
  return out;
}

std::vector<const Op*> Graph::select_scope(const std::string& regex) const {
  std::regex re;
  try {
    re = compile_user_regex(regex);
  } catch (const GraphError& e) {
    throw GraphError(fmt::format("scope regex '{}' is invalid: {}", regex.size() > 80 ? regex.substr(0, 80) + "..." : regex,
                                 e.what()));
  }
  std::vector<const Op*> out;
  for (const Op& op : ops_)
    if (user_regex_match(op.scope, re)) out.push_back(&op);
  return out;
}

}  // namespace probelab::graph
