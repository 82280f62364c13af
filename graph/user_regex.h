// Regular expressions written by users (scope filters of watch points and selections): ECMAScript
// as std::regex reads it, within limits. libstdc++'s std::regex recurses once per nesting level
// and per alternative while compiling, expands counted repetitions into states, and recurses per
// consumed character while matching; unchecked, a pattern of 50,000 nested groups, or "(a{999}){999}",
// or a very long subject exhausts the stack or memory. Within these limits it cannot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <regex>
#include <string>

namespace probelab::graph {

inline constexpr std::size_t kMaxRegexLength = 512;      // characters of a pattern
inline constexpr int kMaxRegexNesting = 16;               // nested groups
inline constexpr std::uint64_t kMaxRegexExpansion = 20000;  // states after expanding {n,m} repetitions
inline constexpr std::size_t kMaxRegexSubject = 4096;     // characters of a matched name or scope

/// Compiles `pattern` (ECMAScript). Throws GraphError naming the limit a pattern exceeds, and
/// GraphError with std::regex's reason for a malformed pattern.
std::regex compile_user_regex(const std::string& pattern);

/// Whole-string match of `text`; throws GraphError when `text` exceeds kMaxRegexSubject.
bool user_regex_match(const std::string& text, const std::regex& re);

}  // namespace probelab::graph
