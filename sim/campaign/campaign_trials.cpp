#include "sim/campaign/campaign_trials.h"

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>

#include <fmt/format.h>

#include "injectors/injector.h"
#include "sim/scenario/injections.h"
#include "sim/scenario/scenario_error.h"

namespace probelab::sim {

namespace {

bool is_value_kind(const std::string& k) { return k == "nan" || k == "inf" || k == "value"; }

std::uint64_t draw(std::mt19937_64& g, std::uint64_t n) { return n == 0 ? 0 : g() % n; }

template <class T>
const T& pick(std::mt19937_64& g, const std::vector<T>& v) {
  return v[draw(g, v.size())];
}

std::set<std::string> kind_params(const std::string& kind) {
  std::set<std::string> out;
  if (const auto* info = inject::InjectorRegistry::instance().find(kind))
    for (const auto& p : info->params) out.insert(p.name);
  return out;
}

[[noreturn]] void entry_fail(const FaultEntry& e, const std::string& what) {
  throw ScenarioError(e.where, 0, 0, "", what);
}

// Slots of `op` on `side` whose tensor is a non-empty floating-point tensor.
std::vector<std::uint16_t> float_slots(const graph::Graph& g, const graph::Op& op, const std::string& side) {
  const auto& names = side == "output" ? op.outputs : op.inputs;
  std::vector<std::uint16_t> out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty()) continue;
    const auto* t = g.find_tensor(names[i]);
    if (t && graph::is_float(t->desc.dtype) && graph::numel(t->desc.shape) > 0) out.push_back(static_cast<std::uint16_t>(i));
  }
  return out;
}

void add_truth(const graph::Op& op, std::set<std::string>& truth) {
  truth.insert(op.name);
  for (const auto& f : op.fused_from) truth.insert(f);
}

// `flips` distinct bits drawn from `pool`.
std::vector<std::uint64_t> draw_bits(std::mt19937_64& g, std::vector<std::uint64_t> pool, int flips) {
  std::vector<std::uint64_t> out;
  for (int k = 0; k < flips && !pool.empty(); ++k) {
    const auto at = draw(g, pool.size());
    out.push_back(pool[at]);
    pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(at));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::uint64_t> bit_pool(const std::vector<std::uint64_t>& given, std::uint64_t width) {
  std::vector<std::uint64_t> pool;
  for (auto b : given)
    if (b < width) pool.push_back(b);
  if (given.empty())
    for (std::uint64_t b = 0; b < width; ++b) pool.push_back(b);
  return pool;
}

YAML::Node seq_of(const std::vector<std::uint64_t>& v) {
  YAML::Node n(YAML::NodeType::Sequence);
  for (auto x : v) n.push_back(x);
  return n;
}

}  // namespace

std::function<std::string(std::uint32_t, std::uint32_t)> trial_first_link(const PreparedRun& run) {
  auto first = cluster_first_link(run);
  if (!first) return nullptr;
  const auto ranks = static_cast<std::uint32_t>(run.scenario.ranks);
  return [first, ranks](std::uint32_t src, std::uint32_t dst) -> std::string {
    if (src == dst || src >= ranks || dst >= ranks) return "";
    const inject::InjectionEnv::FirstLink l = first(src, dst);
    return l.direct ? l.name : "";
  };
}

bool is_perf_kind(const std::string& kind) {
  return kind == "hbm_channel_degraded" || kind == "link_degraded" || kind == "straggler" || kind == "launch_delay" ||
         kind == "core_throttled";
}

std::uint64_t campaign_mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

nlohmann::json TrialSpec::descriptor_json() const { return inject::yaml_to_json(descriptor); }

TrialGenerator::TrialGenerator(const FaultModel& model, const TrialSpace& space) : model_(model), space_(space) {
  if (model_.faults.empty())
    throw ScenarioError("campaign", 0, 0, "campaign.faults", "at least one fault entry (or --fault)", "none");
  const graph::Graph& g = *space_.executed;
  for (const FaultEntry& fe : model_.faults) {
    Entry e;
    e.spec = &fe;
    const auto params = kind_params(fe.kind);
    auto range = [&](const std::vector<std::uint64_t>& given, std::uint32_t limit, const char* what) {
      std::vector<std::uint64_t> out = given;
      if (out.empty())
        for (std::uint64_t k = 0; k < limit; ++k) out.push_back(k);
      if (out.back() >= limit) entry_fail(fe, fmt::format("{} below {} (the scenario's count)", what, limit));
      return out;
    };
    e.steps = range(fe.steps, space_.steps, "steps");
    e.ranks = range(fe.ranks, space_.ranks, "ranks");
    if (fe.kind == "link_degraded" || fe.kind == "link_down") {
      // src among the entry's ranks; dst among the chips src reaches directly.
      for (const std::uint64_t src : e.ranks)
        for (std::uint32_t dst = 0; dst < space_.ranks; ++dst)
          if (dst != src && (!space_.first_link || !space_.first_link(static_cast<std::uint32_t>(src), dst).empty()))
            e.links.emplace_back(src, dst);
      if (e.links.empty())
        entry_fail(fe, fmt::format("ranks with a link to another chip (the scenario has {} rank(s))", space_.ranks));
    }
    if (params.count("op")) {
      std::set<std::uint32_t> ids;
      bool matched = false;
      for (const auto& glob : fe.ops)
        for (const graph::Op* op : g.select_ops(glob)) {
          if (!fe.op_types.empty() && std::find(fe.op_types.begin(), fe.op_types.end(), op->type) == fe.op_types.end())
            continue;
          matched = true;
          bool usable = true;
          if (is_value_kind(fe.kind)) usable = !reachable_slots(e, *op).empty();
          else if (fe.kind == "bitflip") usable = !reachable_targets(e, *op).empty();
          else if (space_.census) usable = !executions(e, *op, SiteCensus::site_of(fe.kind, "", 0, "")).empty();
          if (usable) ids.insert(op->id);
        }
      e.ops.assign(ids.begin(), ids.end());
      std::sort(e.ops.begin(), e.ops.end(), [&](auto a, auto b) { return g.op(a).name < g.op(b).name; });
      if (e.ops.empty())
        entry_fail(fe, fmt::format("ops matching {}{} in the executed graph '{}'{}", fmt::join(fe.ops, ", "),
                                   fe.op_types.empty() ? "" : fmt::format(" of type {}", fmt::join(fe.op_types, "|")),
                                   g.name(),
                                   matched ? " at a site the fault-free run reaches (none of them can fire)" : ""));
    }
    entries_.push_back(std::move(e));
  }

  if (model_.sampling == "per_kind" || model_.sampling == "per_op") {
    std::map<std::string, std::vector<std::size_t>> strata;
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      if (model_.sampling == "per_kind") {
        strata[entries_[i].spec->kind].push_back(i);
      } else if (entries_[i].ops.empty()) {
        strata["-"].push_back(i);
      } else {
        for (auto id : entries_[i].ops) strata[g.op(id).name].push_back(i);
      }
    }
    for (auto& [name, ids] : strata) {
      strata_.push_back(name);
      stratum_entries_.push_back(std::move(ids));
    }
  }
}

std::vector<SiteCensus::Execution> TrialGenerator::executions(const Entry& e, const graph::Op& op,
                                                              const std::string& site) const {
  std::vector<SiteCensus::Execution> out;
  auto wanted = [&](std::uint32_t rank, std::uint32_t step) {
    return std::find(e.ranks.begin(), e.ranks.end(), rank) != e.ranks.end() &&
           std::find(e.steps.begin(), e.steps.end(), step) != e.steps.end();
  };
  if (!space_.census || site.empty()) {
    for (auto r : e.ranks)
      for (auto s : e.steps) out.emplace_back(static_cast<std::uint32_t>(r), static_cast<std::uint32_t>(s));
    return out;
  }
  for (const auto& [r, s] : space_.census->reached(op.name, site))
    if (wanted(r, s)) out.emplace_back(r, s);
  return out;
}

std::vector<std::pair<std::string, std::uint16_t>> TrialGenerator::reachable_slots(const Entry& e,
                                                                                   const graph::Op& op) const {
  std::vector<std::pair<std::string, std::uint16_t>> out;
  for (const auto& side : e.spec->tensors)
    for (auto slot : float_slots(*space_.executed, op, side))
      if (!executions(e, op, SiteCensus::site_of(e.spec->kind, side, slot, "")).empty()) out.emplace_back(side, slot);
  return out;
}

std::vector<std::string> TrialGenerator::reachable_targets(const Entry& e, const graph::Op& op) const {
  static const std::vector<std::string> kDefaultTargets = {"l0c"};
  std::vector<std::string> out;
  for (const auto& t : e.spec->targets.empty() ? kDefaultTargets : e.spec->targets) {
    if (t == "hbm") {
      bool has_output = false;
      for (const auto& o : op.outputs)
        has_output = has_output || (!o.empty() && graph::numel(space_.executed->tensor(o).desc.shape) > 0);
      if (has_output) out.push_back(t);
    } else if (!executions(e, op, SiteCensus::site_of("bitflip", "", 0, t)).empty()) {
      out.push_back(t);
    }
  }
  return out;
}

std::size_t TrialGenerator::pick_entry(const std::vector<std::size_t>& eligible, std::uint64_t r) const {
  double total = 0;
  for (auto i : eligible) total += entries_[i].spec->weight;
  const double x = static_cast<double>(r >> 11) * 0x1.0p-53 * total;
  double acc = 0;
  for (auto i : eligible) {
    acc += entries_[i].spec->weight;
    if (x < acc) return i;
  }
  return eligible.back();
}

TrialSpec TrialGenerator::trial(std::uint64_t seed, std::uint64_t index) const {
  std::mt19937_64 gen(campaign_mix(seed ^ campaign_mix(index + 0x632BE59BD9B4E019ull)));
  TrialSpec t;
  t.index = index;
  std::vector<std::size_t> eligible;
  std::string stratum;
  if (strata_.empty()) {
    for (std::size_t i = 0; i < entries_.size(); ++i) eligible.push_back(i);
  } else {
    const std::size_t s = index % strata_.size();
    stratum = strata_[s];
    eligible = stratum_entries_[s];
  }
  const std::uint64_t r_entry = gen(), r_op = gen(), r_sites = gen();
  t.entry = pick_entry(eligible, r_entry);
  t.stratum = stratum;
  const Entry& e = entries_[t.entry];
  std::uint32_t op_id = 0;
  if (!e.ops.empty()) {
    if (model_.sampling == "per_op") {
      const graph::Op* o = space_.executed->find_op(stratum);
      op_id = o ? o->id : e.ops.front();
    } else {
      op_id = e.ops[r_op % e.ops.size()];
    }
  }
  fill_sites(e, op_id, r_sites, t);
  return t;
}

std::vector<TrialSpec> TrialGenerator::trials(std::uint64_t seed, std::uint64_t n) const {
  std::vector<TrialSpec> out;
  out.reserve(n);
  for (std::uint64_t i = 0; i < n; ++i) out.push_back(trial(seed, i));
  return out;
}

std::uint64_t TrialGenerator::live_cycle(std::mt19937_64& gen, const std::string& tensor, bool live) const {
  const graph::Graph& g = *space_.executed;
  const std::uint64_t span = std::max<std::uint64_t>(space_.cycle_span, 1);
  auto window = [&](const graph::Op* op) -> const std::pair<std::uint64_t, std::uint64_t>* {
    if (!op) return nullptr;
    auto it = space_.op_windows.find(op->name);
    return it == space_.op_windows.end() ? nullptr : &it->second;
  };
  const auto* p = window(g.producer(tensor));
  if (!live || !p) return draw(gen, span);
  std::uint64_t lo = p->second, hi = span;
  const auto consumers = g.consumers(tensor);
  if (!consumers.empty()) {
    std::uint64_t last = 0;
    for (const auto* c : consumers)
      if (const auto* w = window(c)) last = std::max(last, w->first);
    if (last > lo) hi = last;
  }
  if (hi <= lo) return draw(gen, span);
  return lo + draw(gen, hi - lo);
}

void TrialGenerator::fill_sites(const Entry& e, std::uint32_t op_id, std::uint64_t rng_seed, TrialSpec& t) const {
  const graph::Graph& g = *space_.executed;
  const FaultEntry& fe = *e.spec;
  const auto params = kind_params(fe.kind);
  std::mt19937_64 gen(rng_seed);
  YAML::Node d(YAML::NodeType::Map);
  d["kind"] = fe.kind;
  t.kind = fe.kind;
  std::set<std::string> truth;
  const graph::Op* op = e.ops.empty() ? nullptr : &g.op(op_id);
  if (op) t.op = op->name;

  auto count_of = [&]() -> std::uint64_t {
    if (fe.set.IsDefined() && fe.set["count"].IsDefined()) return fe.set["count"].as<std::uint64_t>(1);
    return 1;
  };
  auto element_in = [&](std::uint64_t n, std::uint64_t count) -> std::uint64_t {
    if (fe.element) return *fe.element;
    return n > count ? draw(gen, n - count + 1) : 0;
  };

  auto draw_execution = [&](const std::string& site) {
    const auto ex = executions(e, *op, site);
    const auto& x = ex.empty() ? SiteCensus::Execution{0, 0} : ex[draw(gen, ex.size())];
    d["step"] = x.second;
    d["rank"] = x.first;
    t.step = x.second;
    t.rank = x.first;
  };
  if (is_value_kind(fe.kind)) {
    const auto slots = reachable_slots(e, *op);
    const auto& [side, slot] = pick(gen, slots);
    const auto& tensor = g.tensor(side == "output" ? op->outputs[slot] : op->inputs[slot]);
    d["op"] = op->name;
    d["tensor"] = side;
    d["index"] = slot;
    draw_execution(SiteCensus::site_of(fe.kind, side, slot, ""));
    const std::uint64_t element = element_in(static_cast<std::uint64_t>(graph::numel(tensor.desc.shape)), count_of());
    d["element"] = element;
    t.element = element;
    t.side = side;
    t.slot = slot;
    t.tensor_name = tensor.name;
    add_truth(*op, truth);
  } else if (fe.kind == "bitflip") {
    t.target = pick(gen, reachable_targets(e, *op));
    d["target"] = t.target;
    if (t.target == "hbm") {
      std::vector<std::string> outs;
      for (const auto& o : op->outputs)
        if (!o.empty() && graph::numel(g.tensor(o).desc.shape) > 0) outs.push_back(o);
      const auto& tensor = g.tensor(pick(gen, outs));
      d["tensor"] = tensor.name;
      const std::uint64_t element = element_in(static_cast<std::uint64_t>(graph::numel(tensor.desc.shape)), 1);
      d["element"] = element;
      d["bits"] = seq_of(draw_bits(gen, bit_pool(fe.bits, graph::dtype_size(tensor.desc.dtype) * 8), fe.flips));
      d["cycle"] = live_cycle(gen, tensor.name, fe.live_cycles);
      const auto rank = pick(gen, e.ranks);
      d["rank"] = rank;
      t.rank = static_cast<std::uint32_t>(rank);
      if (const auto* p = g.producer(tensor.name)) add_truth(*p, truth);
      for (const auto* c : g.consumers(tensor.name)) add_truth(*c, truth);
    } else {
      d["op"] = op->name;
      draw_execution(SiteCensus::site_of("bitflip", "", 0, t.target));
      d["bits"] = seq_of(draw_bits(gen, bit_pool(fe.bits, 64), fe.flips));
      d["byte"] = draw(gen, 65536);
      add_truth(*op, truth);
    }
  } else {
    if (op) {
      d["op"] = op->name;
      add_truth(*op, truth);
    }
    if (params.count("step") && params.count("rank") && op) {
      draw_execution(SiteCensus::site_of(fe.kind, "", 0, ""));
    } else if (fe.kind == "link_degraded" || fe.kind == "link_down") {
      const auto [src, dst] = pick(gen, e.links);
      d["src"] = src;
      d["dst"] = dst;
      if (fe.kind == "link_down") d["cycle"] = draw(gen, std::max<std::uint64_t>(space_.cycle_span, 1));
    } else {
      if (params.count("step")) d["step"] = pick(gen, e.steps);
      if (params.count("rank")) d["rank"] = pick(gen, e.ranks);
    }
    if (fe.kind == "stuck_at") {
      std::uint64_t width = 16;
      if (op && !op->outputs.empty() && !op->outputs[0].empty())
        width = graph::dtype_size(g.tensor(op->outputs[0]).desc.dtype) * 8;
      d["bit"] = pick(gen, bit_pool(fe.bits, width));
    }
  }
  for (const auto& [key, values] : fe.choose) d[key] = values[draw(gen, values.size())];
  if (fe.set.IsDefined() && fe.set.IsMap())
    for (const auto& kv : fe.set) d[kv.first.as<std::string>()] = kv.second;
  d["seed"] = campaign_mix(rng_seed ^ 0x5EEDull) >> 11;
  t.descriptor = d;
  auto u = [&d](const char* k) { return d[k].IsDefined() ? d[k].as<std::uint32_t>(0) : 0u; };
  // A link as the perf findings and the hang report name it.
  auto link_name = [this](std::uint32_t src, std::uint32_t dst) {
    const std::string link = space_.first_link ? space_.first_link(src, dst) : "";
    return link.empty() ? fmt::format("link r{} -> r{}", src, dst) : "link " + link;
  };
  if (fe.kind == "link_down") {
    t.hang_scored = true;
    truth.insert(link_name(u("src"), u("dst")));
    if (d["both_directions"].IsDefined() && d["both_directions"].as<bool>(false)) truth.insert(link_name(u("dst"), u("src")));
    t.truth_cause = "link_down";
    t.rank = u("src");
  }
  if (is_perf_kind(fe.kind)) {
    // The slowed component, as the perf findings name it (campaign_outcome.h perf_component).
    t.perf = true;
    if (fe.kind == "hbm_channel_degraded") {
      truth.insert(fmt::format("hbm_channel r{} ch{}", u("rank"), u("channel")));
      t.truth_cause = "hbm_channel";
    } else if (fe.kind == "link_degraded") {
      truth.insert(link_name(u("src"), u("dst")));
      t.truth_cause = "link";
    } else if (fe.kind == "core_throttled") {
      truth.insert(fmt::format("core r{} c{}", u("rank"), u("core")));
      t.truth_cause = "core";
    } else {
      truth.insert(fmt::format("{} r{}", fe.kind == "straggler" ? "straggler" : "launch", u("rank")));
      t.truth_cause = fe.kind == "straggler" ? "straggler" : "launch";
    }
    t.rank = u(fe.kind == "link_degraded" ? "src" : "rank");
  }
  t.truth_ops.assign(truth.begin(), truth.end());
  // the true cause class (see the header)
  if (fe.kind == "nan" || fe.kind == "inf") {
    t.nonfinite = true;
    // an Inf written into a result from finite inputs is what a computation overflow looks like
    t.truth_cause = t.side == "input" ? "data_corruption" : fe.kind == "nan" ? "nan_source" : "overflow";
    t.truth_cause_replayed = "data_corruption";
  } else if (fe.kind == "value" || fe.kind == "bitflip" || fe.kind == "stuck_at") {
    t.truth_cause = "data_corruption";
  } else if (fe.kind == "fp16_accumulation") {
    t.truth_cause = "fp16_accumulation_overflow";
  } else if (fe.kind == "collective_order") {
    t.truth_cause = "collective_order";
  }
}

}  // namespace probelab::sim
