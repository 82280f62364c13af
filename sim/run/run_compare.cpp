#include "sim/run/run_compare.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "probes/dump_writer.h"
#include "sim/run/run_manifests.h"
#include "sim/scenario/scenario_error.h"

namespace probelab::sim {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Capture {
  fs::path dir;
  fs::path manifest_file;
  const json* manifest = nullptr;
  json entry;
  std::size_t index = 0;  // position in its manifest
  std::uint64_t position = 0;  // the op's place in its rank's executed order (see run_compare.h)
};

using Key = std::tuple<std::uint32_t, std::uint32_t, std::string, std::string>;  // rank, step, op, edge

struct Run {
  std::vector<std::unique_ptr<json>> manifests;
  std::map<Key, Capture> captures;
  std::vector<Key> order;
};

// (rank, op) -> the op's index in its rank's executed order: report.json `ops` of a run directory.
using ExecutedOrder = std::map<std::pair<std::uint32_t, std::string>, std::uint64_t>;

ExecutedOrder executed_order(const fs::path& root) {
  ExecutedOrder order;
  std::ifstream in(root / "report.json", std::ios::binary);
  if (!in) return order;
  const json r = json::parse(in, nullptr, false);
  if (r.is_discarded() || !r.is_object() || !r.contains("ops") || !r["ops"].is_array()) return order;
  std::map<std::uint32_t, std::uint64_t> next;  // per rank
  for (const json& o : r["ops"]) {
    if (!o.is_object() || !o.contains("op") || !o["op"].is_string()) continue;
    const std::uint32_t rank = o.contains("rank") && o["rank"].is_number_unsigned() ? o["rank"].get<std::uint32_t>() : 0;
    order.emplace(std::make_pair(rank, o["op"].get<std::string>()), next[rank]++);
  }
  return order;
}

// The op's place in the executed order: report.json's, else the op_id the dump recorded (the
// graph's topological index), else after every known op (manifest order).
std::uint64_t position_of(const ExecutedOrder& executed, std::uint32_t rank, const std::string& op, const json& e) {
  if (auto it = executed.find({rank, op}); it != executed.end()) return it->second;
  if (e.contains("op_id") && e["op_id"].is_number_unsigned()) return e["op_id"].get<std::uint64_t>();
  return UINT64_MAX;
}

// Inputs of an op before its outputs.
int edge_class(const std::string& edge) { return edge.starts_with("in") ? 0 : edge.starts_with("out") ? 1 : 2; }

// `label` ("run A"/"run B") names the run in messages; unreadable manifests go to `damaged`.
Run load_run(const fs::path& root, const std::string& label, std::vector<DamagedFile>& damaged) {
  std::vector<fs::path> files = run_manifests(root);
  if (files.empty()) throw ScenarioError(root.string(), 0, 0, "", "a directory holding dump.json manifests", "none");
  const ExecutedOrder executed = executed_order(root);
  Run run;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    auto m = std::make_unique<json>();
    try {
      if (!in) throw probes::DumpError("cannot read the file");
      *m = json::parse(ss.str());
      probes::check_manifest(*m, f.filename().string());
    } catch (const std::exception& e) {
      damaged.push_back({label, f.string(), fmt::format("not a valid dump manifest: {}", e.what())});
      continue;
    }
    std::size_t i = 0;
    for (const auto& e : (*m)["entries"]) {
      const auto uint_of = [&](const char* k) -> std::uint32_t {
        if (!e.contains(k)) return 0;
        if (!e[k].is_number_unsigned() || e[k].get<std::uint64_t>() > UINT32_MAX)
          throw probes::DumpError(fmt::format("entries[{}].{} is not a non-negative integer", i, k));
        return e[k].get<std::uint32_t>();
      };
      const auto str_of = [&](const char* k) -> std::string {
        if (!e.contains(k)) return {};
        if (!e[k].is_string()) throw probes::DumpError(fmt::format("entries[{}].{} is not a string", i, k));
        return e[k].get<std::string>();
      };
      try {
        Key k{uint_of("rank"), uint_of("step"), str_of("op"), str_of("edge")};
        const std::uint64_t pos = position_of(executed, std::get<0>(k), std::get<2>(k), e);
        if (run.captures.emplace(k, Capture{f.parent_path(), f, m.get(), e, i, pos}).second) run.order.push_back(k);
      } catch (const probes::DumpError& err) {
        damaged.push_back({label, f.string(), err.what()});
      }
      ++i;
    }
    run.manifests.push_back(std::move(m));
  }
  // Causal order: step, then the op's place in the executed order, inputs before outputs, then
  // rank (the ranks run the same program), then manifest order.
  const auto causal = [&](const Key& k) {
    const Capture& c = run.captures.at(k);
    return std::make_tuple(std::get<1>(k), c.position, edge_class(std::get<3>(k)), std::get<0>(k));
  };
  std::stable_sort(run.order.begin(), run.order.end(), [&](const Key& x, const Key& y) { return causal(x) < causal(y); });
  return run;
}

std::string key_str(const Key& k) {
  return fmt::format("rank {} step {} {} {}", std::get<0>(k), std::get<1>(k), std::get<2>(k), std::get<3>(k));
}

// The tensor of a capture, or nullopt with the damage recorded.
std::optional<graph::Tensor> load(const Capture& c, const std::string& label, std::vector<DamagedFile>& damaged) {
  try {
    return probes::load_dump(c.dir, *c.manifest, c.entry);
  } catch (const std::exception& e) {
    damaged.push_back({label, c.manifest_file.string(), e.what()});
    return std::nullopt;
  }
}

enum class Verdict { Equal, Differ, Damaged };

// Fills d when the captures differ.
Verdict compare_one(const Capture& a, const Capture& b, CaptureDiff& d, std::vector<DamagedFile>& damaged) {
  const bool fa = a.entry.contains("file"), fb = b.entry.contains("file");
  if (fa && fb) {
    const auto la = load(a, "run A", damaged);
    const auto lb = load(b, "run B", damaged);
    if (!la || !lb) return Verdict::Damaged;
    const graph::Tensor& ta = *la;
    const graph::Tensor& tb = *lb;
    if (ta.shape() != tb.shape()) {
      d.basis = "shape";
      d.max_abs_diff = std::nan("");
      d.note = fmt::format("{} vs {}", graph::shape_str(ta.shape()), graph::shape_str(tb.shape()));
      return Verdict::Differ;
    }
    if (ta == tb) return Verdict::Equal;
    const auto va = ta.to_f64(), vb = tb.to_f64();
    double m = 0;
    std::size_t n = 0;
    for (std::size_t i = 0; i < va.size(); ++i) {
      const bool same = va[i] == vb[i] || (std::isnan(va[i]) && std::isnan(vb[i]));
      if (same) continue;
      ++n;
      m = std::max(m, std::isfinite(va[i] - vb[i]) ? std::abs(va[i] - vb[i]) : INFINITY);
    }
    d.basis = "tensor";
    d.max_abs_diff = m;
    d.note = fmt::format("{} of {} elements differ", n, va.size());
    return n == 0 ? Verdict::Equal : Verdict::Differ;
  }
  if (a.entry.contains("statistics") && b.entry.contains("statistics")) {
    const json& sa = a.entry["statistics"];
    const json& sb = b.entry["statistics"];
    if (sa == sb) return Verdict::Equal;
    double m = 0;
    std::string fields;
    for (const auto& [k, v] : sa.items()) {
      if (!sb.contains(k) || sb[k] == v) continue;
      fields += (fields.empty() ? "" : ", ") + k;
      if (v.is_number() && sb[k].is_number()) m = std::max(m, std::abs(v.get<double>() - sb[k].get<double>()));
    }
    d.basis = "statistics";
    d.max_abs_diff = m;
    d.note = "fields differ: " + fields;
    return Verdict::Differ;
  }
  if (a.entry.contains("hash") && b.entry.contains("hash")) {
    if (a.entry["hash"] == b.entry["hash"]) return Verdict::Equal;
    d.basis = "hash";
    d.max_abs_diff = std::nan("");
    d.note = fmt::format("hash {} vs {}", a.entry["hash"].get<std::string>(), b.entry["hash"].get<std::string>());
    return Verdict::Differ;
  }
  d.basis = "payload";
  d.max_abs_diff = std::nan("");
  d.note = fmt::format("payloads not comparable ({} vs {})", a.entry.value("payload", "?"), b.entry.value("payload", "?"));
  return Verdict::Differ;
}

// Text that came from a damaged file (a parser's message quotes the bytes it read, a file name)
// as valid UTF-8: ill-formed sequences become U+FFFD, so the comparison can always be written.
std::string valid_utf8(const std::string& s) {
  return json::parse(json(s).dump(-1, ' ', false, json::error_handler_t::replace)).get<std::string>();
}

}  // namespace

json RunComparison::to_json() const {
  json diffs_j = json::array();
  for (const auto& d : diffs)
    diffs_j.push_back({{"op", d.op}, {"edge", d.edge}, {"tensor", d.tensor}, {"step", d.step}, {"rank", d.rank},
                       {"basis", d.basis},
                       {"max_abs_diff", std::isnan(d.max_abs_diff) ? json(nullptr) : json(d.max_abs_diff)},
                       {"note", d.note}});
  json damaged_j = json::array();
  for (const auto& d : damaged)
    damaged_j.push_back({{"run", d.run}, {"file", valid_utf8(d.file)}, {"problem", valid_utf8(d.problem)}});
  return {{"matched", matched}, {"equal", equal}, {"only_a", only_a}, {"only_b", only_b}, {"diffs", diffs_j},
          {"damaged", damaged_j}, {"first_divergent_op", diffs.empty() ? json(nullptr) : json(diffs.front().op)}};
}

RunComparison compare_runs(const fs::path& a, const fs::path& b) {
  RunComparison out;
  const Run ra = load_run(a, "run A", out.damaged), rb = load_run(b, "run B", out.damaged);
  for (const Key& k : ra.order) {
    auto it = rb.captures.find(k);
    if (it == rb.captures.end()) {
      out.only_a.push_back(key_str(k));
      continue;
    }
    ++out.matched;
    const Capture& ca = ra.captures.at(k);
    CaptureDiff d;
    d.rank = std::get<0>(k);
    d.step = std::get<1>(k);
    d.op = std::get<2>(k);
    d.edge = std::get<3>(k);
    d.tensor = ca.entry.value("tensor", "");
    try {
      switch (compare_one(ca, it->second, d, out.damaged)) {
        case Verdict::Equal: ++out.equal; break;
        case Verdict::Differ: out.diffs.push_back(std::move(d)); break;
        case Verdict::Damaged: break;
      }
    } catch (const json::exception& e) {  // a field of the wrong type in either manifest
      out.damaged.push_back({"run A/B", ca.manifest_file.string() + " / " + it->second.manifest_file.string(),
                             fmt::format("{} {}: {}", key_str(k), "malformed entry", e.what())});
    }
  }
  for (const Key& k : rb.order)
    if (!ra.captures.count(k)) out.only_b.push_back(key_str(k));
  // A damaged delta base is met by every capture built on it: list each damage once.
  std::set<std::tuple<std::string, std::string, std::string>> seen;
  std::erase_if(out.damaged, [&](const DamagedFile& d) { return !seen.insert({d.run, d.file, d.problem}).second; });
  return out;
}

}  // namespace probelab::sim
