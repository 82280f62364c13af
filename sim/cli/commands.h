// Subcommands of the `probelab` executable. Each registers its CLI11 subcommand and returns the
// callback that runs it; the callback returns the process exit code (0 ok, 1 an expectation
// failed or runs differ, 2 bad input, 3 internal error). Bad input is reported by throwing
// (ScenarioError, ConfigError, GraphError, see sim/scenario/bad_input.h); main() turns those into
// exit code 2 and every other exception into 3.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

namespace probelab::cli {

using Command = std::function<int()>;

/// Option check: a decimal integer in [0, 2^64 - 1] (no sign, no fraction), e.g. for --seed; the
/// message says so (a larger value would otherwise be clamped to 2^64 - 1 without a word).
inline CLI::Validator non_negative_integer() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
          return "expected a non-negative integer, got '" + s + "'";
        const std::size_t first = std::min(s.find_first_not_of('0'), s.size());
        const std::string digits = s.substr(first);
        constexpr std::string_view kMax = "18446744073709551615";
        if (digits.size() > kMax.size() || (digits.size() == kMax.size() && digits > kMax))
          return "expected an integer from 0 to 18446744073709551615, got '" + s + "'";
        return {};
      },
      "UINT");
}

/// Option check: a decimal number in [lo, hi] (NaN never is; "inf" only when hi or lo is
/// infinite); `expected` says which, e.g. "a cosine from -1 to 1".
inline CLI::Validator number_in(double lo, double hi, std::string expected) {
  return CLI::Validator(
      [lo, hi, expected](std::string& s) -> std::string {
        double v = 0;
        const char* end = s.data() + s.size();
        const auto [ptr, ec] = std::from_chars(s.data(), end, v);
        if (s.empty() || ec != std::errc() || ptr != end || std::isnan(v) || v < lo || v > hi)
          return "expected " + expected + ", got '" + s + "'";
        return {};
      },
      "NUMBER");
}

Command add_run(CLI::App& app);
Command add_list(CLI::App& app);
Command add_show(CLI::App& app);
Command add_compare(CLI::App& app);
Command add_campaign(CLI::App& app);
Command add_dump(CLI::App& app);
Command add_quantize(CLI::App& app);
Command add_perf(CLI::App& app);
/// Progress lines of a multi-run command, one per finished simulation, on stderr.
void progress_to_stderr(const std::string& line);
Command add_replay(CLI::App& app);
Command add_query(CLI::App& app);

}  // namespace probelab::cli
