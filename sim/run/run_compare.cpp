#include "sim/run/run_compare.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "probes/dump_writer.h"
#include "sim/scenario/scenario_error.h"

namespace probelab::sim {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Capture {
  fs::path dir;
  const json* manifest = nullptr;
  json entry;
  std::size_t index = 0;  // position in its manifest
};

using Key = std::tuple<std::uint32_t, std::uint32_t, std::string, std::string>;  // rank, step, op, edge

struct Run {
  std::vector<std::unique_ptr<json>> manifests;
  std::map<Key, Capture> captures;
  std::vector<Key> order;
};

Run load_run(const fs::path& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw ScenarioError(root.string(), 0, 0, "", "a run output directory (or a directory of dump.json manifests)",
                        "not a directory");
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_directory() && it->path().filename() == "variants" && it.depth() == 0) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && it->path().filename() == "dump.json") files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw ScenarioError(root.string(), 0, 0, "", "a directory holding dump.json manifests", "none");
  Run run;
  for (const auto& f : files) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    auto m = std::make_unique<json>();
    try {
      *m = json::parse(ss.str());
    } catch (const std::exception& e) {
      throw ScenarioError(f.string(), 0, 0, "", "a JSON dump manifest", e.what());
    }
    const json& entries = (*m).contains("entries") ? (*m)["entries"] : *m;
    std::size_t i = 0;
    for (const auto& e : entries) {
      Key k{e.value("rank", 0u), e.value("step", 0u), e.value("op", std::string()), e.value("edge", std::string())};
      if (run.captures.emplace(k, Capture{f.parent_path(), m.get(), e, i++}).second) run.order.push_back(k);
    }
    run.manifests.push_back(std::move(m));
  }
  std::stable_sort(run.order.begin(), run.order.end(), [](const Key& x, const Key& y) {
    return std::tie(std::get<1>(x), std::get<0>(x)) < std::tie(std::get<1>(y), std::get<0>(y));
  });
  return run;
}

std::string key_str(const Key& k) {
  return fmt::format("rank {} step {} {} {}", std::get<0>(k), std::get<1>(k), std::get<2>(k), std::get<3>(k));
}

// Returns true when equal; fills d otherwise.
bool compare_one(const Capture& a, const Capture& b, CaptureDiff& d) {
  const bool fa = a.entry.contains("file"), fb = b.entry.contains("file");
  if (fa && fb) {
    graph::Tensor ta = probes::load_dump(a.dir, *a.manifest, a.entry);
    graph::Tensor tb = probes::load_dump(b.dir, *b.manifest, b.entry);
    if (ta.shape() != tb.shape()) {
      d.basis = "shape";
      d.max_abs_diff = std::nan("");
      d.note = fmt::format("{} vs {}", graph::shape_str(ta.shape()), graph::shape_str(tb.shape()));
      return false;
    }
    if (ta == tb) return true;
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
    return n == 0;
  }
  if (a.entry.contains("statistics") && b.entry.contains("statistics")) {
    const json& sa = a.entry["statistics"];
    const json& sb = b.entry["statistics"];
    if (sa == sb) return true;
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
    return false;
  }
  if (a.entry.contains("hash") && b.entry.contains("hash")) {
    if (a.entry["hash"] == b.entry["hash"]) return true;
    d.basis = "hash";
    d.max_abs_diff = std::nan("");
    d.note = fmt::format("hash {} vs {}", a.entry["hash"].get<std::string>(), b.entry["hash"].get<std::string>());
    return false;
  }
  d.basis = "payload";
  d.max_abs_diff = std::nan("");
  d.note = fmt::format("payloads not comparable ({} vs {})", a.entry.value("payload", "?"), b.entry.value("payload", "?"));
  return false;
}

}  // namespace

json RunComparison::to_json() const {
  json diffs_j = json::array();
  for (const auto& d : diffs)
    diffs_j.push_back({{"op", d.op}, {"edge", d.edge}, {"tensor", d.tensor}, {"step", d.step}, {"rank", d.rank},
                       {"basis", d.basis},
                       {"max_abs_diff", std::isnan(d.max_abs_diff) ? json(nullptr) : json(d.max_abs_diff)},
                       {"note", d.note}});
  return {{"matched", matched}, {"equal", equal}, {"only_a", only_a}, {"only_b", only_b}, {"diffs", diffs_j},
          {"first_divergent_op", diffs.empty() ? json(nullptr) : json(diffs.front().op)}};
}

RunComparison compare_runs(const fs::path& a, const fs::path& b) {
  const Run ra = load_run(a), rb = load_run(b);
  RunComparison out;
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
    if (compare_one(ca, it->second, d))
      ++out.equal;
    else
      out.diffs.push_back(std::move(d));
  }
  for (const Key& k : rb.order)
    if (!ra.captures.count(k)) out.only_b.push_back(key_str(k));
  return out;
}

}  // namespace probelab::sim
