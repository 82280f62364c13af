// What the run cost and what was done to it: capture statistics, per-op cycles, injections and
// the remaining details (sections of report.html, sim/html/report_html.h).
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "sim/html/html_doc.h"
#include "sim/html/report_sections.h"

namespace probelab::html::sections {

using nlohmann::json;

namespace {

constexpr std::size_t kTopOps = 40;

std::uint64_t u64(const json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer()) return static_cast<std::uint64_t>(std::max<std::int64_t>(0, v.get<std::int64_t>()));
  if (v.is_number_float()) return static_cast<std::uint64_t>(std::max(0.0, v.get<double>()));
  return 0;
}

std::string pct(const json& v) { return v.is_number() ? num(v.get<double>(), 3) + " %" : std::string("n/a"); }

std::string bar(std::uint64_t v, std::uint64_t max, const char* cls = "") {
  const int w = max ? static_cast<int>(200.0 * static_cast<double>(v) / static_cast<double>(max) + 0.5) : 0;
  return fmt::format("<span class=\"bar {}\" style=\"width:{}px\"></span>", cls, w);
}

std::string plain_cell(const std::string&, const json& v) { return text(v, 200); }

struct OpCost {
  std::string op, type;
  std::uint64_t cycles = 0, probe = 0, tasks = 0, sum = 0;  // cycles, probe: slowest rank; sum: all ranks
  std::size_t ranks = 0, order = 0;
};

}  // namespace

std::string capture(const json& r) {
  const json& c = field(r, "capture");
  if (!c.is_object()) return note("probes are off in this run: nothing was captured");
  static const std::vector<std::pair<const char*, const char*>> kLabels = {
      {"records", "records produced"}, {"drained", "records drained"}, {"dropped", "records dropped"},
      {"corrupt", "corrupt records"}, {"bytes", "bytes drained"}, {"device_bytes", "device bytes"},
      {"stall_cycles", "stall cycles"}, {"buffers", "buffer swaps"}, {"dump_files", "dump files"},
      {"dump_bytes", "dump bytes"}, {"cycles_with_probes", "step cycles with probes"},
      {"cycles_without_probes", "step cycles without probes"}, {"overhead_percent", "overhead (step cycles)"},
      {"total_overhead_percent", "overhead (whole program)"}};
  std::vector<std::pair<std::string, std::string>> kv;
  for (const auto& [k, label] : kLabels)
    if (c.contains(k))
      kv.emplace_back(label, std::string(k).find("percent") != std::string::npos ? pct(c[k]) : num(c[k]));
  for (const auto& [k, v] : c.items())
    if (std::none_of(kLabels.begin(), kLabels.end(), [&](const auto& l) { return k == l.first; }))
      kv.emplace_back(k, text(v));
  std::string out = kv_grid(kv);
  const json& vars = field(r, "variants");
  if (vars.is_array() && !vars.empty()) {
    Table t({"variant", "sets", "status", "cycles", "overhead", "records", "dropped", "stall cycles"});
    for (const auto& v : vars) {
      const json& vc = field(v, "capture");
      t.row({text(field(v, "name")), text(field(v, "sets")), text(field(v, "status")), num(field(v, "cycles")),
             vc.is_object() ? pct(field(vc, "overhead_percent")) : "-", num(field(vc, "records")),
             num(field(vc, "dropped")), num(field(vc, "stall_cycles"))});
    }
    out += "<h3>Variants</h3>\n" + t.render();
  }
  return out;
}

std::string cycles(const json& r) {
  const json& ops = field(r, "ops");
  if (!ops.is_array() || ops.empty()) return note("no per-op cycle data");
  std::map<std::string, OpCost> by_op;
  for (const auto& o : ops) {
    const std::string name = o.value("op", std::string("?"));
    auto [it, fresh] = by_op.try_emplace(name);
    OpCost& c = it->second;
    if (fresh) {
      c.op = name;
      c.type = o.value("type", std::string());
      c.order = by_op.size();
    }
    c.cycles = std::max(c.cycles, u64(field(o, "cycles")));
    c.probe = std::max(c.probe, u64(field(o, "probe_cycles")));
    c.tasks += u64(field(o, "tasks")) + u64(field(o, "probe_tasks"));
    c.sum += u64(field(o, "cycles")) + u64(field(o, "probe_cycles"));
    ++c.ranks;
  }
  std::vector<OpCost> list;
  std::uint64_t total = 0, max = 0;
  for (auto& [k, c] : by_op) {
    total += c.cycles + c.probe;
    max = std::max(max, c.cycles + c.probe);
    list.push_back(c);
  }
  std::sort(list.begin(), list.end(), [](const OpCost& a, const OpCost& b) {
    return a.cycles + a.probe != b.cycles + b.probe ? a.cycles + a.probe > b.cycles + b.probe : a.order < b.order;
  });
  const std::size_t ranks = list.empty() ? 0 : list.front().ranks;
  std::string out = note(fmt::format(
      "device cycles of each op's tasks (kernel or collective, and probe tasks), the slowest of {} rank(s); "
      "{} ops, {} cycles in all; blue: kernel, orange: probe tasks",
      ranks, list.size(), total));
  Table t({"op", "type", "cycles", "probe cycles", "share", "tasks", ""});
  for (std::size_t i = 0; i < list.size() && i < kTopOps; ++i) {
    const OpCost& c = list[i];
    t.row({text(json(c.op)), text(json(c.type)), "<span class=\"mono\">" + count(c.cycles) + "</span>",
           "<span class=\"mono\">" + count(c.probe) + "</span>",
           total ? num(100.0 * static_cast<double>(c.cycles + c.probe) / static_cast<double>(total), 3) + " %" : "-",
           count(c.tasks), bar(c.cycles, max) + bar(c.probe, max, "probe")});
  }
  out += t.render();
  if (list.size() > kTopOps) {
    std::uint64_t rest = 0;
    for (std::size_t i = kTopOps; i < list.size(); ++i) rest += list[i].cycles + list[i].probe;
    out += note(fmt::format("{} more ops with {} cycles", list.size() - kTopOps, rest));
  }
  std::map<std::string, std::pair<std::uint64_t, std::size_t>> by_type;
  for (const auto& c : list) {
    by_type[c.type].first += c.cycles + c.probe;
    ++by_type[c.type].second;
  }
  std::vector<std::pair<std::string, std::pair<std::uint64_t, std::size_t>>> types(by_type.begin(), by_type.end());
  std::stable_sort(types.begin(), types.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  Table tt({"op type", "ops", "cycles", "share", ""});
  for (const auto& [type, v] : types)
    tt.row({text(json(type)), std::to_string(v.second), "<span class=\"mono\">" + count(v.first) + "</span>",
            total ? num(100.0 * static_cast<double>(v.first) / static_cast<double>(total), 3) + " %" : "-",
            bar(v.first, types.front().second.first)});
  out += "<h3>By op type</h3>\n" + tt.render();
  const json& per_step = field(field(r, "cycles"), "per_step");
  if (per_step.is_array() && !per_step.empty() && per_step[0].is_array()) {
    const std::size_t nr = per_step.size(), ns = per_step[0].size();
    std::vector<std::string> head = {"step"};
    if (nr <= 8)
      for (std::size_t k = 0; k < nr; ++k) head.push_back(fmt::format("rank {}", k));
    else
      head.insert(head.end(), {"fastest rank", "slowest rank", "slowest", "spread"});
    Table st(head);
    for (std::size_t s = 0; s < ns; ++s) {
      std::vector<std::string> row = {std::to_string(s)};
      std::uint64_t lo = UINT64_MAX, hi = 0;
      std::size_t lo_r = 0, hi_r = 0;
      for (std::size_t k = 0; k < nr; ++k) {
        const std::uint64_t v = per_step[k].is_array() && s < per_step[k].size() ? u64(per_step[k][s]) : 0;
        if (nr <= 8) row.push_back("<span class=\"mono\">" + count(v) + "</span>");
        if (v < lo) lo = v, lo_r = k;
        if (v > hi) hi = v, hi_r = k;
      }
      if (nr > 8)
        row.insert(row.end(), {fmt::format("{} ({})", lo_r, count(lo)), fmt::format("{} ({})", hi_r, count(hi)),
                               count(hi), lo ? num(100.0 * static_cast<double>(hi - lo) / static_cast<double>(lo), 3) + " %" : "-"});
      st.row(std::move(row));
    }
    out += "<h3>Cycles per step</h3>\n" + st.render();
  }
  return out;
}

std::string injections(const json& r) {
  const json& inj = field(r, "injections");
  if (!inj.is_array() || inj.empty()) return note("nothing was injected");
  json rows = json::array();
  for (const auto& i : inj) {
    json row = i;
    if (i.contains("proof") && i["proof"].is_array()) {
      std::string proof;
      std::size_t k = 0;
      for (const auto& p : i["proof"]) {
        if (k++ == 4) {
          proof += fmt::format("; {} more", i["proof"].size() - 4);
          break;
        }
        proof += (proof.empty() ? "" : "; ") + text(p, 2000);
      }
      row["proof"] = proof;
    }
    rows.push_back(std::move(row));
  }
  auto cell = [](const std::string& k, const json& v) -> std::string {
    if (k == "fired" && v.is_boolean()) return v.get<bool>() ? badge("fired", "ok") : badge("not fired", "warn");
    if (k == "proof") return v.is_string() ? v.get<std::string>() : text(v);  // already escaped
    return text(v, 300);
  };
  return json_table(rows, {"index", "kind", "fired", "applications", "descriptor", "proof"}, 200, cell);
}

std::string details(const json& r) {
  std::string out;
  out += "<h3>Float status per step</h3>\n" +
         json_table(field(r, "float_status"), {"rank", "step", "flags"}, 200, plain_cell);
  out += "<h3>Breakpoints</h3>\n" +
         json_table(field(r, "breakpoints"), {"op", "step", "rank", "condition", "halt_cycle", "resume_cycle"}, 200,
                    plain_cell);
  out += "<h3>Rules fired</h3>\n" + json_table(field(r, "rules_fired"), {}, 200, plain_cell);
  // Rewind: the two passes link each other (the re-execution lives in rewind/ of this run).
  const json& rw = field(r, "rewind");
  if (rw.is_object()) {
    const json& q = field(rw, "requested");
    out += "<h3>Rewind</h3>\n<p>" +
           text(json(fmt::format("{} '{}' at step {}: re-executed steps {}..{} ({}, {}): {}", q.value("by", "?"),
                                 q.value("expression", "?"), q.value("step", 0), rw.value("from_step", 0),
                                 rw.value("to_step", 0), rw.value("capture", "?"), field(rw, "ops").dump(),
                                 rw.value("reproduced", false) ? "reproduced" : "not reproduced"))) +
           " &mdash; <a href=\"rewind/report.html\">the re-execution</a></p>\n";
  }
  if (field(r, "rewind_of").is_object())
    out += "<h3>Rewind</h3>\n<p>This run is the re-execution a rewind asked for at step " +
           text(field(field(r, "rewind_of"), "requested")["step"]) + " &mdash; <a href=\"../report.html\">the run</a></p>\n";
  const json& qz = field(r, "quantization");
  if (qz.is_object()) {
    json rows = json::array();
    for (const auto& l : field(qz, "layers"))
      for (const char* operand : {"activations", "weights"})
        if (l.contains(operand)) {
          const json& o = l[operand];
          rows.push_back({{"op", l.value("op", "?")}, {"operand", operand}, {"format", o.value("format", "?")},
                          {"scaling", o.value("scaling", "?")}, {"saturated", o.value("saturated", 0)},
                          {"flushed", o.value("underflow", 0)}, {"subnormal", o.value("subnormal", 0)},
                          {"amax max", field(field(o, "amax"), "max")}});
        }
    out += "<h3>Quantization</h3>\n" +
           json_table(rows, {"op", "operand", "format", "scaling", "saturated", "flushed", "subnormal", "amax max"}, 400,
                      plain_cell);
  }
  const json& losses = field(r, "losses");
  if (losses.is_array() && !losses.empty()) {
    Table t({"rank", "loss per step"});
    for (std::size_t k = 0; k < losses.size() && k < 64; ++k) t.row({std::to_string(k), text(losses[k], 400)});
    out += "<h3>Losses</h3>\n" + t.render();
    if (losses.size() > 64) out += note(fmt::format("{} more ranks in report.json", losses.size() - 64));
  }
  const json& w = field(r, "warnings");
  out += "<h3>Warnings</h3>\n";
  if (!w.is_array() || w.empty()) return out + note("none");
  out += "<ul>";
  for (std::size_t i = 0; i < w.size() && i < 200; ++i) out += "<li>" + text(w[i], 600) + "</li>";
  return out + "</ul>\n";
}

}  // namespace probelab::html::sections
