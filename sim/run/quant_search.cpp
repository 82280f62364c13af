// Quantization sensitivity search (quant_search.h).
#include "sim/run/quant_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <stdexcept>

#include "graph/npy.h"
#include "probes/compare.h"
#include "probes/dump_writer.h"
#include "sim/run/runner.h"
#include "sim/scenario/prepared_run.h"
#include "sim/scenario/scenario_error.h"

namespace probelab::sim {
namespace fs = std::filesystem;
using json = nlohmann::json;

QuantTarget parse_quant_target(const std::string& text, const std::string& where) {
  static const std::regex re(R"(^\s*(cosine|sqnr|max_rel|loss_delta)\s*(>=|<=)\s*([-+0-9.eE]+)\s*$)");
  std::smatch m;
  if (!std::regex_match(text, m, re))
    throw ScenarioError(where, 0, 0, "target", "cosine>=X, sqnr>=X (dB), max_rel<=X or loss_delta<=X", "'" + text + "'");
  QuantTarget t;
  t.metric = m[1];
  t.at_least = m[2] == ">=";
  t.text = text;
  try {
    t.value = std::stod(m[3]);
  } catch (const std::exception&) {
    throw ScenarioError(where, 0, 0, "target", "a number after the comparison", "'" + text + "'");
  }
  const bool upper = t.metric == "max_rel" || t.metric == "loss_delta";
  if (t.at_least == upper)
    throw ScenarioError(where, 0, 0, "target", upper ? t.metric + "<=X" : t.metric + ">=X", "'" + text + "'");
  if (!std::isfinite(t.value) || (upper && t.value < 0))
    throw ScenarioError(where, 0, 0, "target", "a finite bound (>= 0 for " + t.metric + ")", "'" + text + "'");
  if (t.metric == "cosine" && (t.value < -1 || t.value > 1))  // a cosine above 1 can never be met
    throw ScenarioError(where, 0, 0, "target", "a cosine bound from -1 to 1", "'" + text + "'");
  return t;
}

double ErrorStats::metric(const std::string& name) const {
  if (name == "cosine") return cosine;
  if (name == "sqnr") return sqnr_db;
  if (name == "loss_delta") return loss_delta.value_or(std::numeric_limits<double>::quiet_NaN());
  return max_rel;
}
bool ErrorStats::meets(const QuantTarget& t) const {
  const double v = metric(t.metric);
  return t.at_least ? v >= t.value : v <= t.value;
}
json ErrorStats::to_json() const {
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json(v > 0 ? "inf" : "-inf"); };
  json j = {{"cosine", num(cosine)}, {"sqnr_db", num(sqnr_db)}, {"max_rel", num(max_rel)}, {"max_abs", num(max_abs)}};
  if (loss_delta) j["loss_delta"] = num(*loss_delta);
  return j;
}

ErrorStats error_stats(std::span<const float> actual, std::span<const float> reference) {
  if (actual.size() != reference.size())
    throw std::runtime_error(fmt::format("quantize: output sizes differ ({} vs {})", actual.size(), reference.size()));
  std::vector<double> a(actual.begin(), actual.end()), r(reference.begin(), reference.end());
  const probes::Metrics m = probes::compute_metrics(a, r, graph::DType::F32);
  ErrorStats e;
  e.cosine = m.cosine;
  e.max_abs = m.max_abs_err;
  double sig = 0, noise = 0, rmax = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    sig += r[i] * r[i];
    noise += (a[i] - r[i]) * (a[i] - r[i]);
    rmax = std::max(rmax, std::fabs(r[i]));
  }
  e.sqnr_db = noise == 0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(sig / noise);
  e.max_rel = rmax == 0 ? (e.max_abs == 0 ? 0.0 : std::numeric_limits<double>::infinity()) : e.max_abs / rmax;
  return e;
}

namespace {

struct Evaluation {
  std::string tag;
  std::optional<std::vector<std::string>> keep;  // nullopt: no quantization
  bool capture = false;
};

// The run's fetched outputs (rank 0), concatenated in file-name order.
std::vector<float> read_outputs(const fs::path& run_dir) {
  const fs::path dir = run_dir / "outputs" / "rank0";
  if (!fs::is_directory(dir)) throw std::runtime_error(fmt::format("quantize: {} holds no outputs", run_dir.string()));
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".npy") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<float> v;
  for (const auto& f : files) {
    const std::vector<float> t = graph::read_npy(f.string()).to_f32();
    v.insert(v.end(), t.begin(), t.end());
  }
  return v;
}

// report.json `losses` of a run ([[loss per step] per rank]; null in inference).
json read_losses(const fs::path& run_dir) {
  std::ifstream in(run_dir / "report.json");
  if (!in) throw std::runtime_error(fmt::format("quantize: {} holds no report.json", run_dir.string()));
  const json r = json::parse(in);
  return r.contains("losses") ? r["losses"] : json(nullptr);
}

// The largest |loss - reference loss| over every step and rank (a non-finite loss: infinity).
std::optional<double> loss_delta(const json& losses, const json& ref) {
  if (!losses.is_array() || !ref.is_array()) return std::nullopt;
  double worst = 0;
  for (std::size_t r = 0; r < losses.size() && r < ref.size(); ++r)
    for (std::size_t k = 0; k < losses[r].size() && k < ref[r].size(); ++k) {
      if (!losses[r][k].is_number() || !ref[r][k].is_number()) return std::numeric_limits<double>::infinity();
      const double d = std::fabs(losses[r][k].get<double>() - ref[r][k].get<double>());
      worst = std::isfinite(d) ? std::max(worst, d) : std::numeric_limits<double>::infinity();
    }
  return worst;
}

// Output captures of the last step per op: op name -> values.
std::map<std::string, std::vector<float>> read_captures(const fs::path& run_dir) {
  std::map<std::string, std::vector<float>> out;
  const fs::path dir = run_dir / "dump" / "rank0";
  std::ifstream in(dir / "dump.json");
  if (!in) return out;
  const json manifest = json::parse(in);
  std::map<std::string, std::uint32_t> step_of;
  for (const json& e : manifest.at("entries")) {
    if (e.value("edge", "") != "out0") continue;
    const std::string op = e.at("op");
    const std::uint32_t step = e.value("step", 0u);
    if (step_of.count(op) && step_of[op] > step) continue;
    step_of[op] = step;
    out[op] = probes::load_dump(dir, manifest, e).to_f32();
  }
  return out;
}

}  // namespace

QuantSearchResult quantize_search(const fs::path& file, const QuantSearchOptions& opts,
                                  const std::function<void(const std::string&)>& progress) {
  const Scenario base = load_scenario(file, opts.load);
  if (!base.quantization)
    throw ScenarioError(file.string(), 0, 0, "quantization",
                        "a quantization: section (which ops to quantize and how) for probelab quantize");
  const QuantizationSpec& q = *base.quantization;
  QuantTarget target;
  if (opts.target) target = *opts.target;
  else if (!q.search_target.empty()) target = parse_quant_target(q.search_target, file.string() + ": quantization.search");
  else
    throw ScenarioError(file.string(), 0, 0, "quantization.search.target", "a target here or --target (e.g. cosine>=0.999)");

  if (target.metric == "loss_delta" && base.mode != RunMode::Training)
    throw ScenarioError(file.string(), 0, 0, opts.target ? "--target" : "quantization.search.target",
                        "a loss_delta target on a training scenario (mode: training): inference has no loss",
                        "'" + target.text + "'");
  const PreparedRun prepared = prepare_run(base);  // validates everything before a run starts
  if (target.metric == "cosine") {
    // The outputs compared are the model's outputs: a cosine over one number (a scalar loss)
    // is 1 whenever the signs agree, so any quantization would meet it.
    std::int64_t elements = 0;
    const graph::Graph& ref = prepared.workload.reference;
    for (const std::string& o : ref.outputs())
      if (o != prepared.workload.loss) elements += graph::numel(ref.tensor(o).desc.shape);
    if (elements < 2)
      throw ScenarioError(file.string(), 0, 0, opts.target ? "--target" : "quantization.search.target",
                          "sqnr, max_rel or loss_delta: the model's only output is one number, whose cosine is 1 "
                          "whenever the signs agree",
                          "'" + target.text + "'");
  }
  std::vector<std::string> candidates;
  for (const std::string& op : quantizable_ops(q, prepared.workload.snapshots.fused))
    if (prepared.quantization.count(op)) candidates.push_back(op);
  // The executed op holding each candidate (a fused op holds its inner ops' outputs).
  std::map<std::string, std::string> executed_of;
  for (const graph::Op& op : prepared.workload.snapshots.fused.ops()) {
    executed_of[op.name] = op.name;
    for (const graph::Op& inner : op.fused_body) executed_of[inner.name] = op.name;
  }
  std::set<std::string> capture_ops;
  for (const auto& c : candidates) capture_ops.insert(executed_of.at(c));

  QuantSearchResult res;
  res.out_dir = opts.out_root / base.name;
  const fs::path runs_root = res.out_dir / "runs";
  std::size_t evaluations = 0;

  auto scenario_for = [&](const Evaluation& ev) {
    Scenario s = base;
    s.name = ev.tag;
    s.variants.clear();
    s.expectations.clear();
    s.campaign.reset();
    s.injections = base.injections;
    if (ev.keep) {
      std::vector<std::string> keep = q.keep;
      keep.insert(keep.end(), ev.keep->begin(), ev.keep->end());
      s.quantization->keep = keep;
    } else {
      s.quantization.reset();
    }
    if (ev.capture) {
      YAML::Node p;
      p["mode"] = "full";
      for (const auto& op : capture_ops) p["watch_points"].push_back(op);
      p["data_mode"].push_back("output");
      s.probes = p;
    } else {
      s.probes = YAML::Node();
    }
    s.probes_source.reset();
    return s;
  };
  auto run_all = [&](const std::vector<Evaluation>& evs) {
    RunOptions ro;
    ro.out_root = runs_root;
    ro.load = opts.load;
    ro.jobs = opts.jobs;
    ro.baseline = false;
    ro.trace = false;
    Runner runner(ro);
    for (const auto& ev : evs) runner.add(scenario_for(ev));
    const std::vector<ScenarioOutcome> outs = runner.run(progress);
    for (const auto& o : outs)
      if (o.report.value("status", "ok") == "error" || o.report.contains("error"))
        throw std::runtime_error(fmt::format("quantize: run {} failed: {}", o.name, o.report.dump()));
    evaluations += evs.size();
    return outs;
  };

  // Round 1: reference, all quantized, each layer alone.
  std::vector<Evaluation> round1{{"reference", std::nullopt, true}, {"all", std::vector<std::string>{}, true}};
  for (const auto& c : candidates) {
    std::vector<std::string> others;
    for (const auto& o : candidates)
      if (o != c) others.push_back(o);
    round1.push_back({"only." + c, others, false});
  }
  for (auto& ev : round1) std::replace(ev.tag.begin(), ev.tag.end(), '/', '.');
  run_all(round1);
  const std::vector<float> ref = read_outputs(runs_root / "reference");
  const json ref_losses = read_losses(runs_root / "reference");
  auto output_error = [&](const std::string& tag) {
    ErrorStats e = error_stats(read_outputs(runs_root / tag), ref);
    e.loss_delta = loss_delta(read_losses(runs_root / tag), ref_losses);
    return e;
  };

  const auto ref_caps = read_captures(runs_root / "reference");
  const auto all_caps = read_captures(runs_root / "all");
  json layers = json::array();
  std::vector<std::pair<double, std::size_t>> order;  // (badness, candidate index)
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const std::string& c = candidates[i];
    json l{{"op", c}};
    const std::string ex = executed_of.at(c);
    if (ref_caps.count(ex) && all_caps.count(ex)) l["error"] = error_stats(all_caps.at(ex), ref_caps.at(ex)).to_json();
    if (ex != c) l["measured_at"] = ex;
    const ErrorStats alone = output_error(round1[i + 2].tag);
    l["alone"] = alone.to_json();
    const double v = alone.metric(target.metric);
    order.emplace_back(target.at_least ? -v : v, i);  // larger badness first
    layers.push_back(std::move(l));
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  json ranking = json::array();
  for (const auto& [bad, i] : order) ranking.push_back(candidates[i]);

  // Greedy: keep layers in decreasing sensitivity until the output meets the target.
  json steps = json::array();
  std::vector<std::string> keep;
  ErrorStats cur = output_error("all");
  steps.push_back({{"keep", keep}, {"output", cur.to_json()}, {"meets", cur.meets(target)}});
  for (std::size_t k = 0; k < order.size() && !cur.meets(target); ++k) {
    keep.push_back(candidates[order[k].second]);
    std::string tag = "keep." + std::to_string(keep.size());
    run_all({{tag, keep, false}});
    cur = output_error(tag);
    steps.push_back({{"keep", keep}, {"output", cur.to_json()}, {"meets", cur.meets(target)}});
  }
  res.target_met = cur.meets(target);
  json expectation = nullptr;
  if (q.expect_keep) {
    std::vector<std::string> want = *q.expect_keep, got = keep;
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    res.expectation_met = want == got;
    expectation = {{"expect_keep", *q.expect_keep}, {"passed", res.expectation_met}};
  }
  res.report = {{"scenario", base.name},
                {"file", file.string()},
                {"target", target.text},
                {"candidates", candidates},
                {"layers", layers},
                {"sensitivity_order", ranking},
                {"search", steps},
                {"keep", keep},
                {"output", cur.to_json()},
                {"target_met", res.target_met},
                {"expectation", expectation},
                {"evaluations", evaluations}};
  fs::create_directories(res.out_dir);
  write_text_atomic(res.out_dir / "quantize.json", res.report.dump(2) + "\n");
  return res;
}

}  // namespace probelab::sim
