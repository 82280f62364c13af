#include "sim/scenario/campaign_model.h"

#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>

#include "graph/graph.h"
#include "injectors/injector.h"

namespace probelab::sim {

namespace {

const std::vector<std::string> kBitflipTargets = {"hbm", "l1", "l0a", "l0b", "l0c", "accumulator", "ub"};

std::optional<std::uint64_t> parse_u64(const std::string& s) {
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::vector<std::string> string_list(const YamlView& v) {
  std::vector<std::string> out;
  if (v.is_scalar()) {
    out.push_back(v.str());
  } else {
    for (const auto& item : v.items()) out.push_back(item.str());
  }
  if (out.empty()) v.fail("a non-empty list of strings", v.describe());
  return out;
}

// A list of globs (string_list), each checked.
std::vector<std::string> glob_list(const YamlView& v) {
  std::vector<std::string> out = string_list(v);
  for (const auto& g : out) {
    try {
      (void)graph::glob_match(g, "");
    } catch (const graph::GraphError& e) {
      v.fail("globs over op names ('*' any text, '?' one character, '[...]' a class)", e.what());
    }
  }
  return out;
}

// Parameter names the injector kind accepts.
std::set<std::string> kind_params(const inject::InjectorInfo& info) {
  std::set<std::string> out;
  for (const auto& p : info.params) out.insert(p.name);
  return out;
}

std::string where_of(const YamlView& v) {
  const YAML::Mark m = v.mark();
  if (m.is_null()) return fmt::format("{}: {}", v.file(), v.path());
  return fmt::format("{}:{}:{}: {}", v.file(), m.line + 1, m.column + 1, v.path());
}

}  // namespace

const std::vector<std::string>& campaign_keys() {
  static const std::vector<std::string> k = {"trials",   "seed",          "sampling",   "golden_runs",
                                             "envelope", "sdc_tolerance", "clean_runs", "timeout",
                                             "faults"};
  return k;
}

const std::vector<std::string>& fault_entry_keys() {
  static const std::vector<std::string> k = {"kind",  "weight",  "ops",  "op_types", "tensor", "element", "steps",
                                             "ranks", "targets", "bits", "flips",    "cycle", "choose", "set"};
  return k;
}

std::vector<std::uint64_t> parse_index_list(const YamlView& v) {
  std::set<std::uint64_t> out;
  auto add = [&](const YamlView& item) {
    if (!item.is_scalar()) item.fail("an integer or an \"a-b\" range", item.describe());
    const std::string s = item.str();
    if (auto n = parse_u64(s)) {
      out.insert(*n);
      return;
    }
    const auto dash = s.find('-');
    if (dash != std::string::npos) {
      auto a = parse_u64(s.substr(0, dash)), b = parse_u64(s.substr(dash + 1));
      if (a && b && *a <= *b && *b - *a < 1000000) {
        for (auto i = *a; i <= *b; ++i) out.insert(i);
        return;
      }
    }
    item.fail("a non-negative integer, an \"a-b\" range or \"all\"", "'" + s + "'");
  };
  if (v.is_scalar()) {
    if (v.str() == "all") return {};
    add(v);
  } else if (v.is_seq()) {
    for (const auto& item : v.items()) add(item);
    if (out.empty()) v.fail("a non-empty list (or \"all\")", "an empty list");
  } else {
    v.fail("an integer, an \"a-b\" range, a list of those or \"all\"", v.describe());
  }
  return {out.begin(), out.end()};
}

FaultEntry parse_fault_entry(const YamlView& v) {
  if (!v.is_map()) v.fail("a fault entry mapping with a 'kind'", v.describe());
  v.expect_keys(fault_entry_keys());
  FaultEntry e;
  e.where = where_of(v);
  const auto& registry = inject::InjectorRegistry::instance();
  std::vector<std::string> kinds;
  for (const auto& [name, info] : registry.all()) kinds.push_back(name);
  e.kind = v["kind"].str_in(kinds);
  const std::set<std::string> params = kind_params(*registry.find(e.kind));
  auto needs = [&](const char* key, const std::string& param, const std::string& why) {
    if (v.has(key) && !params.count(param))
      v[key].fail(fmt::format("no '{}' for kind {} ({})", key, e.kind, why), "'" + std::string(key) + "'");
  };
  needs("ops", "op", "it has no op site");
  needs("op_types", "op", "it has no op site");
  needs("steps", "step", "it has no step site");
  needs("ranks", "rank", "it has no rank site");
  needs("element", "element", "it corrupts no tensor element");
  if (v.has("tensor") && !(e.kind == "nan" || e.kind == "inf" || e.kind == "value"))
    v["tensor"].fail("'tensor' only for the kinds nan, inf and value", "kind " + e.kind);
  if (v.has("targets") && e.kind != "bitflip") v["targets"].fail("'targets' only for kind bitflip", "kind " + e.kind);
  if (v.has("flips") && e.kind != "bitflip") v["flips"].fail("'flips' only for kind bitflip", "kind " + e.kind);
  if (v.has("cycle") && e.kind != "bitflip") v["cycle"].fail("'cycle' only for kind bitflip", "kind " + e.kind);
  if (v.has("bits") && e.kind != "bitflip" && e.kind != "stuck_at")
    v["bits"].fail("'bits' only for the kinds bitflip and stuck_at", "kind " + e.kind);

  e.weight = v.number_or("weight", 1.0);
  if (!(e.weight > 0)) v["weight"].fail("a positive weight", v["weight"].describe());
  if (auto x = v.get("ops")) e.ops = glob_list(*x);
  if (auto x = v.get("op_types")) e.op_types = glob_list(*x);
  if (auto x = v.get("tensor")) {
    e.tensors.clear();
    YamlView t = *x;
    for (const auto& s : string_list(t)) {
      if (s != "output" && s != "input") t.fail("output or input (or a list of them)", "'" + s + "'");
      if (std::find(e.tensors.begin(), e.tensors.end(), s) == e.tensors.end()) e.tensors.push_back(s);
    }
  }
  if (auto x = v.get("element")) {
    if (!(x->is_scalar() && x->str() == "random")) e.element = x->uinteger();
  }
  if (auto x = v.get("steps")) e.steps = parse_index_list(*x);
  if (auto x = v.get("ranks")) e.ranks = parse_index_list(*x);
  if (auto x = v.get("targets")) {
    for (const auto& item : (x->is_scalar() ? std::vector<YamlView>{*x} : x->items())) {
      const std::string t = item.str_in(kBitflipTargets);
      if (std::find(e.targets.begin(), e.targets.end(), t) == e.targets.end()) e.targets.push_back(t);
    }
  }
  if (auto x = v.get("bits")) {
    e.bits = parse_index_list(*x);
    if (e.bits.empty()) x->fail("explicit bit positions (\"all\" is the default: omit the key)", "all");
    if (e.bits.back() > 63) x->fail("bit positions in 0..63", fmt::format("{}", e.bits.back()));
  }
  if (auto x = v.get("flips")) e.flips = static_cast<int>(x->integer(1, 64));
  if (auto x = v.get("cycle")) e.live_cycles = x->str_in({"live", "any"}) == "live";
  if (auto x = v.get("choose")) {
    for (const auto& key : x->keys()) {
      YamlView values = (*x)[key];
      if (key == "kind" || key == "seed") values.fail("a descriptor key other than kind and seed", "'" + key + "'");
      if (!params.count(key))
        values.fail(fmt::format("a parameter of kind {} (`probelab list injectors`)", e.kind), "'" + key + "'");
      std::vector<YAML::Node> list;
      for (const auto& item : values.items()) {
        // Integer ranges "a-b" expand to their values.
        if (item.is_scalar() && item.str().find('-') != std::string::npos && item.str().front() != '-') {
          bool range = true;
          std::vector<std::uint64_t> idx;
          try {
            idx = parse_index_list(item);
          } catch (const ScenarioError&) {
            range = false;
          }
          if (range) {
            for (auto i : idx) list.emplace_back(i);
            continue;
          }
        }
        list.push_back(item.node());
      }
      if (list.empty()) values.fail("a non-empty list of values to draw from", "an empty list");
      e.choose.emplace_back(key, std::move(list));
    }
  }
  if (auto x = v.get("set")) {
    if (!x->is_map()) x->fail("a mapping of descriptor keys", x->describe());
    for (const auto& key : x->keys()) {
      if (key == "kind" || key == "seed") (*x)[key].fail("a descriptor key other than kind and seed", "'" + key + "'");
      if (!params.count(key))
        (*x)[key].fail(fmt::format("a parameter of kind {} (`probelab list injectors`)", e.kind), "'" + key + "'");
    }
    e.set = x->node();
  }
  return e;
}

std::vector<std::pair<std::string, std::string>> CleanRuns::sets(std::uint64_t k) const {
  auto mix = [](std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  };
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, values] : vary) {
    std::uint64_t h = mix(k);
    for (char c : key) h = mix(h ^ static_cast<unsigned char>(c));
    out.emplace_back(key, values[h % values.size()]);
  }
  return out;
}

FaultModel parse_fault_model(const YamlView& v) {
  if (!v.is_map()) v.fail("a mapping (the campaign's fault model)", v.describe());
  v.expect_keys(campaign_keys());
  FaultModel m;
  if (auto x = v.get("trials")) m.trials = static_cast<std::uint64_t>(x->integer(0, 100000000));
  if (auto x = v.get("seed")) m.seed = x->uinteger();
  if (auto x = v.get("sampling")) m.sampling = x->str_in({"uniform", "per_kind", "per_op"});
  m.golden_runs = static_cast<int>(v.int_or("golden_runs", m.golden_runs, 1, 64));
  if (auto x = v.get("envelope")) {
    x->expect_keys({"atol", "rtol"});
    m.atol = x->number_or("atol", 0.0);
    m.rtol = x->number_or("rtol", 0.0);
    if (m.atol < 0) (*x)["atol"].fail("a non-negative tolerance", (*x)["atol"].describe());
    if (m.rtol < 0) (*x)["rtol"].fail("a non-negative tolerance", (*x)["rtol"].describe());
  }
  if (auto x = v.get("sdc_tolerance")) {
    x->expect_keys({"max_ulp", "rtol"});
    if (auto u = x->get("max_ulp")) m.sdc_max_ulp = u->uinteger();
    m.sdc_rtol = x->number_or("rtol", 0.0);
    if (m.sdc_rtol < 0) (*x)["rtol"].fail("a non-negative relative deviation", (*x)["rtol"].describe());
  }
  if (auto x = v.get("clean_runs")) {
    x->expect_keys({"runs", "vary"});
    if (auto r = x->get("runs")) m.clean.runs = static_cast<std::uint64_t>(r->integer(0, 1000000));
    if (auto vary = x->get("vary")) {
      if (!vary->is_map()) vary->fail("a mapping of --set keys to value lists or \"a-b\" ranges", vary->describe());
      for (const auto& key : vary->keys()) {
        const YamlView val = (*vary)[key];
        std::vector<std::string> values;
        if (val.is_scalar()) {
          const std::string s = val.str();
          const auto dash = s.find('-');
          std::uint64_t lo = 0, hi = 0;
          try {
            if (dash == std::string::npos || dash == 0) throw std::invalid_argument("no range");
            std::size_t p1 = 0, p2 = 0;
            lo = std::stoull(s.substr(0, dash), &p1);
            hi = std::stoull(s.substr(dash + 1), &p2);
            if (p1 != dash || p2 != s.size() - dash - 1 || hi < lo) throw std::invalid_argument("bad range");
          } catch (const std::exception&) {
            val.fail("a list of values or an ascending integer range \"a-b\"", val.describe());
          }
          if (hi - lo >= 10000000) val.fail("a range of at most 10^7 values", val.describe());
          for (std::uint64_t i = lo; i <= hi; ++i) values.push_back(std::to_string(i));
        } else {
          for (const auto& item : val.items()) {
            if (!item.is_scalar()) item.fail("a scalar value", item.describe());
            values.push_back(item.str());
          }
        }
        if (values.empty()) val.fail("at least one value", val.describe());
        m.clean.vary.emplace_back(key, std::move(values));
        m.clean.vary_sources.push_back({val.mark(), val.is_scalar()});
      }
    }
  }
  if (auto x = v.get("timeout")) {
    x->expect_keys({"factor", "min_seconds"});
    m.timeout_factor = x->number_or("factor", m.timeout_factor);
    m.timeout_min_seconds = x->number_or("min_seconds", m.timeout_min_seconds);
    if (!(m.timeout_factor >= 1)) (*x)["factor"].fail("a factor >= 1", (*x)["factor"].describe());
    if (!(m.timeout_min_seconds >= 1))
      (*x)["min_seconds"].fail("at least 1 second", (*x)["min_seconds"].describe());
  }
  if (auto x = v.get("faults"))
    for (const auto& item : x->items()) m.faults.push_back(parse_fault_entry(item));
  return m;
}

}  // namespace probelab::sim
