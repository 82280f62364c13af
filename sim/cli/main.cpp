// probelab: replay scenarios on the simulated accelerator, list what can be configured, show
// models and scenarios, compare two runs, run fault-injection campaigns. Exit codes, in every
// subcommand: 0 success / all expectations held, 1 an expectation failed or the runs differ,
// 2 bad input (the message names the file, line, key and what was expected), 3 internal error.
#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "sim/scenario/bad_input.h"
#include "sim/cli/commands.h"
#include "sim/run/heap_policy.h"
#include "sim/run/mpi_session.h"
#include "sim/run/process_pool.h"

int main(int argc, char** argv) {
  probelab::sim::keep_freed_memory();
  CLI::App app{"probelab: a simulated Da Vinci-style accelerator hosting a precision-probe runtime"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "probelab 0.1.0");
  std::map<std::string, probelab::cli::Command> commands;
  commands["run"] = probelab::cli::add_run(app);
  commands["list"] = probelab::cli::add_list(app);
  commands["show"] = probelab::cli::add_show(app);
  commands["compare"] = probelab::cli::add_compare(app);
  commands["campaign"] = probelab::cli::add_campaign(app);
  commands["dump"] = probelab::cli::add_dump(app);
  commands["quantize"] = probelab::cli::add_quantize(app);
  commands["replay"] = probelab::cli::add_replay(app);
  commands["query"] = probelab::cli::add_query(app);
  commands["perf"] = probelab::cli::add_perf(app);
  // The first word that is not an option names the subcommand; say so when it names none.
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word.front() == '-') continue;
    if (!commands.count(word)) {
      std::string known;
      for (const auto& [name, cmd] : commands) known += (known.empty() ? "" : ", ") + name;
      fmt::print(stderr, "probelab: error: unknown subcommand '{}' (expected one of: {}; see probelab --help)\n", word,
                 known);
      return 2;
    }
    break;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    for (auto* sub : app.get_subcommands()) return commands.at(sub->get_name())();
  } catch (const probelab::sim::Interrupted& i) {
    probelab::sim::end_by_signal(i.signal);  // the workers are gone and the scratch removed
  } catch (const std::exception& e) {
    std::fflush(stdout);
    if (probelab::sim::is_bad_input(e)) {
      // Under mpirun every process reads the same input and finds the same fault: one message.
      if (!probelab::sim::launched_by_mpi() || probelab::sim::MpiSession::instance().rank() == 0)
        fmt::print(stderr, "probelab: error: {}\n", e.what());
      return 2;
    }
    fmt::print(stderr, "probelab: internal error: {}\n", e.what());
    return 3;
  } catch (...) {
    fmt::print(stderr, "probelab: internal error: unknown exception\n");
    return 3;
  }
  return 0;
}
