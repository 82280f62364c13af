// What a campaign's worker processes and their parent share: a worker's start (quiet SystemC, its
// output into a log, a timeout), and what a worker's end without a result means. The parent reads
// a worker's results with read_json_or_null (sim/run/runner.h).
#pragma once

#include <filesystem>
#include <string>

#include "sim/run/process_pool.h"

namespace probelab::sim {

/// In a worker: SystemC quiet, stdout and stderr into `log` (SystemC reports go to stdout), and an
/// alarm after `timeout_s` seconds (0: none).
void enter_worker(const std::filesystem::path& log, unsigned timeout_s);

/// A worker that ended without its result: "hang" when its alarm killed it, else "crash".
std::string status_of(const ChildStatus& st);

}  // namespace probelab::sim
