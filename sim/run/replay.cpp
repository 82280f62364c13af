// Time-travel replay from a checkpoint (replay.h).
#include "sim/run/replay.h"

#include <algorithm>
#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <map>

#include "graph/npy.h"
#include "sim/run/checkpoint_store.h"
#include "sim/run/runner.h"
#include "sim/scenario/scenario_error.h"

namespace probelab::sim {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

json read_json(const fs::path& p) {
  std::ifstream in(p);
  if (!in) throw ScenarioError(p.string(), 0, 0, "RUN", "an output directory of probelab run (report.json)");
  return json::parse(in);
}

// Bitwise equality of two tensors' dtype, shape and bytes.
bool same_bits(const graph::Tensor& a, const graph::Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::equal(a.bytes().begin(), a.bytes().end(), b.bytes().begin());
}

// Whether `p` is `dir` or lies under it, symbolic links resolved.
bool within(const fs::path& p, const fs::path& dir) {
  std::error_code ea, eb;
  const fs::path a = fs::weakly_canonical(fs::absolute(p), ea), b = fs::weakly_canonical(fs::absolute(dir), eb);
  if (ea || eb) return false;
  const auto [ib, ia] = std::mismatch(b.begin(), b.end(), a.begin(), a.end());
  return ib == b.end() || (std::next(ib) == b.end() && ib->empty());  // a trailing "/" of b is no component
}

}  // namespace

ReplayResult replay_run(const fs::path& run_dir, const ReplayOptions& opts,
                        const std::function<void(const std::string&)>& progress) {
  const json original = read_json(run_dir / "report.json");
  const fs::path ckpt = run_dir / "checkpoints";
  LoadOptions lo;
  lo.sets = opts.sets;
  Scenario s = read_checkpoint_scenario(ckpt, lo);
  if (opts.from_step >= static_cast<std::uint32_t>(s.steps))
    throw ScenarioError(run_dir.string(), 0, 0, "--from-step", fmt::format("a step below steps ({})", s.steps),
                        std::to_string(opts.from_step));
  // Missing checkpoints are named before anything else; the runner reads them (check_resume_fits).
  for (int r = 0; r < s.ranks; ++r) require_checkpoint(ckpt, static_cast<std::uint32_t>(r), opts.from_step);
  s.resume = Scenario::Resume{opts.from_step, ckpt};
  s.expectations.clear();
  s.variants.clear();

  RunOptions ro;
  ro.out_root = opts.out_root.empty() ? run_dir / fmt::format("replay.step{}", opts.from_step) : opts.out_root;
  // The replay's directory replaces an earlier run of that name: never the run it replays.
  if (within(run_dir, ro.out_root / s.name))
    throw ScenarioError("--out", 0, 0, "",
                        fmt::format("an output directory whose '{}' is not the run being replayed", s.name),
                        fmt::format("'{}': the replay would replace {}", ro.out_root.string(), run_dir.string()));
  ro.jobs = opts.jobs;
  ro.baseline = false;
  Runner runner(ro);
  runner.add(s);
  const std::vector<ScenarioOutcome> outs = runner.run(progress);
  const ScenarioOutcome& o = outs.at(0);
  if (o.report.value("status", "") != "ok")
    throw std::runtime_error(fmt::format("replay: the resumed run failed: {}", o.report.value("error", std::string("?"))));

  ReplayResult res;
  res.out_dir = o.out_dir;
  json diffs = json::array();
  // Losses: the original's steps K.. against the replay's.
  std::size_t losses = 0;
  const json& lo_orig = original["losses"];
  const json& lo_rep = o.report["losses"];
  if (lo_orig.is_array() && lo_rep.is_array()) {
    for (std::size_t r = 0; r < lo_orig.size() && r < lo_rep.size(); ++r) {
      const json& a = lo_orig[r];
      const json& b = lo_rep[r];
      for (std::size_t k = 0; k < b.size(); ++k) {
        const std::size_t step = opts.from_step + k;
        ++losses;
        if (step >= a.size() || a[step] != b[k])
          diffs.push_back({{"what", "loss"}, {"rank", r}, {"step", step},
                           {"original", step < a.size() ? a[step] : json(nullptr)}, {"replay", b[k]}});
      }
    }
  }
  // Outputs and every later checkpoint, bitwise.
  std::size_t outputs = 0, tensors = 0;
  for (int r = 0; r < s.ranks; ++r) {
    const fs::path od = run_dir / "outputs" / fmt::format("rank{}", r);
    const fs::path rd = o.out_dir / "outputs" / fmt::format("rank{}", r);
    std::vector<fs::path> files;  // sorted: the diff list does not depend on directory order
    if (fs::is_directory(od))
      for (const auto& e : fs::directory_iterator(od))
        if (e.path().extension() == ".npy") files.push_back(e.path());  // outputs.json indexes them
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      ++outputs;
      const fs::path other = rd / f.filename();
      if (!fs::exists(other) || !same_bits(graph::read_npy(f.string()), graph::read_npy(other.string())))
        diffs.push_back({{"what", "output"}, {"rank", r}, {"tensor", f.stem().string()}});
    }
    for (std::uint32_t step : checkpoint_steps(ckpt, static_cast<std::uint32_t>(r))) {
      if (step <= opts.from_step) continue;
      const auto a = read_checkpoint(ckpt, static_cast<std::uint32_t>(r), step);
      const fs::path rc = o.out_dir / "checkpoints";
      const auto have = checkpoint_steps(rc, static_cast<std::uint32_t>(r));
      if (std::find(have.begin(), have.end(), step) == have.end()) {
        diffs.push_back({{"what", "checkpoint"}, {"rank", r}, {"step", step}, {"note", "missing in the replay"}});
        continue;
      }
      const auto b = read_checkpoint(rc, static_cast<std::uint32_t>(r), step);
      for (const auto& [name, t] : a) {
        ++tensors;
        auto it = b.find(name);
        if (it == b.end() || !same_bits(t, it->second))
          diffs.push_back({{"what", "checkpoint"}, {"rank", r}, {"step", step}, {"tensor", name}});
      }
    }
  }
  res.identical = diffs.empty();
  json sets = json::object();
  for (const auto& st : opts.sets) sets[st.key] = st.value;
  res.report = {{"run", run_dir.string()},
                {"from_step", opts.from_step},
                {"steps", s.steps},
                {"sets", sets},
                {"replay", o.out_dir.string()},
                {"compared", {{"losses", losses}, {"outputs", outputs}, {"checkpoint_tensors", tensors}}},
                {"identical", res.identical},
                {"differences", diffs},
                {"cycles", {{"original", original["cycles"].value("total", json(nullptr))},
                            {"replay", o.report["cycles"].value("total", json(nullptr))}}}};
  write_text_atomic(o.out_dir / "replay.json", res.report.dump(2) + "\n");
  return res;
}

}  // namespace probelab::sim
