#include "sim/campaign/campaign_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <unistd.h>

#include <fmt/format.h>

#include "graph/yaml_check.h"
#include "injectors/injector.h"
#include "sim/campaign/campaign_html.h"
#include "sim/campaign/campaign_outcome.h"
#include "sim/campaign/campaign_stats.h"
#include "sim/campaign/campaign_store.h"
#include "sim/campaign/campaign_worker.h"
#include "sim/campaign/site_census.h"
#include "sim/run/process_pool.h"
#include "sim/run/runner.h"
#include "sim/scenario/scenario_error.h"
#include "sim/run/simulation.h"

namespace probelab::sim {

namespace fs = std::filesystem;
using nlohmann::json;

struct Campaign::Shared {
  GoldenEnvelope envelope;
  std::uint64_t cycle_span = 1;
  unsigned timeout_s = 0;
  std::set<std::uint64_t> done;          // trials already in trials.jsonl (--resume)
  std::vector<TrialObservation> golden;  // fault-free runs
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> op_windows;  // of the first one
  SiteCensus census;                     // sites the first one reached
};

namespace {

// A fault-free run still going after an hour is killed (the trials' timeout derives from it).
constexpr unsigned kGoldenTimeoutSeconds = 3600;

// Device-cycle windows [first start, last end] of every op's kernels, from a trace.json.
std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> kernel_windows(const fs::path& trace, double clock_mhz) {
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> out;
  const json t = read_json_or_null(trace);
  if (!t.is_object() || !t.contains("traceEvents")) return out;
  for (const auto& e : t["traceEvents"]) {
    if (e.value("ph", "") != "X" || e.value("cat", "") != "kernel" || !e.contains("ts")) continue;
    const double ts = e["ts"].get<double>(), dur = e.value("dur", 0.0);  // microseconds
    const auto a = static_cast<std::uint64_t>(std::llround(ts * clock_mhz));
    const auto b = static_cast<std::uint64_t>(std::llround((ts + dur) * clock_mhz));
    auto [it, fresh] = out.emplace(e.value("name", ""), std::make_pair(a, b));
    if (!fresh) it->second = {std::min(it->second.first, a), std::max(it->second.second, b)};
  }
  return out;
}

fs::path trial_log(const fs::path& out, std::uint64_t i) { return out / "logs" / fmt::format("trial-{:06}.log", i); }

}  // namespace

Campaign::Campaign(CampaignOptions opts) : opts_(std::move(opts)) {}

void Campaign::prepare() {
  Scenario s = load_scenario(opts_.scenario, opts_.load);
  model_ = s.campaign.value_or(FaultModel{});
  if (!opts_.faults.empty()) {
    model_.faults.clear();
    for (std::size_t i = 0; i < opts_.faults.size(); ++i) {
      YAML::Node n;
      if (auto issue = graph::check_yaml_text(opts_.faults[i]))
        throw ScenarioError("--fault", issue->line, issue->column, fmt::format("fault[{}]", i), issue->expected,
                            issue->message);
      try {
        n = YAML::Load(opts_.faults[i]);
      } catch (const YAML::Exception& e) {
        throw ScenarioError("--fault", 0, 0, fmt::format("fault[{}]", i), "a YAML mapping of fault keys", e.what());
      }
      if (auto issue = graph::check_yaml_document(n))
        throw ScenarioError("--fault", 0, 0, join_path(fmt::format("fault[{}]", i), issue->key), issue->expected,
                            issue->message);
      model_.faults.push_back(parse_fault_entry(YamlView(n, "--fault", fmt::format("fault[{}]", i))));
    }
  }
  if (model_.faults.empty() && model_.clean.runs == 0)
    throw ScenarioError(s.file.string(), 0, 0, "campaign.faults",
                        "a fault model: a `campaign: {faults: [...]}` section or --fault (or clean_runs alone)", "none");
  check_clean_vary(s.file);
  trials_ = opts_.trials ? *opts_.trials : model_.trials;
  if (trials_ == 0 && model_.clean.runs == 0)
    throw ScenarioError(s.file.string(), 0, 0, "campaign.trials",
                        "a trial count above 0 (--trials N or campaign.trials), or clean runs (campaign.clean_runs) "
                        "for a campaign of clean runs only",
                        opts_.trials ? "--trials 0, and no clean runs"
                                     : "no trials (campaign.trials 0 or not given), and no clean runs");
  if (trials_ > 0 && model_.faults.empty())
    throw ScenarioError(s.file.string(), 0, 0, "campaign.faults", "fault entries for the trials (or --trials 0)", "none");
  seed_ = opts_.seed ? *opts_.seed : (model_.seed ? *model_.seed : s.seed);
  base_ = prepare_run(s);
  out_ = opts_.out.empty() ? fs::path("out") / "campaign" / base_.scenario.name : opts_.out;
  // Resolve the fault model now so that a bad glob is bad input, before anything runs.
  TrialSpace space;
  space.executed = &base_.workload.snapshots.fused;
  space.steps = static_cast<std::uint32_t>(base_.scenario.steps);
  space.ranks = static_cast<std::uint32_t>(base_.scenario.ranks);
  space.first_link = trial_first_link(base_);
  if (!model_.faults.empty()) {
    const TrialGenerator check(model_, space);
    (void)check;
  }
}

bool Campaign::scores_perf() const {
  return std::any_of(model_.faults.begin(), model_.faults.end(), [](const FaultEntry& f) { return is_perf_kind(f.kind); });
}

json Campaign::identity() const {
  json faults = json::array();
  for (const auto& f : model_.faults) {
    json e = {{"kind", f.kind}, {"weight", f.weight}, {"ops", f.ops}, {"op_types", f.op_types}, {"tensor", f.tensors},
              {"steps", f.steps}, {"ranks", f.ranks}, {"targets", f.targets}, {"bits", f.bits}, {"flips", f.flips},
              {"cycle", f.live_cycles ? "live" : "any"}};
    e["element"] = f.element ? json(*f.element) : json("random");
    json choose = json::object();
    for (const auto& [k, vs] : f.choose) {
      json list = json::array();
      for (const auto& v : vs) list.push_back(inject::yaml_to_json(v));
      choose[k] = list;
    }
    e["choose"] = choose;
    e["set"] = f.set.IsDefined() ? inject::yaml_to_json(f.set) : json(nullptr);
    faults.push_back(e);
  }
  return {{"schema", "probelab.campaign-identity/1"},
          {"scenario", base_.scenario.name},
          {"scenario_file", base_.scenario.file.filename().string()},
          {"seed", seed_},
          {"sampling", model_.sampling},
          {"golden_runs", model_.golden_runs},
          {"envelope", {{"atol", model_.atol}, {"rtol", model_.rtol}}},
          {"sdc_tolerance", {{"max_ulp", model_.sdc_max_ulp}, {"rtol", model_.sdc_rtol}}},
          {"clean_runs", {{"runs", model_.clean.runs}, {"vary", model_.clean.vary}}},
          {"faults", faults}};
}

void Campaign::prepare_output_dir() const {
  check_output_dir(out_, "campaign output directory");
  std::error_code ec;
  for (const char* f : {"trials.jsonl", "campaign.json"}) {
    const fs::path p = out_ / f;
    if (fs::exists(p, ec) && !fs::is_regular_file(p, ec))
      throw ScenarioError(p.string(), 0, 0, "", "a regular file (or nothing) where the campaign keeps " + std::string(f),
                          "a directory or special file");
  }
  // Scratch of earlier runs whose process is gone (a live one may be another campaign's).
  auto sweep = [](const fs::path& dir) {
    std::error_code e;
    for (auto it = fs::directory_iterator(dir, e); !e && it != fs::directory_iterator(); it.increment(e)) {
      const std::string n = it->path().filename().string();
      if (n.rfind("work.", 0) != 0) continue;
      const std::string pid = n.substr(5);
      if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos) continue;
      if (!process_alive(std::stoi(pid))) {
        std::error_code rm;
        fs::remove_all(it->path(), rm);
      }
    }
  };
  sweep(out_);
  for (auto it = fs::directory_iterator(out_, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (it->path().filename().string().rfind("rank", 0) == 0 && it->is_directory()) sweep(it->path());
}

LoadedTrials Campaign::resume_trials(const json& id) const {
  const fs::path idf = out_ / "campaign.json", jsonl = out_ / "trials.jsonl";
  std::error_code ec;
  const bool have_id = fs::exists(idf, ec);
  if (have_id) {
    std::ifstream in(idf, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    json old;
    try {
      old = json::parse(ss.str());
    } catch (const std::exception& e) {
      throw ScenarioError(idf.string(), 0, 0, "",
                          "the campaign.json of an earlier run to --resume (it holds the identity --resume checks; "
                          "start afresh without --resume)",
                          fmt::format("an unreadable file ({})", e.what()));
    }
    if (old != id)
      throw ScenarioError(idf.string(), 0, 0, "",
                          "the same scenario, seed and fault model to --resume (start afresh without --resume)",
                          "a campaign with another identity");
  }
  LoadedTrials loaded;
  try {
    loaded = load_trials(jsonl);
  } catch (const std::system_error& e) {
    throw ScenarioError(jsonl.string(), 0, 0, "", "a readable trials.jsonl of an earlier run to --resume", e.what());
  }
  if (!have_id && !loaded.records.empty())
    throw ScenarioError(idf.string(), 0, 0, "",
                        "the campaign.json beside the trials to --resume (without it their identity cannot be "
                        "checked; start afresh without --resume)",
                        "no such file");
  return loaded;
}

Campaign::Shared Campaign::golden(double& wall_seconds) {
  Shared sh;
  sh.envelope = GoldenEnvelope(model_.atol, model_.rtol);
  const auto runs = static_cast<std::size_t>(model_.golden_runs);
  std::vector<fs::path> dirs;
  for (std::size_t k = 0; k < runs; ++k) dirs.push_back(out_ / "golden" / fmt::format("run-{}", k));
  ProcessPool pool(opts_.jobs);
  for (std::size_t k = 0; k < runs; ++k) {
    std::error_code ec;
    fs::remove_all(dirs[k], ec);
    pool.submit([this, k, dir = dirs[k]]() -> int {
      enter_worker(dir / "log.txt", kGoldenTimeoutSeconds);
      PreparedRun run = base_;
      run.scenario.seed += k;  // legitimate nondeterminism only: the data keep their own seed
      SimRequest req;
      req.run = &run;
      req.out_dir = dir;
      req.save_outputs = true;
      req.trace = k == 0;  // op timing: when a tensor is live (hbm flips)
      SiteCensus census(&run.workload.snapshots.fused);
      if (k == 0) req.observer = &census;  // the sites trials may draw
      json res;
      try {
        res = simulate(req);
      } catch (const std::exception& e) {
        res = {{"status", "error"}, {"error", e.what()}};
      }
      if (k == 0) write_text_atomic(dir / "census.json", census.to_json().dump());
      write_text_atomic(dir / "result.json", res.dump());
      return 0;
    });
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<ChildStatus> status(runs);
  pool.run([&](std::size_t k, const ChildStatus& st) { status[k] = st; });
  wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::vector<json> results;
  for (std::size_t k = 0; k < runs; ++k) {
    json r = read_json_or_null(dirs[k] / "result.json");
    if (r.is_null() || r.value("status", "") != "ok")
      throw std::runtime_error(fmt::format("fault-free run {} failed ({}): {}; see {}", k, status[k].describe(),
                                           r.is_null() ? std::string("no result") : r.value("error", std::string("?")),
                                           (dirs[k] / "log.txt").string()));
    sh.envelope.add_run(read_run_outputs(dirs[k]));
    results.push_back(std::move(r));
  }
  if (sh.envelope.tensors() == 0) throw std::runtime_error("the fault-free run fetched no output tensors to compare");
  for (std::size_t k = 0; k < runs; ++k) {
    TrialObservation o = observe(results[k], sh.envelope.check(read_run_outputs(dirs[k])));
    o.fired = false;
    sh.golden.push_back(std::move(o));
  }
  sh.cycle_span = std::max<std::uint64_t>(1, results[0]["cycles"].value("total", std::uint64_t{1}));
  sh.op_windows = kernel_windows(dirs[0] / "trace.json", static_cast<double>(base_.chip.clock_mhz));
  const json census = read_json_or_null(dirs[0] / "census.json");
  if (!census.is_object() || census.empty())
    throw std::runtime_error(fmt::format("the fault-free run recorded no injection sites ({})", (dirs[0] / "census.json").string()));
  sh.census = SiteCensus::from_json(census);
  return sh;
}

int Campaign::run_trial(const TrialSpec& t, const Shared& sh, const fs::path& work, const fs::path& scratch) const {
  enter_worker(trial_log(work, t.index), sh.timeout_s);
  PreparedRun run = base_;
  const std::string file = fmt::format("campaign trial {}", t.index);
  run.scenario.injections.push_back(
      {t.kind, t.descriptor, YamlView(t.descriptor, file, fmt::format("injections[{}]", run.scenario.injections.size()))});
  const fs::path dir = scratch / fmt::format("trial-{:06}", t.index);
  SimRequest req;
  req.run = &run;
  req.out_dir = dir;
  req.save_outputs = true;
  json res;
  try {
    res = simulate(req);
  } catch (const std::exception& e) {
    res = {{"status", "error"}, {"error", e.what()}};
  }
  OutputCheck check;
  if (res.value("status", "") == "ok") check = sh.envelope.check(read_run_outputs(dir));
  const TrialObservation obs = observe(res, check);
  write_text_atomic(dir / "observation.json", obs.to_json().dump());
  return 0;
}

namespace {

// What a campaign writes into its output directory (besides scratch).
constexpr const char* kCampaignFiles[] = {"trials.jsonl", "trials.csv", "summary.json", "summary.html", "summary.txt",
                                          "logs",         "golden",     "clean",        "campaign.json"};

// An earlier campaign's files in the output directory, set aside (not deleted) until this campaign
// has checked its trials: a campaign that stops on bad input before any trial ran puts them back
// and removes what it wrote itself (and the directory, when it created it); one that goes on
// deletes them (drop()).
class EarlierResults {
 public:
  EarlierResults(fs::path out, bool created) : out_(std::move(out)), created_(created) {
    stash_ = out_ / fmt::format(".earlier-{}", ::getpid());
    std::error_code ec;
    for (const char* f : kCampaignFiles) {
      if (!fs::exists(fs::symlink_status(out_ / f, ec))) continue;
      if (!fs::exists(stash_, ec)) fs::create_directory(stash_);
      fs::rename(out_ / f, stash_ / f);
    }
  }
  ~EarlierResults() {
    if (dropped_) return;
    std::error_code ec;
    for (const char* f : kCampaignFiles) {
      fs::remove_all(out_ / f, ec);
      if (fs::exists(fs::symlink_status(stash_ / f, ec))) fs::rename(stash_ / f, out_ / f, ec);
    }
    fs::remove_all(stash_, ec);
    if (created_ && fs::is_empty(out_, ec)) fs::remove(out_, ec);
  }
  EarlierResults(const EarlierResults&) = delete;
  EarlierResults& operator=(const EarlierResults&) = delete;
  void drop() {
    std::error_code ec;
    fs::remove_all(stash_, ec);
    dropped_ = true;
  }

 private:
  fs::path out_, stash_;
  bool created_ = false, dropped_ = false;
};

}  // namespace

json Campaign::run(CampaignComm& comm, const std::function<void(const CampaignProgress&)>& progress) {
  const bool root = comm.rank() == 0;
  const fs::path jsonl = out_ / "trials.jsonl";
  // Rank 0: the output directory, the resumed trials, the golden runs; then everyone gets them.
  std::vector<std::uint8_t> blob;
  LoadedTrials loaded;
  std::unique_ptr<EarlierResults> earlier;
  if (root) {
    std::error_code exists_ec;
    const bool created = !fs::exists(out_, exists_ec);
    prepare_output_dir();
    const json id = identity();
    if (opts_.resume) {
      loaded = resume_trials(id);
      // (stderr only: summary.json of a resumed campaign is the same as of an uninterrupted one)
      for (const auto& w : loaded.warnings(jsonl.string())) fmt::print(stderr, "probelab: warning: {}\n", w);
    } else {
      earlier = std::make_unique<EarlierResults>(out_, created);
    }
    write_text_atomic(out_ / "campaign.json", id.dump(2) + "\n");
    double wall = 0;
    Shared sh = golden(wall);
    const double timeout = std::max(model_.timeout_min_seconds, model_.timeout_factor * wall);
    json b = {{"envelope", json::binary(sh.envelope.to_cbor())}, {"cycle_span", sh.cycle_span},
              {"timeout_s", static_cast<unsigned>(std::ceil(timeout))}, {"done", json::array()}, {"golden", json::array()}};
    for (const auto& r : loaded.records) b["done"].push_back(r.index);
    for (const auto& g : sh.golden) b["golden"].push_back(g.to_json());
    b["op_windows"] = sh.op_windows;
    b["census"] = sh.census.to_json();
    blob = json::to_cbor(b);
  }
  blob = comm.broadcast(std::move(blob));
  Shared sh;
  {
    const json b = json::from_cbor(blob);
    sh.envelope = GoldenEnvelope::from_cbor(b["envelope"].get_binary());
    sh.cycle_span = b["cycle_span"].get<std::uint64_t>();
    sh.timeout_s = b["timeout_s"].get<unsigned>();
    for (const auto& i : b["done"]) sh.done.insert(i.get<std::uint64_t>());
    for (const auto& g : b["golden"]) sh.golden.push_back(TrialObservation::from_json(g));
    sh.op_windows = b["op_windows"].get<decltype(sh.op_windows)>();
    sh.census = SiteCensus::from_json(b["census"]);
  }

  std::vector<TrialSpec> mine;
  if (trials_ > 0) {
    const TrialGenerator gen(model_, {&base_.workload.snapshots.fused, static_cast<std::uint32_t>(base_.scenario.steps),
                                      static_cast<std::uint32_t>(base_.scenario.ranks), sh.cycle_span, sh.op_windows,
                                      &sh.census, trial_first_link(base_)});
    for (std::uint64_t i = static_cast<std::uint64_t>(comm.rank()); i < trials_; i += static_cast<std::uint64_t>(comm.size()))
      if (!sh.done.count(i)) mine.push_back(gen.trial(seed_, i));
  }
  // Every descriptor is checked by the injector registry before any worker starts.
  {
    inject::InjectionEnv env;
    env.executed = &base_.workload.snapshots.fused;
    env.ranks = static_cast<std::uint32_t>(base_.scenario.ranks);
    env.steps = static_cast<std::uint32_t>(base_.scenario.steps);
    env.seed = base_.scenario.seed;
    env.vector_lanes = base_.chip.vector_lanes();
    for (const auto& t : mine) {
      try {
        inject::InjectorRegistry::instance().create(t.descriptor, fmt::format("campaign trial {}", t.index), env);
      } catch (const inject::InjectorError& e) {
        throw ScenarioError(model_.faults[t.entry].where, 0, 0, "", "fault entries whose trials are valid descriptors",
                            e.what());
      }
    }
  }
  if (earlier) earlier->drop();

  // Each rank keeps its workers' scratch files apart (ranks may share the directory), and so does
  // each run (workers orphaned by a killed run may still be writing theirs).
  const fs::path work = comm.size() > 1 ? out_ / fmt::format("rank{}", comm.rank()) : out_;
  const fs::path scratch = work / fmt::format("work.{}", ::getpid());
  std::unique_ptr<TrialLog> log;
  CampaignProgress prog;
  prog.total = trials_;
  for (auto i : sh.done) prog.resumed += i < trials_ ? 1 : 0;
  prog.done = prog.resumed;
  if (root) log = std::make_unique<TrialLog>(jsonl, loaded.valid_bytes);
  auto take_remote = [&](bool wait) {
    for (const auto& line : comm.receive(wait)) {
      log->append_line(line);
      ++prog.done;
      const json j = json::parse(line);
      prog.last = fmt::format("trial {}: {}", j["index"].get<std::uint64_t>(), j["outcome"].get<std::string>());
      if (progress) progress(prog);
    }
  };

  ProcessPool pool(opts_.jobs);
  pool.set_interrupt_cleanup([scratch] {  // trials.jsonl keeps what finished: --resume goes on
    std::error_code ec;
    fs::remove_all(scratch, ec);
  });
  for (const auto& t : mine) pool.submit([this, &t, &sh, work, scratch]() { return run_trial(t, sh, work, scratch); });
  pool.run([&](std::size_t k, const ChildStatus& st) {
    const TrialSpec& t = mine[k];
    const fs::path dir = scratch / fmt::format("trial-{:06}", t.index);
    const json oj = read_json_or_null(dir / "observation.json");
    TrialObservation obs;
    if (oj.is_null()) {
      obs.status = status_of(st);
      obs.error = fmt::format("the worker ended without a result ({})", st.describe());
    } else {
      obs = TrialObservation::from_json(oj);
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (obs.status == "ok") fs::remove(trial_log(work, t.index), ec);
    const TrialRecord rec = make_record(t, std::move(obs), {model_.sdc_max_ulp, model_.sdc_rtol});
    if (root) {
      log->append(rec);
      ++prog.done;
      prog.last = fmt::format("trial {}: {}", rec.index, outcome_name(rec.outcome));
      if (progress) progress(prog);
      take_remote(false);
    } else {
      comm.send(rec.to_json().dump());
    }
  });
  std::error_code ec;
  fs::remove_all(scratch, ec);
  if (!root) {
    comm.finish();
    return nullptr;
  }
  take_remote(true);
  log.reset();
  const std::vector<CleanRun> clean = clean_runs(std::max(sh.timeout_s * 4, 600u));

  LoadedTrials all = load_trials(jsonl);
  // The log holds the trials in the order they finished, which depends on --jobs and the ranks;
  // once every trial is in, it is rewritten in trial order, so the file is the same however the
  // trials ran.
  std::sort(all.records.begin(), all.records.end(),
            [](const TrialRecord& a, const TrialRecord& b) { return a.index < b.index; });
  std::string lines;
  for (const TrialRecord& r : all.records) lines += r.to_json().dump() + "\n";
  write_text_atomic(jsonl, lines);
  std::erase_if(all.records, [&](const TrialRecord& r) { return r.index >= trials_; });
  CampaignInfo info;
  info.scenario = base_.scenario.name;
  info.seed = seed_;
  info.trials = trials_;
  info.sampling = model_.sampling;
  info.golden = sh.golden;
  info.golden_deterministic = sh.envelope.deterministic();
  info.clean = clean;
  info.sdc_max_ulp = model_.sdc_max_ulp;
  info.sdc_rtol = model_.sdc_rtol;
  info.perf = scores_perf();
  json summary = campaign_summary(info, all.records);
  write_text_atomic(out_ / "trials.csv", trials_csv(all.records));
  write_text_atomic(out_ / "summary.html", campaign_summary_html(summary));
  write_text_atomic(out_ / "summary.json", summary.dump(2) + "\n");
  write_text_atomic(out_ / "summary.txt", campaign_summary_text(summary));
  return summary;
}

}  // namespace probelab::sim
