// What a campaign's worker processes and their parent share: reading a result file a worker may
// not have finished, a worker's start (quiet SystemC, its output into a log, a timeout), and what
// a worker's end without a result means.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/run/process_pool.h"

namespace probelab::sim {

/// The JSON in file `p`; null when it is missing or not (yet) complete JSON.
nlohmann::json read_json_file(const std::filesystem::path& p);

/// In a worker: SystemC quiet, stdout and stderr into `log` (SystemC reports go to stdout), and an
/// alarm after `timeout_s` seconds (0: none).
void enter_worker(const std::filesystem::path& log, unsigned timeout_s);

/// A worker that ended without its result: "hang" when its alarm killed it, else "crash".
std::string status_of(const ChildStatus& st);

}  // namespace probelab::sim
