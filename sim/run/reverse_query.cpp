// Reverse queries on a finished run (reverse_query.h).
#include "sim/run/reverse_query.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "graph/format.h"
#include "graph/npy.h"
#include "probes/dump_writer.h"
#include "probes/anomaly.h"
#include "sim/run/checkpoint_store.h"
#include "sim/run/runner.h"
#include "sim/scenario/prepared_run.h"
#include "sim/scenario/scenario_error.h"

namespace probelab::sim {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr std::string_view kUpdated = "/updated";

struct Ctx {
  fs::path run, ckpt, out;
  Scenario scenario;
  const QueryOptions* opts = nullptr;
  std::function<void(const std::string&)> progress;
  std::size_t simulations = 0, steps_simulated = 0;
  json runs = json::array();
};

std::vector<std::int64_t> coordinate(const graph::Shape& shape, std::uint64_t e) {
  std::vector<std::int64_t> c(shape.size());
  for (std::size_t i = shape.size(); i-- > 0;) {
    c[i] = static_cast<std::int64_t>(e % static_cast<std::uint64_t>(shape[i]));
    e /= static_cast<std::uint64_t>(shape[i]);
  }
  return c;
}

bool holds(double v, const QueryOptions& o) {
  return o.kind == "nonfinite" ? !std::isfinite(v) : std::fabs(v) > o.threshold || std::isinf(v);
}

/// First element of `t` the query's predicate holds for.
std::optional<std::uint64_t> first_element(const graph::Tensor& t, const QueryOptions& o) {
  const std::vector<double> v = graph::to_logical(t).to_f64();
  for (std::size_t i = 0; i < v.size(); ++i)
    if (holds(v[i], o)) return i;
  return std::nullopt;
}

/// Re-executes steps from..to of the run with `probes` (nothing else captured), into <out>/<name>.
json reexecute(Ctx& c, const std::string& name, std::uint32_t from, std::uint32_t to, const YAML::Node& probes) {
  Scenario p = c.scenario;
  p.name = name;
  limit_steps(p, static_cast<int>(to) + 1);
  p.checkpoint_every = 0;
  p.expectations.clear();
  p.variants.clear();
  p.campaign.reset();
  p.rewind_pass = true;
  p.resume.reset();
  if (from > 0) p.resume = Scenario::Resume{from, c.ckpt};
  p.probes = probes;
  p.probes_source.reset();
  RunOptions ro;
  ro.out_root = c.out;
  ro.jobs = c.opts->jobs;
  ro.baseline = false;
  ro.trace = false;
  Runner runner(ro);
  runner.add(p);
  json rep = runner.run(c.progress).at(0).report;
  if (rep.value("status", "") != "ok")
    throw std::runtime_error(fmt::format("query: the re-execution {} failed: {}", name, rep.value("error", std::string("?"))));
  ++c.simulations;
  std::size_t ran = 0;  // steps actually run (a stop condition ends the run early)
  if (rep["cycles"].contains("per_step") && !rep["cycles"]["per_step"].empty()) ran = rep["cycles"]["per_step"][0].size();
  c.steps_simulated += ran;
  c.runs.push_back({{"dir", name}, {"from_step", from}, {"to_step", to}, {"steps_run", ran}});
  return rep;
}

/// The last checkpoint at or before `step` (0 when none: the run's start).
std::uint32_t checkpoint_at_or_before(const Ctx& c, std::uint32_t step) {
  std::uint32_t k = 0;
  for (std::uint32_t s : checkpoint_steps(c.ckpt, c.opts->rank))
    if (s <= step) k = s;
  return k;
}

/// A watch point on `tensor` at edges `edges` ([output], [input], or both) for `steps` "a-b".
YAML::Node watch(const std::string& tensor, const std::vector<std::string>& edges, const std::string& steps,
                 const std::string& mode, const std::string& when = "") {
  YAML::Node p;
  p["mode"] = mode;
  YAML::Node wp;
  wp["name"] = "query";
  wp["match"].push_back(tensor);
  for (const auto& e : edges) wp["data_mode"].push_back(e);
  wp["steps"].push_back(steps);
  wp["mode"] = mode;
  if (!when.empty()) {
    YAML::Node cond;
    cond["when"] = when;
    cond["actions"].push_back("stop");
    wp["conditions"].push_back(cond);
  }
  p["watch_points"].push_back(wp);
  return p;
}

/// Dump entries of `tensor` in re-execution `name`, rank r: (entry, manifest dir, manifest).
struct Dumped {
  json entry;
  fs::path dir;
  json manifest;
};
std::vector<Dumped> dumps_of(const Ctx& c, const std::string& name, const std::string& tensor) {
  std::vector<Dumped> out;
  const fs::path dir = c.out / name / "dump" / fmt::format("rank{}", c.opts->rank);
  std::ifstream in(dir / "dump.json");
  if (!in) return out;
  const json m = json::parse(in);
  for (const json& e : m.at("entries"))
    if (e.value("tensor", "") == tensor && e.contains("file")) out.push_back({e, dir, m});
  return out;
}

double element_value(const Dumped& d, std::uint64_t element) {
  const graph::Tensor t = probes::load_dump(d.dir, d.manifest, d.entry);
  const std::vector<double> v = graph::to_logical(t).to_f64();
  return element < v.size() ? v[element] : std::nan("");
}

/// nonfinite / exceeds.
json first_step_query(Ctx& c, const graph::Graph& g) {
  const QueryOptions& o = *c.opts;
  const std::string& t = o.tensor;
  const auto steps = static_cast<std::uint32_t>(c.scenario.steps);
  json search = json::object();
  // The tensor whose writes are probed, and the bounds of the search.
  std::string probed = t;
  std::string writer;
  std::uint32_t lo = 0, hi = steps - 1;  // the step is in [lo, hi]
  const bool state = g.initializers().count(t) > 0;
  if (state) {
    const std::string upd = t + std::string(kUpdated);
    const graph::Op* w = g.find_tensor(upd) ? g.producer(upd) : nullptr;
    std::vector<std::uint32_t> ks = checkpoint_steps(c.ckpt, o.rank);
    auto at = [&](std::uint32_t k) {
      const auto state_k = read_checkpoint(c.ckpt, o.rank, k);
      auto it = state_k.find(t);
      return it == state_k.end() ? std::optional<std::uint64_t>() : first_element(it->second, o);
    };
    std::size_t reads = 0;
    std::optional<std::size_t> first;  // index into ks of the first checkpoint where it holds
    if (o.kind == "nonfinite") {  // bisection: non-finite state stays non-finite
      std::size_t a = 0, b = ks.size();
      while (a < b) {
        const std::size_t mid = (a + b) / 2;
        ++reads;
        if (at(ks[mid])) b = mid;
        else a = mid + 1;
      }
      if (a < ks.size()) first = a;
    } else {
      for (std::size_t i = 0; i < ks.size() && !first; ++i) {
        ++reads;
        if (at(ks[i])) first = i;
      }
    }
    search["checkpoints_read"] = reads;
    search["method"] = o.kind == "nonfinite" ? "bisection over the checkpoints" : "scan over the checkpoints";
    if (first && *first == 0 && ks[0] == 0) {
      const auto e = *at(0);
      const auto ck = read_checkpoint(c.ckpt, o.rank, 0);
      const graph::Tensor& v = ck.at(t);
      return {{"found", true}, {"step", 0}, {"written_by", "host (initial value)"}, {"element", e},
              {"coordinate", coordinate(v.shape(), e)}, {"value", probes::json_number(graph::to_logical(v).to_f64()[e])},
              {"search", search}};
    }
    if (!w) search["note"] = fmt::format("{} is never updated: only the checkpoints are searched", t);
    if (first) {
      hi = ks[*first] - 1;
      lo = *first > 0 ? ks[*first - 1] : 0;
    } else if (!ks.empty()) {
      lo = ks.back();
    }
    if (!w) {
      if (!first) return {{"found", false}, {"search", search}};
      lo = 0;
    }
    if (w) {
      probed = upd;
      writer = w->name;
    }
    // One checkpoint interval of one step: the checkpoint after it holds the written value.
    if (first && w && hi == lo) {
      const auto ck = read_checkpoint(c.ckpt, o.rank, ks[*first]);
      const graph::Tensor& v = ck.at(t);
      const auto e = *first_element(v, o);
      search["simulations"] = 0;
      return {{"found", true}, {"step", lo}, {"written_by", writer}, {"element", e},
              {"coordinate", coordinate(v.shape(), e)}, {"value", probes::json_number(graph::to_logical(v).to_f64()[e])},
              {"note", fmt::format("written by {} at step {}: the checkpoint of step {} holds it", writer, lo, lo + 1)},
              {"search", search}};
    }
  } else if (const graph::Op* p = g.producer(t)) {
    writer = p->name;
  } else {
    writer = "host (fed input)";
  }
  search["interval"] = {lo, hi};
  const bool produced = g.producer(probed) != nullptr;
  const std::vector<std::string> edge = {produced ? "output" : "input"};
  const std::string when = o.kind == "nonfinite" ? "nan_count + inf_count > 0" : fmt::format("max_abs > {:.17g}", o.threshold);
  const std::uint32_t from = checkpoint_at_or_before(c, lo);
  const json scan = reexecute(c, "scan", from, hi, watch(probed, edge, fmt::format("{}-{}", lo, hi), "statistics", when));
  std::optional<std::uint32_t> step;
  json stats;
  for (const json& a : scan.value("anomalies", json::array()))
    if (a.value("kind", "") == "condition" && a.value("watch_point", "") == "query" &&
        (!step || a.value("step", 0u) < *step)) {
      step = a.value("step", 0u);
      if (writer.empty() || writer.rfind("host", 0) == 0) writer = produced ? a.value("op", "") : writer;
    }
  search["method"] = search.value("method", std::string("re-execution")) +
                     fmt::format(", then steps {}..{} re-executed with a statistics probe on {} and a stop condition",
                                 from, hi, probed);
  if (!step) return {{"found", false}, {"search", search}};
  // The element: the step alone, with a full capture.
  const json full = reexecute(c, "element", checkpoint_at_or_before(c, *step), *step,
                              watch(probed, edge, fmt::format("{}-{}", *step, *step), "full"));
  (void)full;
  json ans = {{"found", true}, {"step", *step}, {"written_by", writer}, {"search", search}};
  for (const Dumped& d : dumps_of(c, "element", probed)) {
    if (d.entry.value("step", 0u) != *step) continue;
    const graph::Tensor v = probes::load_dump(d.dir, d.manifest, d.entry);
    if (auto e = first_element(v, o)) {
      ans["element"] = *e;
      ans["coordinate"] = coordinate(v.shape(), *e);
      ans["value"] = probes::json_number(graph::to_logical(v).to_f64()[*e]);
      ans["tensor_probed"] = probed;
      if (d.entry.contains("statistics")) ans["statistics"] = d.entry["statistics"];
      break;
    }
  }
  return ans;
}

/// writer TENSOR ELEMENT [--step S].
json writer_query(Ctx& c, const graph::Graph& g) {
  const QueryOptions& o = *c.opts;
  const std::string& t = o.tensor;
  const auto steps = static_cast<std::uint32_t>(c.scenario.steps);
  const std::uint32_t s = o.step.value_or(steps - 1);
  if (s >= steps)
    throw ScenarioError(c.run.string(), 0, 0, "--step", fmt::format("a step of the run (0..{})", steps - 1), std::to_string(s));
  const graph::TensorDesc& d = g.tensor(t).desc;
  if (o.element >= static_cast<std::uint64_t>(graph::numel(d.shape)))
    throw ScenarioError(c.run.string(), 0, 0, "ELEMENT",
                        fmt::format("an element of {} (shape {}, {} elements)", t, graph::shape_str(d.shape), graph::numel(d.shape)),
                        std::to_string(o.element));
  json ans = {{"step", s}, {"element", o.element}, {"coordinate", coordinate(d.shape, o.element)}};
  const std::string upd = t + std::string(kUpdated);
  const graph::Op* update = g.initializers().count(t) && g.find_tensor(upd) ? g.producer(upd) : nullptr;
  const graph::Op* producer = g.producer(t);
  // What to capture: the write (writer's output at s) and the value before it, and the readers of
  // the written value (same step for activations; the next step for in-place state).
  std::uint32_t from_step = s, to_step = s;
  YAML::Node probes;
  std::string written_tensor = t;
  if (update) {
    ans["writer"] = {{"op", update->name}, {"type", update->type}, {"kind", "in-place update"}};
    written_tensor = upd;
    to_step = std::min(s + 1, steps - 1);
  } else if (producer) {
    ans["writer"] = {{"op", producer->name}, {"type", producer->type}, {"kind", "op"}};
    from_step = s > 0 ? s - 1 : 0;
  } else {
    ans["writer"] = {{"op", nullptr}, {"kind", g.initializers().count(t) ? "host (initial value)" : "host (fed input)"}};
    from_step = s > 0 && !g.initializers().count(t) ? s - 1 : s;
  }
  probes = watch(t, {"input", "output"}, fmt::format("{}-{}", from_step, to_step), "full");
  if (update) probes["watch_points"][0]["match"].push_back(upd);
  reexecute(c, "writer", checkpoint_at_or_before(c, from_step), to_step, probes);
  json before = nullptr, after = nullptr;
  json readers = json::array();
  bool changed = false;
  for (const Dumped& dd : dumps_of(c, "writer", t)) {
    const json& e = dd.entry;
    const std::uint32_t st = e.value("step", 0u);
    const bool is_out = e.value("edge", "").rfind("out", 0) == 0;
    const double v = element_value(dd, o.element);
    if (update) {
      if (!is_out && st == s && e.value("op", "") == update->name) before = probes::json_number(v);
      if (!is_out && st == s + 1 && s + 1 < steps) readers.push_back({{"op", e["op"]}, {"step", st}, {"saw", probes::json_number(v)}});
    } else if (producer) {
      if (is_out && st == s) after = probes::json_number(v);
      if (is_out && s > 0 && st == s - 1) before = probes::json_number(v);
      if (!is_out && st == s) readers.push_back({{"op", e["op"]}, {"step", st}, {"saw", probes::json_number(v)}});
    } else {
      if (!is_out && st == s) {
        readers.push_back({{"op", e["op"]}, {"step", st}, {"saw", probes::json_number(v)}});
        if (after.is_null()) after = probes::json_number(v);
      }
      if (!is_out && s > 0 && st == s - 1 && before.is_null()) before = probes::json_number(v);
    }
  }
  if (update)
    for (const Dumped& dd : dumps_of(c, "writer", upd))
      if (dd.entry.value("step", 0u) == s && dd.entry.value("edge", "").rfind("out", 0) == 0)
        after = probes::json_number(element_value(dd, o.element));
  for (auto& r : readers) {
    r["same"] = r["saw"] == after;
    changed = changed || !r["same"].get<bool>();
  }
  ans["before"] = before;
  ans["after"] = after;
  ans["readers"] = readers;
  ans["changed_in_memory"] = changed && (producer || update);
  if (changed && (producer || update))
    ans["note"] = "a reader saw another value than the writer wrote: the element changed in memory in between (no op wrote it)";
  ans["found"] = true;
  return ans;
}

}  // namespace

QueryResult reverse_query(const fs::path& run, const QueryOptions& opts,
                          const std::function<void(const std::string&)>& progress) {
  if (!fs::exists(run / "report.json"))
    throw ScenarioError(run.string(), 0, 0, "RUN", "an output directory of probelab run (report.json)", run.string());
  Ctx c;
  c.run = run;
  c.ckpt = run / "checkpoints";
  c.opts = &opts;
  c.progress = progress;
  c.out = opts.out.empty() ? run / "query" : opts.out;
  c.scenario = read_checkpoint_scenario(c.ckpt, LoadOptions{});
  if (opts.kind != "nonfinite" && opts.kind != "exceeds" && opts.kind != "writer")
    throw ScenarioError("query", 0, 0, "QUERY", "nonfinite, exceeds or writer", "'" + opts.kind + "'");
  if (opts.rank >= static_cast<std::uint32_t>(c.scenario.ranks))
    throw ScenarioError(run.string(), 0, 0, "--rank", fmt::format("a rank of the run (0..{})", c.scenario.ranks - 1),
                        std::to_string(opts.rank));
  if (opts.kind == "exceeds" && !(opts.threshold >= 0))
    throw ScenarioError("query", 0, 0, "X", "a threshold >= 0 (max |x| is compared with it)", fmt::format("{}", opts.threshold));
  {  // only the steps the run executed (a stop or rewind action may have ended it early)
    std::ifstream in(run / "report.json");
    const json rep = json::parse(in, nullptr, false);
    if (rep.is_object() && rep.contains("cycles") && rep["cycles"].contains("per_step") && rep["cycles"]["per_step"].is_array() &&
        opts.rank < rep["cycles"]["per_step"].size()) {
      const auto ran = static_cast<int>(rep["cycles"]["per_step"][opts.rank].size());
      if (ran > 0 && ran < c.scenario.steps) limit_steps(c.scenario, ran);
    }
  }
  const PreparedRun prepared = prepare_run(c.scenario);
  const graph::Graph& g = prepared.workload.snapshots.fused;
  if (!g.find_tensor(opts.tensor)) {
    std::vector<std::string> near;
    const std::string head = opts.tensor.substr(0, opts.tensor.find('/'));
    for (const auto& [name, info] : g.tensors())
      if (name.rfind(head, 0) == 0 && near.size() < 6) near.push_back(name);
    throw ScenarioError(run.string(), 0, 0, "TENSOR",
                        near.empty() ? std::string("a tensor of the executed graph (probelab show lists them)")
                                     : fmt::format("a tensor of the executed graph, e.g. {}", fmt::join(near, ", ")),
                        "'" + opts.tensor + "'");
  }
  check_output_dir(c.out, "query output directory", false);  // made once the question is known to be good
  json ans = opts.kind == "writer" ? writer_query(c, g) : first_step_query(c, g);
  json head = {{"run", run.string()}, {"query", opts.kind}, {"tensor", opts.tensor}, {"rank", opts.rank}};
  if (opts.kind == "exceeds") head["threshold"] = opts.threshold;
  for (auto& [k, v] : head.items()) ans[k] = v;
  if (!ans.contains("search")) ans["search"] = json::object();
  ans["search"]["simulations"] = c.simulations;
  ans["search"]["steps_simulated"] = c.steps_simulated;
  ans["search"]["runs"] = c.runs;
  ans["search"]["run_steps"] = c.scenario.steps;
  QueryResult r;
  r.found = ans.value("found", false);
  r.answer = ans;
  check_output_dir(c.out, "query output directory");
  write_text_atomic(c.out / "query.json", ans.dump(2) + "\n");
  return r;
}

}  // namespace probelab::sim
