#include "sim/campaign/campaign_envelope.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "graph/npy.h"
#include "probes/compare.h"

namespace probelab::sim {

namespace fs = std::filesystem;
using nlohmann::json;

RunOutputs read_run_outputs(const fs::path& run_dir) {
  RunOutputs out;
  const fs::path root = run_dir / "outputs";
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  std::vector<fs::path> files;
  for (const auto& rank : fs::directory_iterator(root))
    if (rank.is_directory())
      for (const auto& f : fs::directory_iterator(rank.path()))
        if (f.path().extension() == ".npy") files.push_back(f.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files)
    out.emplace(f.parent_path().filename().string() + "/" + f.stem().string(), graph::read_npy(f.string()));
  return out;
}

json OutputCheck::to_json() const {
  json j = {{"checked", checked}, {"identical", identical}, {"within_envelope", within}, {"outside", outside}};
  j["max_deviation"] = std::isfinite(max_deviation) ? json(max_deviation) : json(nullptr);
  j["max_ulp"] = max_ulp == UINT64_MAX ? json(nullptr) : json(max_ulp);
  j["max_rel"] = std::isfinite(max_rel) ? json(max_rel) : json(nullptr);
  if (!note.empty()) j["note"] = note;
  return j;
}

OutputCheck OutputCheck::from_json(const json& j) {
  OutputCheck c;
  c.checked = j.value("checked", false);
  c.identical = j.value("identical", false);
  c.within = j.value("within_envelope", true);
  c.outside = j.value("outside", std::uint64_t{0});
  const json& d = j.contains("max_deviation") ? j["max_deviation"] : json(0.0);
  c.max_deviation = d.is_number() ? d.get<double>() : std::numeric_limits<double>::infinity();
  const json& u = j.contains("max_ulp") ? j["max_ulp"] : json(0);
  c.max_ulp = u.is_number() ? u.get<std::uint64_t>() : UINT64_MAX;
  const json& r = j.contains("max_rel") ? j["max_rel"] : json(0.0);
  c.max_rel = r.is_number() ? r.get<double>() : std::numeric_limits<double>::infinity();
  c.note = j.value("note", "");
  return c;
}

void GoldenEnvelope::add_run(const RunOutputs& outputs) {
  if (runs_ == 0) {
    for (const auto& [name, t] : outputs) {
      Out o;
      o.reference = t;
      const auto n = static_cast<std::size_t>(t.numel());
      o.lo.assign(n, 0.0);
      o.hi.assign(n, 0.0);
      o.nan.assign(n, 0);
      o.num.assign(n, 0);
      outs_.emplace(name, std::move(o));
    }
  } else if (outputs.size() != outs_.size()) {
    throw std::runtime_error(fmt::format("fault-free run {} produced {} output tensors, the first run {}", runs_ + 1,
                                         outputs.size(), outs_.size()));
  }
  for (const auto& [name, t] : outputs) {
    auto it = outs_.find(name);
    if (it == outs_.end() || it->second.reference.shape() != t.shape())
      throw std::runtime_error(fmt::format("fault-free run {}: output '{}' differs in name or shape from the first run",
                                           runs_ + 1, name));
    Out& o = it->second;
    if (!(o.reference == t)) deterministic_ = false;
    const auto v = t.to_f64();
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (std::isnan(v[i])) {
        o.nan[i] = 1;
      } else if (!o.num[i]) {
        o.num[i] = 1;
        o.lo[i] = o.hi[i] = v[i];
      } else {
        o.lo[i] = std::min(o.lo[i], v[i]);
        o.hi[i] = std::max(o.hi[i], v[i]);
      }
    }
  }
  ++runs_;
}

OutputCheck GoldenEnvelope::check(const RunOutputs& outputs) const {
  OutputCheck c;
  c.checked = true;
  c.identical = outputs.size() == outs_.size();
  const double inf = std::numeric_limits<double>::infinity();
  auto mark_outside = [&](std::uint64_t n, double dev, std::uint64_t ulp = UINT64_MAX,
                          double rel = std::numeric_limits<double>::infinity()) {
    c.within = false;
    c.outside += n;
    c.max_deviation = std::max(c.max_deviation, dev);
    c.max_ulp = std::max(c.max_ulp, ulp);
    c.max_rel = std::max(c.max_rel, rel);
  };
  auto severity = [&](double v, double bound, graph::DType dt, double dev) {
    const std::uint64_t ulp = probes::ulp_distance(v, bound, graph::is_float(dt) ? dt : graph::DType::F64);
    const double rel = dev / std::max(std::abs(bound), std::numeric_limits<double>::min());
    mark_outside(1, dev, ulp, rel);
  };
  for (const auto& [name, o] : outs_) {
    auto it = outputs.find(name);
    if (it == outputs.end() || it->second.shape() != o.reference.shape()) {
      c.identical = false;
      mark_outside(o.lo.size(), inf);
      c.note = fmt::format("output '{}' {}", name, it == outputs.end() ? "missing" : "has another shape");
      continue;
    }
    if (!(it->second == o.reference)) c.identical = false;
    const auto v = it->second.to_f64();
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (std::isnan(v[i])) {
        if (!o.nan[i]) mark_outside(1, inf);
        continue;
      }
      if (!o.num[i]) {
        mark_outside(1, inf);
        continue;
      }
      const double tol = atol_ + rtol_ * std::max(std::abs(o.lo[i]), std::abs(o.hi[i]));
      if (v[i] < o.lo[i] - tol)
        severity(v[i], o.lo[i], it->second.dtype(), o.lo[i] - v[i]);
      else if (v[i] > o.hi[i] + tol)
        severity(v[i], o.hi[i], it->second.dtype(), v[i] - o.hi[i]);
    }
  }
  for (const auto& [name, t] : outputs)
    if (!outs_.count(name)) {
      c.identical = false;
      c.note = fmt::format("output '{}' not in the fault-free run", name);
    }
  return c;
}

std::vector<std::uint8_t> GoldenEnvelope::to_cbor() const {
  json j = {{"atol", atol_}, {"rtol", rtol_}, {"runs", runs_}, {"deterministic", deterministic_}};
  json outs = json::object();
  for (const auto& [name, o] : outs_) {
    const auto npy = graph::encode_npy(o.reference);
    std::vector<std::uint8_t> raw(npy.size());
    std::transform(npy.begin(), npy.end(), raw.begin(), [](std::byte b) { return static_cast<std::uint8_t>(b); });
    outs[name] = {{"reference", json::binary(std::move(raw))}, {"lo", o.lo}, {"hi", o.hi}, {"nan", o.nan}, {"num", o.num}};
  }
  j["outputs"] = std::move(outs);
  return json::to_cbor(j);
}

GoldenEnvelope GoldenEnvelope::from_cbor(const std::vector<std::uint8_t>& data) {
  const json j = json::from_cbor(data);
  GoldenEnvelope e(j.at("atol").get<double>(), j.at("rtol").get<double>());
  e.runs_ = j.at("runs").get<std::size_t>();
  e.deterministic_ = j.at("deterministic").get<bool>();
  for (const auto& [name, oj] : j.at("outputs").items()) {
    Out o;
    const auto& raw = oj.at("reference").get_binary();
    std::vector<std::byte> npy(raw.size());
    std::transform(raw.begin(), raw.end(), npy.begin(), [](std::uint8_t b) { return static_cast<std::byte>(b); });
    o.reference = graph::decode_npy(npy, "golden output " + name);
    o.lo = oj.at("lo").get<std::vector<double>>();
    o.hi = oj.at("hi").get<std::vector<double>>();
    o.nan = oj.at("nan").get<std::vector<std::uint8_t>>();
    o.num = oj.at("num").get<std::vector<std::uint8_t>>();
    e.outs_.emplace(name, std::move(o));
  }
  return e;
}

}  // namespace probelab::sim
