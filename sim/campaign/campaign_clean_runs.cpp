// A campaign's clean runs: the scenario without injections under the clean-run variations
// (campaign.clean_runs.vary), each in a worker process, scored on whether anything flagged it.
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "chip_model/spec/capture_math.h"
#include "sim/campaign/campaign_outcome.h"
#include "sim/campaign/campaign_runner.h"
#include "sim/campaign/campaign_store.h"
#include "sim/campaign/campaign_worker.h"
#include "sim/run/process_pool.h"
#include "sim/run/runner.h"
#include "sim/run/simulation.h"
#include "sim/scenario/bad_input.h"
#include "sim/scenario/scenario_error.h"

namespace probelab::sim {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// Digest of a run: every output tensor (names and bytes, in name order), the losses of every
/// step and the probe runtime's fingerprint of every capture it drained. Bit-identical runs share it.
std::uint64_t run_digest(const RunOutputs& outs, const json& result) {
  std::uint64_t h = 0;
  auto text = [&h](const std::string& s) { h = spec::xxh64(std::as_bytes(std::span(s.data(), s.size())), h); };
  for (const auto& [name, t] : outs) {
    text(name);
    h = spec::xxh64(t.bytes(), h);
  }
  text(result.value("losses", json()).dump());
  text(result.value("fingerprints", json()).dump());
  return h;
}

/// What made a clean run flag anything, in one line.
std::string flag_of(const TrialObservation& o) {
  if (!o.latched.empty()) {
    const auto& l = o.latched.front();
    return fmt::format("{} at {} step {} rank {} ({} exception(s))", l.kind, l.op, l.step, l.rank, o.exceptions);
  }
  if (o.conditions) return fmt::format("{} condition(s) fired", o.conditions);
  if (o.failing_comparisons) return fmt::format("{} failing comparison(s)", o.failing_comparisons);
  if (o.integrity) return fmt::format("{} integrity violation(s)", o.integrity);
  if (o.inconsistent) return "ranks inconsistent";
  if (!o.perf_suspects.empty()) return fmt::format("perf finding {}", o.perf_suspects.front());
  return "";
}

}  // namespace

std::vector<CleanRun> Campaign::clean_runs(unsigned timeout_s) const {
  const std::uint64_t n = model_.clean.runs;
  std::vector<CleanRun> out(n);
  std::vector<bool> have(n, false);
  if (opts_.resume)
    for (std::uint64_t k = 0; k < n; ++k) {
      const json j = read_json_or_null(out_ / "clean" / fmt::format("run-{}", k) / "clean.json");
      if (j.is_null()) continue;
      try {
        out[k] = CleanRun::from_json(j);
        have[k] = out[k].sets == model_.clean.sets(k);
      } catch (const std::exception&) {
      }
    }
  ProcessPool pool(opts_.jobs);
  std::vector<std::uint64_t> todo;
  for (std::uint64_t k = 0; k < n; ++k) {
    if (have[k]) continue;
    todo.push_back(k);
    const fs::path dir = out_ / "clean" / fmt::format("run-{}", k);
    std::error_code ec;
    fs::remove_all(dir, ec);
    pool.submit([this, k, dir, timeout_s]() -> int {
      enter_worker(dir / "log.txt", timeout_s);
      CleanRun c;
      c.index = k;
      c.sets = model_.clean.sets(k);
      try {
        LoadOptions lo = opts_.load;
        for (const auto& [key, value] : c.sets) lo.sets.push_back({key, value});
        Scenario s = load_scenario(opts_.scenario, lo);
        s.injections.clear();  // fault-free
        const PreparedRun run = prepare_run(s);
        SimRequest req;
        req.run = &run;
        req.out_dir = dir;
        req.save_outputs = true;
        const json res = simulate(req);
        if (res.value("status", "") != "ok") {
          c.status = "error";
          c.error = res.value("error", std::string("simulation failed"));
        } else {
          const RunOutputs outs = read_run_outputs(dir);
          const TrialObservation o = observe(res, OutputCheck{});
          c.digest = run_digest(outs, res);
          c.flagged = flags_anything(o, scores_perf());
          c.flag = flag_of(o);
        }
      } catch (const std::exception& e) {
        c.status = "error";
        c.error = e.what();
      }
      // only the verdict is kept: the run's dumps and outputs would fill the disk over 300 runs
      std::error_code ec2;
      for (const char* sub : {"outputs", "dump"}) fs::remove_all(dir / sub, ec2);
      write_text_atomic(dir / "clean.json", c.to_json().dump());
      return 0;
    });
  }
  pool.run([&](std::size_t i, const ChildStatus& st) {
    const std::uint64_t k = todo[i];
    const fs::path dir = out_ / "clean" / fmt::format("run-{}", k);
    const json j = read_json_or_null(dir / "clean.json");
    if (j.is_null()) {
      out[k].index = k;
      out[k].sets = model_.clean.sets(k);
      out[k].status = status_of(st);
      out[k].error = fmt::format("the clean run ended without a result ({}); see {}", st.describe(),
                                 (dir / "log.txt").string());
    } else {
      out[k] = CleanRun::from_json(j);
    }
  });
  return out;
}

void Campaign::check_clean_vary(const fs::path& file) const {
  for (std::size_t i = 0; i < model_.clean.vary.size(); ++i) {
    const auto& [key, values] = model_.clean.vary[i];
    const CleanRuns::Source& src = model_.clean.vary_sources.at(i);
    std::vector<std::string> check = values;
    if (src.range && values.size() > 2) check = {values.front(), values.back()};
    for (const auto& value : check) {
      try {
        LoadOptions lo = opts_.load;
        lo.sets.push_back({key, value});
        Scenario s = load_scenario(opts_.scenario, lo);
        s.injections.clear();  // as a clean run
        (void)prepare_run(s);
      } catch (const std::exception& e) {
        if (!is_bad_input(e)) throw;
        throw ScenarioError(file.string(), src.mark.is_null() ? 0 : src.mark.line + 1,
                            src.mark.is_null() ? 0 : src.mark.column + 1, "campaign.clean_runs.vary." + key,
                            "a --set key and values every clean run can apply",
                            fmt::format("'{}', which a clean run refuses: {}", value, e.what()));
      }
    }
  }
}

}  // namespace probelab::sim
