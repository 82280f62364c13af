// The scenario runner: prepares every scenario (bad input is reported before anything runs:
// scenario, model, probes, an output directory that cannot be written, a run whose memory
// estimate does not fit, see sim/run/resources.h), then simulates each in forked child processes
// — the run with probes, the same run without probes (the capture-overhead baseline) and every
// variant — at most `jobs` at a time. Each scenario is written into a scratch directory
// <out>/.<name>.partial-<pid> that replaces <out>/<name> (atomically where the filesystem can
// exchange directories) only once complete, so a killed or interrupted run leaves the previous
// results untouched; scratch directories of dead processes are removed by the next run. Per
// scenario under <out>/<name>/:
//   report.json   (sim/run/report.h; written last, atomically: a report.json is always complete)
//   report.html   the same as a self-contained page (sim/html/report_html.h), written before it
//   summary.txt   the human summary
//   trace.json    Chrome/Perfetto timeline of the run with probes (chip_model/trace.h);
//   trace.pftrace the same as Perfetto's protobuf trace (RunOptions::trace_formats)
//   dump/         the probe runtime's dumps (dump.json manifests, .npy files), per rank
//   outputs/      the fetched tensors of the run (rank<r>/<tensor>.npy; rank<r>/outputs.json maps
//                 tensor names to files)
//   variants/<v>/ dumps of each variant
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chip_model/trace.h"
#include "sim/run/partition_run.h"
#include "sim/scenario/prepared_run.h"
#include "sim/scenario/scenario.h"

namespace probelab::sim {

struct RunOptions {
  std::filesystem::path out_root = "out";
  LoadOptions load;             // --set, --seed, source root
  int jobs = 1;                 // child processes at a time
  bool baseline = true;         // also run without probes to measure capture overhead
  bool trace = true;            // write the trace
  std::vector<chip::Trace::Format> trace_formats{chip::Trace::Format::Json};  // trace.json, trace.pftrace
  /// --trace-steps FIRST:LAST: the trace keeps each rank's steps [first, last] only (a long run
  /// holds and writes about that much); every scenario must reach step `first`.
  std::optional<std::pair<std::uint32_t, std::uint32_t>> trace_steps;
  unsigned timeout_s = 3600;    // a simulation still running after this long is killed
  bool strict = false;          // preparation warnings (PreparedRun::warnings) are bad input
  std::uint64_t host_memory_limit = 0;  // bytes the simulations at once may use (0: what is available)
  /// Distributed runs (sim/run/partition_run.h): every simulation's chips partitioned over the
  /// comm's processes, simulations one after the other; nullptr: each simulation in one process.
  std::shared_ptr<PartitionComm> distributed;
};

struct ScenarioOutcome {
  std::string name;
  std::filesystem::path file;
  std::filesystem::path out_dir;
  bool passed = false;
  nlohmann::json report;
};

/// Files stay as given; a directory contributes its *.yaml files (not recursive), sorted.
/// No arguments: <source root>/scenarios/*.yaml. Throws ScenarioError for a missing path or an
/// empty selection.
std::vector<std::filesystem::path> expand_scenario_args(const std::vector<std::string>& args,
                                                        const std::filesystem::path& source_root);

class Runner {
 public:
  explicit Runner(RunOptions opts) : opts_(std::move(opts)) {}

  /// Loads and prepares every scenario and its variants. Throws on bad input (also a job that
  /// cannot be partitioned over the distributed run's processes).
  void prepare(const std::vector<std::filesystem::path>& files);
  /// Prepares one loaded scenario (a file or a document built in memory) and its variants.
  /// Throws on bad input, and when another scenario of this runner has the same name.
  void add(const Scenario& s);
  /// Whether this process writes reports (always, unless it is a non-zero rank of a distributed run).
  bool writer() const { return !opts_.distributed || opts_.distributed->writer(); }
  /// The writer's exit code on every process of a distributed run.
  int agree(int code) const { return opts_.distributed ? opts_.distributed->agree(code) : code; }
  std::size_t size() const { return scenarios_.size(); }

  /// Runs everything prepared; `progress` gets one line per finished simulation.
  std::vector<ScenarioOutcome> run(const std::function<void(const std::string&)>& progress = {});

 private:
  struct Entry {
    PreparedRun main;
    std::vector<PreparedRun> variants;
    std::filesystem::path out_dir;    // <out>/<name>: replaced only by a complete result
    std::filesystem::path stage_dir;  // <out>/.<name>.partial-<pid>: where this run writes
  };
  RunOptions opts_;
  std::vector<Entry> scenarios_;
  std::map<std::string, std::filesystem::path> names_;  // scenario name -> its file
};

/// Writes `text` to `path` atomically (temporary file in the same directory, then rename).
void write_text_atomic(const std::filesystem::path& path, const std::string& text);

/// The JSON in file `p`; null when it is missing or not (yet) complete JSON (a result a child
/// process may not have finished writing).
nlohmann::json read_json_or_null(const std::filesystem::path& p);

/// Creates `root` if needed (`create` false: only checks that it could be); throws ScenarioError
/// (naming `option`, exit code 2) naming `what` ("output directory") when it is a file, cannot be
/// created or is not writable.
void check_output_dir(const std::filesystem::path& root, const std::string& what, bool create = true,
                      const std::string& option = "--out");

}  // namespace probelab::sim
