// The sections of the probe config: watch points, conditions, rules and the option blocks.
#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <sstream>

#include "chip_model/spec/registers.h"
#include "probes/detail/config_reader.h"

namespace probelab::probes::detail {

namespace {

struct Defaults {
  CaptureMode mode = CaptureMode::Statistics;
  double sample_rate = 1.0;
  DirectionFilter direction = DirectionFilter::All;
  IntSet steps, ranks;
  std::optional<std::string> scope;
  bool inputs = false, outputs = true;
  std::vector<Condition> conditions;
  RewindSpec rewind;  // arguments of a rewind among the default actions
};

void data_mode(const Reader& r, const YAML::Node& n, const std::string& key, bool& in, bool& out) {
  in = out = false;
  for (const auto& s : r.strings(n, key)) {
    if (s == "input") in = true;
    else if (s == "output") out = true;
    else if (s == "all") in = out = true;
    else r.fail(n, key, fmt::format("unknown data mode '{}' (expected input, output or all)", s));
  }
  if (!in && !out) r.fail(n, key, "selects neither inputs nor outputs");
}

std::vector<Condition> conditions(const Reader& r, const YAML::Node& n, const std::string& key,
                                  const std::vector<Action>& default_actions, const YAML::Node& actions_node,
                                  const RewindSpec& default_rewind = {}) {
  std::vector<Condition> out;
  if (!n.IsSequence() && !n.IsScalar()) r.fail(n, key, "expected a list of conditions");
  auto one = [&](const YAML::Node& c, const std::string& k) {
    Condition cond;
    if (c.IsScalar()) {
      cond.expr = r.expr(c, k, c.as<std::string>());
      cond.actions = default_actions;
      cond.rewind = default_rewind;
      if (cond.actions.empty())
        r.fail(actions_node.IsDefined() ? actions_node : c, k, "condition has no actions (add `actions: [...]`)");
    } else if (c.IsMap()) {
      r.check_keys(c, k, {"when", "actions"});
      if (!c["when"]) r.fail(c, k, "missing key 'when'");
      cond.expr = r.expr(c["when"], Reader::join(k, "when"), r.str(c["when"], Reader::join(k, "when")));
      cond.rewind = default_rewind;
      cond.actions = c["actions"] ? r.actions(c["actions"], Reader::join(k, "actions"), &cond.rewind) : default_actions;
      if (std::count(cond.actions.begin(), cond.actions.end(), Action::Rewind) > 1)
        r.fail(c["actions"], Reader::join(k, "actions"), "one rewind action per condition");
      if (cond.actions.empty()) r.fail(c, k, "condition has no actions");
    } else {
      r.fail(c, k, "expected an expression string or {when: ..., actions: [...]}");
    }
    const bool brk = std::find(cond.actions.begin(), cond.actions.end(), Action::Break) != cond.actions.end();
    if (brk && std::find(cond.actions.begin(), cond.actions.end(), Action::Rewind) != cond.actions.end())
      r.fail(c, k, "break and rewind exclude each other (a rewind re-executes the step after it ends; drop break)");
    out.push_back(std::move(cond));
  };
  if (n.IsScalar()) one(n, key);
  else
    for (std::size_t i = 0; i < n.size(); ++i) one(n[i], fmt::format("{}[{}]", key, i));
  return out;
}

void check_mode_vs_conditions(const Reader& r, const YAML::Node& n, const std::string& key, const WatchPoint& wp) {
  if (wp.mode != CaptureMode::Hash) return;
  for (const auto& c : wp.conditions)
    for (Var v : c.expr.vars())
      if (is_stat_var(v) && !(c.actions.size() == 1 && c.actions[0] == Action::Break))
        r.fail(n, key,
               fmt::format("condition '{}' uses statistic '{}' but the capture mode is hash (use statistics or full)",
                           c.expr.text(), var_name(v)));
}

OpRef op_ref(const Reader& r, const YAML::Node& n, const std::string& key) {
  OpRef ref;
  if (n.IsScalar()) {
    ref.text = n.as<std::string>();
    ref.globs.push_back(ref.text);
    r.glob(n, key, ref.text);
    return ref;
  }
  if (!n.IsMap())
    r.fail(n, key, "expected an op name glob, {match: [GLOB, ...], direction: D} or {type: T, index: N, direction: D}");
  r.check_keys(n, key, {"match", "type", "index", "direction"});
  if (n["direction"]) ref.direction = r.direction(n["direction"], Reader::join(key, "direction"));
  if (n["match"]) {
    if (n["type"] || n["index"]) r.fail(n, key, "expected either 'match' or 'type' (with 'index'), not both");
    const std::string mk = Reader::join(key, "match");
    ref.globs = r.strings(n["match"], mk);
    if (ref.globs.empty()) r.fail(n["match"], mk, "expected at least one glob");
    for (std::size_t i = 0; i < ref.globs.size(); ++i)
      r.glob(n["match"].IsSequence() ? n["match"][i] : n["match"], mk, ref.globs[i]);
    for (const auto& g : ref.globs) ref.text += (ref.text.empty() ? "" : "|") + g;
    return ref;
  }
  if (!n["type"]) r.fail(n, key, "missing key 'type' (or 'match')");
  ref.type = r.str(n["type"], Reader::join(key, "type"));
  if (n["index"]) ref.index = r.integer(n["index"], Reader::join(key, "index"), 0, INT64_MAX);
  ref.text = fmt::format("{}#{}", ref.type, ref.index);
  return ref;
}

WatchPoint watch_point(const Reader& r, const YAML::Node& n, const std::string& key, std::size_t index,
                       const Defaults& d, const std::vector<Action>& default_actions, const YAML::Node& actions_node) {
  WatchPoint wp;
  wp.id = fmt::format("wp{}", index);
  wp.mode = d.mode;
  wp.sample_rate = d.sample_rate;
  wp.direction = d.direction;
  wp.steps = d.steps;
  wp.ranks = d.ranks;
  wp.scope = d.scope;
  wp.capture_inputs = d.inputs;
  wp.capture_outputs = d.outputs;
  wp.conditions = d.conditions;
  if (n.IsScalar()) {
    wp.patterns.push_back(n.as<std::string>());
    r.glob(n, key, wp.patterns.back());
    return wp;
  }
  r.check_keys(n, key,
               {"name", "match", "ops", "tensors", "types", "range", "scope", "steps", "ranks", "direction", "mode",
                "sample_rate", "data_mode", "halt_on_exception", "conditions", "actions"});
  auto k = [&](const char* s) { return Reader::join(key, s); };
  if (n["name"]) wp.id = r.str(n["name"], k("name"));
  for (const char* field : {"match", "ops", "tensors"})
    if (n[field])
      for (const auto& g : r.strings(n[field], k(field))) {
        r.glob(n[field], k(field), g);
        wp.patterns.push_back(g);
      }
  if (n["types"]) wp.types = r.strings(n["types"], k("types"));
  if (const auto& rg = n["range"]) {
    if (!rg.IsSequence() || rg.size() != 2) r.fail(rg, k("range"), "expected [first op, last op]");
    wp.range = std::make_pair(op_ref(r, rg[0], k("range[0]")), op_ref(r, rg[1], k("range[1]")));
  }
  if (wp.patterns.empty() && wp.types.empty() && !n["scope"] && !n["range"])
    r.fail(n, key, "watch point selects nothing: give `match` globs, `types`, a `range` or a `scope`");
  if (wp.patterns.empty() && wp.types.empty()) wp.patterns.push_back("*");
  if (n["scope"]) wp.scope = r.regex(n["scope"], k("scope"));
  if (n["steps"]) wp.steps = r.intset(n["steps"], k("steps"));
  if (n["ranks"]) wp.ranks = r.intset(n["ranks"], k("ranks"));
  if (n["direction"]) wp.direction = r.direction(n["direction"], k("direction"));
  if (n["mode"]) wp.mode = r.mode(n["mode"], k("mode"));
  if (n["sample_rate"]) wp.sample_rate = r.rate(n["sample_rate"], k("sample_rate"));
  if (n["data_mode"]) data_mode(r, n["data_mode"], k("data_mode"), wp.capture_inputs, wp.capture_outputs);
  if (n["halt_on_exception"]) wp.halt_on_exception = r.boolean(n["halt_on_exception"], k("halt_on_exception"));
  std::vector<Action> acts = default_actions;
  RewindSpec rewind = d.rewind;
  if (n["actions"]) acts = r.actions(n["actions"], k("actions"), &rewind);
  // (YAML::Node has reference semantics: pick the node once instead of re-assigning a variable)
  const YAML::Node acts_node = n["actions"] ? n["actions"] : actions_node;
  if (n["conditions"]) wp.conditions = conditions(r, n["conditions"], k("conditions"), acts, acts_node, rewind);
  else if (n["actions"]) r.fail(n["actions"], k("actions"), "actions without conditions (add `conditions: [...]`)");
  check_mode_vs_conditions(r, n, key, wp);
  return wp;
}

Rule rule(const Reader& r, const YAML::Node& n, const std::string& key) {
  Rule out;
  std::string when;
  const YAML::Node when_node = n.IsMap() && n["when"] ? n["when"] : n;
  if (n.IsScalar()) {
    std::string s = n.as<std::string>();
    auto arrow = s.find("->");
    if (arrow == std::string::npos) r.fail(n, key, fmt::format("rule '{}' has no '-> action'", s));
    when = s.substr(0, arrow);
    when.erase(when.find_last_not_of(" \t") + 1);
    const std::string acts = s.substr(arrow + 2);
    std::vector<std::string> parts(1);  // split at commas outside parentheses: rewind(a, b)
    int depth = 0;
    for (char ch : acts) {
      if (ch == '(') ++depth;
      if (ch == ')') --depth;
      if (ch == ',' && depth == 0) parts.emplace_back();
      else parts.back() += ch;
    }
    for (std::string a : parts) {
      a.erase(0, a.find_first_not_of(" \t"));
      a.erase(a.find_last_not_of(" \t") + 1);
      out.actions.push_back(r.action(n, key, a, &out.rewind));
    }
  } else if (n.IsMap()) {
    r.check_keys(n, key, {"when", "actions", "ops"});
    if (!n["when"] || !n["actions"]) r.fail(n, key, "a rule needs `when` and `actions`");
    when = r.str(n["when"], Reader::join(key, "when"));
    out.actions = r.actions(n["actions"], Reader::join(key, "actions"), &out.rewind);
    if (n["ops"])
      for (const auto& g : r.strings(n["ops"], Reader::join(key, "ops"))) {
        r.glob(n["ops"], Reader::join(key, "ops"), g);
        out.ops.push_back(g);
      }
  } else {
    r.fail(n, key, "expected \"EXPR -> action\" or {when: EXPR, actions: [...]}");
  }
  if (out.actions.empty()) r.fail(n, key, "rule has no actions");
  out.expr = r.expr(when_node, key, when);
  for (Var v : out.expr.vars())
    if (is_stat_var(v))
      r.fail(when_node, key,
             fmt::format("rule '{}' uses statistic '{}': rules see counters, step and rank only (put statistics in a "
                         "watch point condition)",
                         out.expr.text(), var_name(v)));
  for (Action a : out.actions)
    if (a == Action::Break || a == Action::FullDump || a == Action::StatsDump)
      r.fail(n, key, fmt::format("action '{}' needs a tensor; rules allow enable_verbose, stop and rewind", action_name(a)));
  if (std::count(out.actions.begin(), out.actions.end(), Action::Rewind) > 1) r.fail(n, key, "one rewind action per rule");
  return out;
}

// Why `dir` is not a plain relative directory (nullopt when it is): dumps must stay inside the
// output directory the runtime was given.
std::optional<std::string> relative_dir_problem(const std::string& dir) {
  if (dir.empty()) return "is empty";
  if (dir.size() > 255) return "is longer than 255 characters";
  if (dir.front() == '/') return "is an absolute path";
  std::size_t begin = 0;
  while (begin <= dir.size()) {
    std::size_t end = dir.find('/', begin);
    if (end == std::string::npos) end = dir.size();
    const std::string part = dir.substr(begin, end - begin);
    if (part == "..") return "leaves the output directory ('..')";
    if (part.empty() || part == ".") return "has an empty or '.' path component";
    for (char c : part)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
        return fmt::format("has the character '{}' (use letters, digits, '_', '-', '.' and '/')", c);
    begin = end + 1;
  }
  return std::nullopt;
}

std::map<graph::DType, double> per_dtype(const Reader& r, const YAML::Node& n, const std::string& key) {
  std::map<graph::DType, double> out;
  if (!n.IsMap()) r.fail(n, key, "expected a mapping dtype -> threshold (e.g. {float16: 0.001})");
  for (auto it = n.begin(); it != n.end(); ++it) {
    std::string name = it->first.as<std::string>();
    auto dt = graph::parse_dtype(name);
    if (!dt || !graph::is_float(*dt)) r.fail(it->first, Reader::join(key, name), "expected a float dtype name");
    out[*dt] = r.number(it->second, Reader::join(key, name));
  }
  return out;
}

}  // namespace

void parse_sections(const Reader& r, const YAML::Node& root, ProbeConfig& cfg) {
  const std::string p;  // key paths are relative to the probes section
  r.check_keys(root, p,
               {"enabled", "seed", "mode", "task", "sample_rate", "direction", "steps", "step", "ranks", "rank", "scope",
                "data_mode", "watch_points", "conditions", "actions", "rules", "exceptions", "capture", "output",
                "consistency", "compare", "integrity"});
  if (root["enabled"]) cfg.enabled = r.boolean(root["enabled"], "enabled");
  if (root["seed"]) cfg.seed = static_cast<std::uint64_t>(r.integer(root["seed"], "seed", 0, INT64_MAX));

  Defaults d;
  for (const char* k : {"mode", "task"})
    if (root[k]) d.mode = r.mode(root[k], k);
  if (root["sample_rate"]) d.sample_rate = r.rate(root["sample_rate"], "sample_rate");
  if (root["direction"]) d.direction = r.direction(root["direction"], "direction");
  for (const char* k : {"steps", "step"})
    if (root[k]) d.steps = r.intset(root[k], k);
  for (const char* k : {"ranks", "rank"})
    if (root[k]) d.ranks = r.intset(root[k], k);
  if (root["scope"]) d.scope = r.regex(root["scope"], "scope");
  if (root["data_mode"]) data_mode(r, root["data_mode"], "data_mode", d.inputs, d.outputs);
  std::vector<Action> acts;
  if (root["actions"]) acts = r.actions(root["actions"], "actions", &d.rewind);
  if (root["conditions"]) d.conditions = conditions(r, root["conditions"], "conditions", acts, root["actions"], d.rewind);
  else if (root["actions"]) r.fail(root["actions"], "actions", "actions without conditions");

  if (const auto& wps = root["watch_points"]) {
    if (wps.IsScalar()) {
      cfg.watch_points.push_back(watch_point(r, wps, "watch_points", 0, d, acts, root["actions"]));
    } else {
      if (!wps.IsSequence()) r.fail(wps, "watch_points", "expected a list of globs or watch point mappings");
      for (std::size_t i = 0; i < wps.size(); ++i)
        cfg.watch_points.push_back(
            watch_point(r, wps[i], fmt::format("watch_points[{}]", i), i, d, acts, root["actions"]));
    }
    std::set<std::string> ids;
    for (std::size_t i = 0; i < cfg.watch_points.size(); ++i)
      if (!ids.insert(cfg.watch_points[i].id).second)
        r.fail(wps, fmt::format("watch_points[{}].name", i), fmt::format("duplicate watch point name '{}'", cfg.watch_points[i].id));
  } else if (root["scope"]) {
    WatchPoint wp = watch_point(r, YAML::Node("*"), "scope", 0, d, acts, root["actions"]);
    cfg.watch_points.push_back(std::move(wp));
  }
  for (auto& wp : cfg.watch_points) check_mode_vs_conditions(r, root, "watch_points", wp);

  if (const auto& rules = root["rules"]) {
    if (rules.IsScalar()) cfg.rules.push_back(rule(r, rules, "rules"));
    else if (rules.IsSequence())
      for (std::size_t i = 0; i < rules.size(); ++i) cfg.rules.push_back(rule(r, rules[i], fmt::format("rules[{}]", i)));
    else r.fail(rules, "rules", "expected a list of rules");
  }

  if (const auto& e = root["exceptions"]) {
    r.check_keys(e, "exceptions", {"kinds", "latch_limit"});
    if (e["kinds"]) {
      cfg.exceptions.enable_mask = 0;
      for (const auto& k : r.strings(e["kinds"], "exceptions.kinds")) {
        if (k == "overflow") cfg.exceptions.enable_mask |= 1u << spec::kExcOverflow;
        else if (k == "underflow") cfg.exceptions.enable_mask |= 1u << spec::kExcUnderflow;
        else if (k == "invalid") cfg.exceptions.enable_mask |= 1u << spec::kExcInvalid;
        else if (k == "nan_input") cfg.exceptions.enable_mask |= 1u << spec::kExcNanInput;
        else if (k == "inf_input") cfg.exceptions.enable_mask |= 1u << spec::kExcInfInput;
        else if (k == "all") cfg.exceptions.enable_mask = (1u << spec::kExcKindCount) - 1;
        else if (k == "none") cfg.exceptions.enable_mask = 0;
        else
          r.fail(e["kinds"], "exceptions.kinds",
                 fmt::format("unknown exception kind '{}' (expected overflow, underflow, invalid, nan_input, inf_input, "
                             "all or none)",
                             k));
      }
    }
    if (e["latch_limit"])
      cfg.exceptions.latch_limit = static_cast<std::uint32_t>(r.integer(e["latch_limit"], "exceptions.latch_limit", 0, 1 << 20));
  }

  if (const auto& c = root["capture"]) {
    r.check_keys(c, "capture", {"buffer_bytes", "ping_pong", "overrun", "in_kernel_statistics", "async_full", "drain"});
    if (c["async_full"]) cfg.capture.async_full = r.boolean(c["async_full"], "capture.async_full");
    if (c["in_kernel_statistics"])
      cfg.capture.in_kernel_statistics = r.boolean(c["in_kernel_statistics"], "capture.in_kernel_statistics");
    if (c["drain"])
      cfg.capture.drain = r.choice<DrainPolicy>(
          c["drain"], "capture.drain", "drain policy",
          {{"auto", DrainPolicy::Auto}, {"step", DrainPolicy::Step}, {"buffer_full", DrainPolicy::BufferFull}});
    if (c["buffer_bytes"])
      cfg.capture.buffer_bytes = static_cast<std::uint32_t>(r.integer(c["buffer_bytes"], "capture.buffer_bytes", 4096, 1ll << 31));
    if (c["ping_pong"]) cfg.capture.ping_pong = r.boolean(c["ping_pong"], "capture.ping_pong");
    if (c["overrun"])
      cfg.capture.drop_on_full =
          r.choice<bool>(c["overrun"], "capture.overrun", "overrun policy", {{"stall", false}, {"drop", true}});
  }

  if (const auto& o = root["output"]) {
    r.check_keys(o, "output", {"dir", "compression", "zstd_level", "delta", "level"});
    if (o["dir"]) {
      cfg.output.dir = r.str(o["dir"], "output.dir");
      if (auto why = relative_dir_problem(cfg.output.dir))
        r.fail(o["dir"], "output.dir", fmt::format("'{}' {}; expected a relative directory inside the run's output "
                                                   "directory (e.g. dump)",
                                                   cfg.output.dir, *why));
    }
    if (const auto& c = o["compression"]) {
      std::string s = r.str(c, "output.compression");
      bool b = false;
      if (s == "zstd") cfg.output.zstd = true;
      else if (s == "none") cfg.output.zstd = false;
      else if (YAML::convert<bool>::decode(c, b)) cfg.output.zstd = b;
      else r.fail(c, "output.compression", fmt::format("unknown compression '{}' (expected zstd or none)", s));
    }
    if (o["zstd_level"]) cfg.output.zstd_level = static_cast<int>(r.integer(o["zstd_level"], "output.zstd_level", 1, 19));
    if (o["delta"]) cfg.output.delta = r.boolean(o["delta"], "output.delta");
    if (o["level"])
      cfg.output.level = r.choice<OutputLevel>(
          o["level"], "output.level", "level",
          {{"all", OutputLevel::All}, {"triggered", OutputLevel::Triggered}, {"none", OutputLevel::None}});
  }

  if (const auto& c = root["consistency"]) {
    r.check_keys(c, "consistency", {"enabled", "reference_rank", "sync_at_collectives", "sync_nodes", "mode", "tolerance", "steps",
                                       "compare_inputs"});
    if (c["compare_inputs"]) cfg.consistency.compare_inputs = r.boolean(c["compare_inputs"], "consistency.compare_inputs");
    cfg.consistency.enabled = c["enabled"] ? r.boolean(c["enabled"], "consistency.enabled") : true;
    if (c["reference_rank"])
      cfg.consistency.reference_rank = static_cast<std::uint32_t>(r.integer(c["reference_rank"], "consistency.reference_rank", 0, 1 << 20));
    if (c["sync_at_collectives"]) cfg.consistency.sync_at_collectives = r.boolean(c["sync_at_collectives"], "consistency.sync_at_collectives");
    if (c["sync_nodes"] && r.str(c["sync_nodes"], "consistency.sync_nodes") != "all")
      r.fail(c["sync_nodes"], "consistency.sync_nodes", "only \"all\" is supported");
    if (c["mode"]) cfg.consistency.mode = r.mode(c["mode"], "consistency.mode");
    if (c["tolerance"]) {
      cfg.consistency.tolerance = r.number(c["tolerance"], "consistency.tolerance");
      if (cfg.consistency.tolerance < 0) r.fail(c["tolerance"], "consistency.tolerance", "must be >= 0");
    }
    if (c["steps"]) cfg.consistency.steps = r.intset(c["steps"], "consistency.steps");
  }

  if (const auto& c = root["integrity"]) {
    r.check_keys(c, "integrity", {"tensors", "steps"});
    if (!c["tensors"]) r.fail(c, "integrity.tensors", "a list of tensor globs whose edges get hash probes");
    cfg.integrity.tensors = r.strings(c["tensors"], "integrity.tensors");
    for (const auto& g : cfg.integrity.tensors) r.glob(c["tensors"], "integrity.tensors", g);
    if (c["steps"]) cfg.integrity.steps = r.intset(c["steps"], "integrity.steps");
  }

  if (const auto& c = root["compare"]) {
    r.check_keys(c, "compare", {"enabled", "ops", "decompose_fused", "criteria", "max_store_bytes"});
    cfg.compare.enabled = c["enabled"] ? r.boolean(c["enabled"], "compare.enabled") : true;
    if (c["ops"]) {
      cfg.compare.ops = r.strings(c["ops"], "compare.ops");
      for (const auto& g : cfg.compare.ops) r.glob(c["ops"], "compare.ops", g);
    }
    if (c["decompose_fused"]) cfg.compare.decompose_fused = r.boolean(c["decompose_fused"], "compare.decompose_fused");
    if (c["max_store_bytes"])
      cfg.compare.max_store_bytes = static_cast<std::uint64_t>(r.integer(c["max_store_bytes"], "compare.max_store_bytes", 0, INT64_MAX));
    if (const auto& k = c["criteria"]) {
      auto& cr = cfg.compare.criteria;
      r.check_keys(k, "compare.criteria",
                   {"cosine_min", "max_abs_err", "cosine_hard_min", "max_abs_err_hard", "mean_rel_err", "max_rel_err", "max_ulp"});
      if (k["cosine_min"]) cr.cosine_min = r.number(k["cosine_min"], "compare.criteria.cosine_min");
      if (k["max_abs_err"]) cr.max_abs_err = r.number(k["max_abs_err"], "compare.criteria.max_abs_err");
      if (k["cosine_hard_min"]) cr.cosine_hard_min = r.number(k["cosine_hard_min"], "compare.criteria.cosine_hard_min");
      if (k["max_abs_err_hard"]) cr.max_abs_err_hard = r.number(k["max_abs_err_hard"], "compare.criteria.max_abs_err_hard");
      if (k["mean_rel_err"]) cr.mean_rel_err = per_dtype(r, k["mean_rel_err"], "compare.criteria.mean_rel_err");
      if (k["max_rel_err"]) cr.max_rel_err = per_dtype(r, k["max_rel_err"], "compare.criteria.max_rel_err");
      if (k["max_ulp"]) cr.max_ulp = static_cast<std::uint64_t>(r.integer(k["max_ulp"], "compare.criteria.max_ulp", 0, INT64_MAX));
      for (const char* f : {"cosine_min", "cosine_hard_min"})
        if (k[f] && (r.number(k[f], f) < -1 || r.number(k[f], f) > 1))
          r.fail(k[f], std::string("compare.criteria.") + f, "cosine bounds lie in [-1, 1]");
    }
  }
}


}  // namespace probelab::probes::detail
