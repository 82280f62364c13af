// Subcommands of the `probelab` executable. Each registers its CLI11 subcommand and returns the
// callback that runs it; the callback returns the process exit code (0 ok, 1 an expectation
// failed, 2 bad input). Bad input is reported by throwing (ScenarioError, ConfigError, GraphError);
// main() turns those into exit code 2.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace probelab::cli {

using Command = std::function<int()>;

Command add_run(CLI::App& app);
Command add_list(CLI::App& app);
Command add_show(CLI::App& app);
Command add_compare(CLI::App& app);
Command add_campaign(CLI::App& app);
Command add_dump(CLI::App& app);
Command add_quantize(CLI::App& app);
/// Progress lines of a multi-run command, one per finished simulation, on stderr.
void progress_to_stderr(const std::string& line);
Command add_replay(CLI::App& app);

}  // namespace probelab::cli
