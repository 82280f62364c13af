// Subcommands of the `probelab` executable. Each registers its CLI11 subcommand and returns the
// callback that runs it; the callback returns the process exit code (0 ok, 1 an expectation
// failed or runs differ, 2 bad input, 3 internal error). Bad input is reported by throwing
// (ScenarioError, ConfigError, GraphError, see sim/scenario/bad_input.h); main() turns those into
// exit code 2 and every other exception into 3.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace probelab::cli {

using Command = std::function<int()>;

/// Option check: a decimal integer >= 0 (no sign, no fraction), e.g. for --seed; the message says so.
inline CLI::Validator non_negative_integer() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos) return {};
        return "expected a non-negative integer, got '" + s + "'";
      },
      "UINT");
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
