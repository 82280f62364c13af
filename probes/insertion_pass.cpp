#include "probes/insertion_pass.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "graph/user_regex.h"
#include "graph/autodiff.h"

namespace probelab::probes {

namespace {

bool direction_ok(DirectionFilter f, graph::Direction d) {
  switch (f) {
    case DirectionFilter::All: return true;
    case DirectionFilter::Forward: return d == graph::Direction::Forward;
    case DirectionFilter::Backward: return d == graph::Direction::Backward;
    case DirectionFilter::Optimizer: return d == graph::Direction::Optimizer;
  }
  return true;
}

bool any_glob(const std::vector<std::string>& globs, const std::string& name) {
  for (const auto& g : globs)
    if (graph::glob_match(g, name)) return true;
  return false;
}

int detail(CaptureMode m) { return m == CaptureMode::Full ? 2 : m == CaptureMode::Statistics ? 1 : 0; }

graph::Format format_of(const graph::Graph& g, const std::string& tensor) {
  const auto* t = g.find_tensor(tensor);
  return t ? t->desc.format : graph::Format::ND;
}

struct Key {
  std::uint32_t op;
  int kind;  // ProbeKind
  bool is_output;  // input edges first
  std::uint16_t index;
  int serial;  // several breakpoints on one edge
  auto operator<=>(const Key&) const = default;
};

}  // namespace

namespace {

bool matches(const OpRef& ref, const graph::Op& op) {
  if (!ref.type.empty()) return op_type_matches(ref.type, op.type) && direction_ok(ref.direction, op.direction);
  return any_glob(ref.globs, op.name) && direction_ok(ref.direction, op.direction);
}

bool any_type(const std::vector<std::string>& types, const std::string& op_type) {
  for (const auto& t : types)
    if (op_type_matches(t, op_type)) return true;
  return false;
}

// Ops of the watch point's range, in execution order; every op when it has none.
std::optional<std::set<std::uint32_t>> range_ops(const graph::Graph& g, const WatchPoint& wp) {
  if (!wp.range) return std::nullopt;
  std::vector<std::uint32_t> order;
  for (std::uint32_t id : g.topo_order())
    if (!is_probe_op(g.op(id))) order.push_back(id);
  auto find = [&](const OpRef& ref, bool last) -> std::optional<std::size_t> {
    std::int64_t seen = 0;
    std::optional<std::size_t> hit;
    for (std::size_t i = 0; i < order.size(); ++i) {
      if (!matches(ref, g.op(order[i]))) continue;
      if (!ref.type.empty()) {
        if (seen++ == ref.index) return i;
        continue;
      }
      hit = i;
      if (!last) return hit;
    }
    return hit;
  };
  const auto a = find(wp.range->first, false), b = find(wp.range->second, true);
  std::set<std::uint32_t> in;
  if (a && b)
    for (std::size_t i = *a; i <= *b; ++i) in.insert(order[i]);
  return in;
}

}  // namespace

bool op_type_matches(std::string_view api, std::string_view op_type) {
  auto norm = [](std::string_view s) {
    std::string o;
    for (char c : s)
      if (c != '_') o.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    return o;
  };
  std::string a = norm(api);
  const std::string t = norm(op_type);
  static const std::pair<const char*, const char*> kAliases[] = {
      {"conv1d", "conv"}, {"conv2d", "conv"}, {"conv3d", "conv"}, {"linear", "matmul"},
      {"mm", "matmul"},   {"bmm", "matmul"},  {"addmm", "matmul"}};
  for (const auto& [from, to] : kAliases)
    if (a == from) a = to;
  return a == t || a + "ization" == t || a + "alization" == t;
}

std::vector<SelectedEdge> select_edges(const graph::Graph& g, const WatchPoint& wp) {
  std::optional<std::regex> scope;
  if (wp.scope) {
    try {
      scope.emplace(graph::compile_user_regex(*wp.scope));
    } catch (const graph::GraphError& e) {
      throw ConfigError("<config>", 0, fmt::format("watch point '{}' scope", wp.id),
                        fmt::format("invalid regex '{}': {}", *wp.scope, e.what()));
    }
  }
  const auto in_range = range_ops(g, wp);
  std::vector<SelectedEdge> out;
  for (const auto& op : g.ops()) {
    if (is_probe_op(op) || !op.debug.capture) continue;
    if (!direction_ok(wp.direction, op.direction)) continue;
    if (scope && !graph::user_regex_match(op.scope, *scope)) continue;
    if (in_range && !in_range->count(op.id)) continue;
    bool op_hit = any_glob(wp.patterns, op.name) || any_type(wp.types, op.type);
    if (wp.capture_inputs)
      for (std::size_t i = 0; i < op.inputs.size(); ++i)
        if (!op.inputs[i].empty() && (op_hit || any_glob(wp.patterns, op.inputs[i])))
          out.push_back({op.id, static_cast<std::uint16_t>(i), true});
    if (wp.capture_outputs)
      for (std::size_t i = 0; i < op.outputs.size(); ++i)
        if (op_hit || any_glob(wp.patterns, op.outputs[i])) out.push_back({op.id, static_cast<std::uint16_t>(i), false});
  }
  return out;
}

std::vector<std::uint32_t> InsertionResult::before(std::uint32_t op_id) const {
  auto it = before_.find(op_id);
  return it == before_.end() ? std::vector<std::uint32_t>{} : it->second;
}

std::vector<std::uint32_t> InsertionResult::after(std::uint32_t op_id) const {
  auto it = after_.find(op_id);
  return it == after_.end() ? std::vector<std::uint32_t>{} : it->second;
}

const ProbeSite* InsertionResult::site(std::uint32_t probe_op_id) const {
  auto it = by_probe_op.find(probe_op_id);
  return it == by_probe_op.end() ? nullptr : &probes[it->second];
}

std::string no_selection_warning(const WatchPoint& wp) {
  return fmt::format("watch point '{}' selects no op or tensor", wp.id);
}

InsertionResult insert_probes(graph::Graph& g, const ProbeConfig& cfg) {
  register_probe_ops();
  InsertionResult res;
  if (!cfg.enabled) return res;
  struct Pending {
    ProbeSite site;
    std::string condition;
    bool halt_on_exception = false;
    std::vector<std::string> wp_ids;
  };
  std::map<Key, Pending> sites;

  for (std::size_t w = 0; w < cfg.watch_points.size(); ++w) {
    const WatchPoint& wp = cfg.watch_points[w];
    auto edges = select_edges(g, wp);
    if (edges.empty()) res.warnings.push_back(no_selection_warning(wp));
    for (const auto& e : edges) {
      const graph::Op& op = g.op(e.op_id);
      const std::string& tensor = e.is_input ? op.inputs[e.index] : op.outputs[e.index];
      double rate = op.debug.sample_rate.value_or(wp.sample_rate);
      Key k{e.op_id, static_cast<int>(ProbeKind::Capture), !e.is_input, e.index, 0};
      auto [it, fresh] = sites.try_emplace(k);
      Pending& p = it->second;
      if (fresh) {
        // Inputs are captured before the op runs (an in-place op, such as an optimizer update
        // whose output shares its parameter's buffer, overwrites them), outputs after.
        const ProbePosition pos = e.is_input ? ProbePosition::Before : ProbePosition::After;
        p.site = ProbeSite{ProbeKind::Capture, pos, 0, "", op.id, op.name, tensor, e.index, e.is_input, wp.mode, rate, {}};
      } else {
        if (detail(wp.mode) > detail(p.site.mode)) p.site.mode = wp.mode;
        p.site.sample_rate = std::max(p.site.sample_rate, rate);
      }
      p.site.watch_points.push_back(w);
      p.wp_ids.push_back(wp.id);
      // breakpoints: output edges only, one per break condition (or one exception-only probe)
      if (e.is_input) continue;
      int serial = 0;
      for (const auto& c : wp.conditions) {
        if (std::find(c.actions.begin(), c.actions.end(), Action::Break) == c.actions.end()) continue;
        Key bk{e.op_id, static_cast<int>(ProbeKind::Breakpoint), true, e.index, static_cast<int>(w) * 64 + serial++};
        Pending& b = sites[bk];
        b.site = ProbeSite{ProbeKind::Breakpoint, ProbePosition::After, 0, "", op.id, op.name, tensor, e.index,
                           false, CaptureMode::Statistics, 1.0, {w}};
        b.condition = c.expr.text();
        b.halt_on_exception = wp.halt_on_exception;
        b.wp_ids = {wp.id};
      }
      if (serial == 0 && wp.halt_on_exception) {
        Key bk{e.op_id, static_cast<int>(ProbeKind::Breakpoint), true, e.index, static_cast<int>(w) * 64};
        Pending& b = sites[bk];
        b.site = ProbeSite{ProbeKind::Breakpoint, ProbePosition::After, 0, "", op.id, op.name, tensor, e.index,
                           false, CaptureMode::Statistics, 1.0, {w}};
        b.halt_on_exception = true;
        b.wp_ids = {wp.id};
      }
    }
  }

  if (cfg.consistency.enabled && cfg.consistency.sync_at_collectives) {
    for (const auto& op : g.ops()) {
      if (!is_collective_type(op.type)) continue;
      for (std::size_t i = 0; i < op.inputs.size(); ++i) {
        if (op.inputs[i].empty()) continue;
        Key k{op.id, static_cast<int>(ProbeKind::Sync), false, static_cast<std::uint16_t>(i), 0};
        sites[k] = Pending{ProbeSite{ProbeKind::Sync, ProbePosition::Before, 0, "", op.id, op.name, op.inputs[i],
                                     static_cast<std::uint16_t>(i), true, cfg.consistency.mode, 1.0, {}},
                           "", false, {"consistency"}};
      }
      for (std::size_t i = 0; i < op.outputs.size(); ++i) {
        Key k{op.id, static_cast<int>(ProbeKind::Sync), true, static_cast<std::uint16_t>(i), 0};
        sites[k] = Pending{ProbeSite{ProbeKind::Sync, ProbePosition::After, 0, "", op.id, op.name, op.outputs[i],
                                     static_cast<std::uint16_t>(i), false, cfg.consistency.mode, 1.0, {}},
                           "", false, {"consistency"}};
      }
    }
  }

  if (!cfg.integrity.tensors.empty()) {
    auto add = [&](const graph::Op& op, bool is_input, std::size_t i, const std::string& tensor) {
      if (is_probe_op(op)) return;
      Key k{op.id, static_cast<int>(ProbeKind::Integrity), !is_input, static_cast<std::uint16_t>(i), 0};
      sites[k] = Pending{ProbeSite{ProbeKind::Integrity, is_input ? ProbePosition::Before : ProbePosition::After, 0, "",
                                   op.id, op.name, tensor, static_cast<std::uint16_t>(i), is_input, CaptureMode::Hash,
                                   1.0, {}},
                         "", false, {"integrity"}};
    };
    std::size_t selected = 0;
    for (const auto& [name, info] : g.tensors()) {
      if (!any_glob(cfg.integrity.tensors, name)) continue;
      const auto readers = g.consumers(name);
      if (readers.empty()) continue;
      ++selected;
      // the write side: the producer, or for a tensor updated in place the op writing its update
      std::string written = name;
      if (!g.producer(name) && g.producer(graph::updated_name(name))) written = graph::updated_name(name);
      if (const graph::Op* p = g.producer(written))
        for (std::size_t i = 0; i < p->outputs.size(); ++i)
          if (p->outputs[i] == written) add(*p, false, i, written);
      for (const graph::Op* c : readers)
        for (std::size_t i = 0; i < c->inputs.size(); ++i)
          if (c->inputs[i] == name) add(*c, true, i, name);
    }
    if (selected == 0) res.warnings.push_back("integrity.tensors select no tensor with a consumer");
  }

  std::map<std::pair<std::uint32_t, std::uint16_t>, int> breaks_on_edge;  // for unique names
  for (auto& [k, p] : sites) {
    ProbeSite& s = p.site;
    const char* kind = s.kind == ProbeKind::Capture     ? "probe_capture"
                       : s.kind == ProbeKind::Sync      ? "probe_sync"
                       : s.kind == ProbeKind::Integrity ? "probe_integrity"
                                                        : "probe_break";
    std::string name = fmt::format("{}/{}:{}{}", s.target_op, kind, s.is_input ? "in" : "out", s.index);
    if (s.kind == ProbeKind::Breakpoint)
      if (int n = breaks_on_edge[{s.target_op_id, s.index}]++; n > 0) name += fmt::format("#{}", n);
    graph::Op op;
    op.name = name;
    op.type = std::string(s.kind == ProbeKind::Capture     ? kProbeCaptureType
                          : s.kind == ProbeKind::Sync      ? kProbeSyncType
                          : s.kind == ProbeKind::Integrity ? kProbeIntegrityType
                                                           : kProbeBreakpointType);
    const graph::Op& target = g.op(s.target_op_id);
    op.scope = target.scope;
    op.direction = target.direction;
    op.inputs = {s.tensor};
    std::string ids;
    for (const auto& id : p.wp_ids) ids += (ids.empty() ? "" : ",") + id;
    op.attrs = {{"target", s.tensor},
                {"target_op", s.target_op},
                {"is_input", std::int64_t{s.is_input}},
                {"output_index", std::int64_t{s.index}},
                {"position", std::string(s.position == ProbePosition::Before ? "before" : "after")},
                {"source_format", std::string(graph::format_name(format_of(g, s.tensor)))},
                {"watch_point", ids},
                {"mode", std::string(capture_mode_name(s.mode))},
                {"sample_rate", s.sample_rate}};
    if (s.kind == ProbeKind::Breakpoint) {
      op.attrs["condition"] = p.condition;
      op.attrs["halt_on_exception"] = std::int64_t{p.halt_on_exception};
    }
    const graph::Op& added = g.add_op(std::move(op));
    s.probe_op_id = added.id;
    s.probe_op = added.name;
    res.by_probe_op[added.id] = res.probes.size();
    (s.position == ProbePosition::Before ? res.before_ : res.after_)[s.target_op_id].push_back(added.id);
    res.probes.push_back(s);
  }
  return res;
}

}  // namespace probelab::probes
