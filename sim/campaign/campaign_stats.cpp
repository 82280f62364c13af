#include "sim/campaign/campaign_stats.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

namespace probelab::sim {

using nlohmann::json;

namespace {

constexpr double kZ95 = 1.959963984540054;

void sort_records(std::vector<TrialRecord>& r) {
  std::sort(r.begin(), r.end(), [](const TrialRecord& a, const TrialRecord& b) { return a.index < b.index; });
}

// Metrics of a group of trials.
json group_metrics(const std::vector<const TrialRecord*>& rs) {
  std::map<Outcome, std::uint64_t> n;
  std::vector<std::uint64_t> lat;
  std::uint64_t src_k = 0, src_n = 0, cause_k = 0, cause_n = 0, elem_k = 0, elem_n = 0;
  std::map<std::string, std::uint64_t> severity = {{"low", 0}, {"medium", 0}, {"high", 0}, {"nonfinite", 0}};
  for (const auto* r : rs) {
    ++n[r->outcome];
    if (r->latency_cycles) lat.push_back(*r->latency_cycles);
    const bool localized = r->outcome == Outcome::Top1 || r->outcome == Outcome::Top3 || r->outcome == Outcome::Mislocalized;
    if (r->nonfinite && localized) {
      ++src_n;
      src_k += r->outcome == Outcome::Top1;
    }
    if (r->cause_correct) {
      ++cause_n;
      cause_k += *r->cause_correct;
    }
    if (r->element_exact) {
      ++elem_n;
      elem_k += *r->element_exact;
    }
    if (r->outcome == Outcome::Sdc) ++severity[r->severity];
  }
  json outcomes = json::object();
  for (Outcome o : all_outcomes()) outcomes[std::string(outcome_name(o))] = n[o];
  const std::uint64_t localized = n[Outcome::Top1] + n[Outcome::Top3] + n[Outcome::Mislocalized];
  const std::uint64_t detected = localized + n[Outcome::Detected];
  const std::uint64_t unrecoverable = n[Outcome::Crash] + n[Outcome::Hang];
  const std::uint64_t fired = rs.size() - n[Outcome::NotFired];
  json m;
  m["trials"] = rs.size();
  m["outcomes"] = outcomes;
  m["coverage"] = rate_json(detected + unrecoverable, detected + unrecoverable + n[Outcome::Sdc]);
  m["probe_coverage"] = rate_json(detected, detected + n[Outcome::Sdc]);
  m["top1"] = rate_json(n[Outcome::Top1], localized);
  m["top3"] = rate_json(n[Outcome::Top1] + n[Outcome::Top3], localized);
  m["source_top1"] = rate_json(src_k, src_n);
  m["cause_correct"] = rate_json(cause_k, cause_n);
  m["element_exact"] = rate_json(elem_k, elem_n);
  m["sdc_rate"] = rate_json(n[Outcome::Sdc], fired);
  m["sdc_by_severity"] = severity;
  m["tolerated_rate"] = rate_json(n[Outcome::Tolerated], fired);
  m["masked_rate"] = rate_json(n[Outcome::Masked], fired);
  m["unrecoverable_rate"] = rate_json(unrecoverable, fired);
  m["not_fired_rate"] = rate_json(n[Outcome::NotFired], rs.size());
  json l = {{"n", lat.size()}};
  if (lat.empty()) {
    l["p50"] = l["p90"] = l["p99"] = l["max"] = nullptr;
  } else {
    l["p50"] = percentile(lat, 50);
    l["p90"] = percentile(lat, 90);
    l["p99"] = percentile(lat, 99);
    l["max"] = *std::max_element(lat.begin(), lat.end());
  }
  m["latency_cycles"] = l;
  return m;
}

std::string rate_cell(const json& r) {
  if (r["rate"].is_null()) return fmt::format("{:>7} [{:>6}, {:>6}]  n={}", "-", "-", "-", r["n"].get<std::uint64_t>());
  return fmt::format("{:>6.1f}% [{:>5.1f}%, {:>5.1f}%]  n={}", 100 * r["rate"].get<double>(),
                     100 * r["ci95"][0].get<double>(), 100 * r["ci95"][1].get<double>(), r["n"].get<std::uint64_t>());
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string group_row(const std::string& name, const json& m) {
  auto pct = [](const json& r) {
    return r["rate"].is_null() ? std::string("-") : fmt::format("{:.1f}%", 100 * r["rate"].get<double>());
  };
  return fmt::format("  {:<40} {:>6} {:>9} {:>7} {:>7} {:>7} {:>7}\n", name, m["trials"].get<std::uint64_t>(),
                     pct(m["coverage"]), pct(m["top1"]), pct(m["top3"]), pct(m["cause_correct"]), pct(m["sdc_rate"]));
}

}  // namespace

json CleanRun::to_json() const {
  json sj = json::array();
  for (const auto& [k, v] : sets) sj.push_back(k + "=" + v);
  return {{"index", index}, {"sets", sj},         {"status", status}, {"error", error},
          {"digest", fmt::format("{:016x}", digest)}, {"flagged", flagged}, {"flag", flag}};
}

CleanRun CleanRun::from_json(const json& j) {
  CleanRun c;
  c.index = j.at("index").get<std::uint64_t>();
  for (const auto& s : j.at("sets")) {
    const auto t = s.get<std::string>();
    const auto eq = t.find('=');
    c.sets.emplace_back(t.substr(0, eq), eq == std::string::npos ? "" : t.substr(eq + 1));
  }
  c.status = j.value("status", "ok");
  c.error = j.value("error", "");
  c.digest = std::stoull(j.at("digest").get<std::string>(), nullptr, 16);
  c.flagged = j.value("flagged", false);
  c.flag = j.value("flag", "");
  return c;
}

Interval wilson_interval(std::uint64_t k, std::uint64_t n) {
  const double nn = static_cast<double>(n), p = static_cast<double>(k) / nn, z2 = kZ95 * kZ95;
  const double denom = 1.0 + z2 / nn;
  const double center = (p + z2 / (2 * nn)) / denom;
  const double half = kZ95 / denom * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn));
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

std::uint64_t percentile(std::vector<std::uint64_t> v, double p) {
  std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  rank = std::clamp<std::size_t>(rank, 1, v.size());
  return v[rank - 1];
}

json rate_json(std::uint64_t k, std::uint64_t n) {
  json j = {{"k", k}, {"n", n}};
  if (n == 0) {
    j["rate"] = nullptr;
    j["ci95"] = nullptr;
  } else {
    const Interval ci = wilson_interval(k, n);
    j["rate"] = static_cast<double>(k) / static_cast<double>(n);
    j["ci95"] = {ci.lo, ci.hi};
  }
  return j;
}

json campaign_summary(const CampaignInfo& info, std::vector<TrialRecord> records) {
  sort_records(records);
  records.erase(std::remove_if(records.begin(), records.end(), [&](const TrialRecord& r) { return r.index >= info.trials; }),
                records.end());
  std::vector<const TrialRecord*> all;
  std::map<std::string, std::vector<const TrialRecord*>> by_kind, by_op;
  for (const auto& r : records) {
    all.push_back(&r);
    by_kind[r.kind].push_back(&r);
    by_op[r.op.empty() ? "-" : r.op].push_back(&r);
  }
  std::uint64_t fp = 0;
  for (const auto& g : info.golden) fp += flags_anything(g, info.perf) ? 1 : 0;
  // clean runs: bit-identical outputs are one run; a digest is flagged when any of its runs was
  std::map<std::uint64_t, bool> distinct;
  std::uint64_t clean_failed = 0;
  json flagged_runs = json::array();
  for (const auto& c : info.clean) {
    if (c.status != "ok") {
      ++clean_failed;
      continue;
    }
    distinct[c.digest] = distinct[c.digest] || c.flagged;
    if (c.flagged && flagged_runs.size() < 20) flagged_runs.push_back(c.to_json());
  }
  std::uint64_t clean_fp = 0;
  for (const auto& [d, f] : distinct) clean_fp += f;
  json s;
  s["schema"] = "probelab.campaign/1";
  s["scenario"] = info.scenario;
  s["seed"] = info.seed;
  s["sampling"] = info.sampling;
  s["trials_requested"] = info.trials;
  s["trials_done"] = records.size();
  s["complete"] = records.size() == info.trials;
  s["golden"] = {{"runs", info.golden.size()},
                 {"deterministic", info.golden_deterministic},
                 {"flagged", rate_json(fp, info.golden.size())}};
  s["clean_runs"] = {{"runs", info.clean.size()},
                     {"distinct", distinct.size()},
                     {"failed", clean_failed},
                     {"false_positive_rate", rate_json(clean_fp, distinct.size())},
                     {"flagged", flagged_runs}};
  s["sdc_tolerance"] = {{"max_ulp", info.sdc_max_ulp}, {"rtol", info.sdc_rtol}};
  s["overall"] = group_metrics(all);
  json k = json::object(), o = json::object();
  for (const auto& [name, rs] : by_kind) k[name] = group_metrics(rs);
  for (const auto& [name, rs] : by_op) o[name] = group_metrics(rs);
  s["by_kind"] = k;
  s["by_op"] = o;
  return s;
}

std::string campaign_summary_text(const json& s) {
  const json& m = s["overall"];
  std::string out = fmt::format("campaign {} (seed {}, {} sampling): {} of {} trials{}\n", s["scenario"].get<std::string>(),
                                s["seed"].get<std::uint64_t>(), s["sampling"].get<std::string>(),
                                s["trials_done"].get<std::uint64_t>(), s["trials_requested"].get<std::uint64_t>(),
                                s["complete"].get<bool>() ? "" : " (incomplete)");
  out += "  outcomes:";
  for (const auto& [name, n] : m["outcomes"].items()) out += fmt::format(" {} {}", name, n.get<std::uint64_t>());
  out += "\n";
  out += fmt::format("  coverage              {}\n", rate_cell(m["coverage"]));
  out += fmt::format("  probe coverage        {}\n", rate_cell(m["probe_coverage"]));
  out += fmt::format("  localization top-1    {}\n", rate_cell(m["top1"]));
  out += fmt::format("  localization top-3    {}\n", rate_cell(m["top3"]));
  out += fmt::format("  NaN/Inf source top-1  {}\n", rate_cell(m["source_top1"]));
  out += fmt::format("  cause class correct   {}\n", rate_cell(m["cause_correct"]));
  out += fmt::format("  latched element exact {}\n", rate_cell(m["element_exact"]));
  out += fmt::format("  SDC rate              {}\n", rate_cell(m["sdc_rate"]));
  const json& sev = m["sdc_by_severity"];
  out += fmt::format("    by severity         low {} (<= 16 ULP), medium {} (<= 1024 ULP), high {}, nonfinite {}\n",
                     sev["low"].get<std::uint64_t>(), sev["medium"].get<std::uint64_t>(), sev["high"].get<std::uint64_t>(),
                     sev["nonfinite"].get<std::uint64_t>());
  out += fmt::format("  tolerated rate        {}  (within {} ULP{})\n", rate_cell(m["tolerated_rate"]),
                     s["sdc_tolerance"]["max_ulp"].get<std::uint64_t>(),
                     s["sdc_tolerance"]["rtol"].get<double>() > 0
                         ? fmt::format(" or {:g} relative", s["sdc_tolerance"]["rtol"].get<double>())
                         : std::string());
  out += fmt::format("  masked rate           {}\n", rate_cell(m["masked_rate"]));
  out += fmt::format("  crash/hang rate       {}\n", rate_cell(m["unrecoverable_rate"]));
  out += fmt::format("  never fired           {}\n", rate_cell(m["not_fired_rate"]));
  const json& cr = s["clean_runs"];
  out += fmt::format("  false positives       {}  ({} clean runs, {} distinct{})\n", rate_cell(cr["false_positive_rate"]),
                     cr["runs"].get<std::uint64_t>(), cr["distinct"].get<std::uint64_t>(),
                     cr["failed"].get<std::uint64_t>() ? fmt::format(", {} failed", cr["failed"].get<std::uint64_t>())
                                                       : std::string());
  out += fmt::format("  golden runs flagged   {}  ({})\n", rate_cell(s["golden"]["flagged"]),
                     s["golden"]["deterministic"].get<bool>() ? "bit-identical" : "nondeterministic: envelope");
  const json& l = m["latency_cycles"];
  if (l["n"].get<std::uint64_t>() > 0)
    out += fmt::format("  detection latency     p50 {} p90 {} p99 {} max {} cycles (n={})\n", l["p50"].get<std::uint64_t>(),
                       l["p90"].get<std::uint64_t>(), l["p99"].get<std::uint64_t>(), l["max"].get<std::uint64_t>(),
                       l["n"].get<std::uint64_t>());
  for (const char* group : {"by_kind", "by_op"}) {
    out += fmt::format("\n  {:<40} {:>6} {:>9} {:>7} {:>7} {:>7} {:>7}\n", group == std::string("by_kind") ? "kind" : "op",
                       "trials", "coverage", "top-1", "top-3", "cause", "SDC");
    for (const auto& [name, gm] : s[group].items()) out += group_row(name, gm);
  }
  return out;
}

std::string trials_csv(std::vector<TrialRecord> records) {
  sort_records(records);
  std::string out =
      "index,stratum,kind,op,target,outcome,fired,detected,truth_rank,latency_cycles,identical,within_envelope,"
      "exceptions,conditions,failing_comparisons,top_suspect,truth_ops,truth_cause,top_cause,cause_correct,"
      "element_exact,severity,max_ulp,descriptor\n";
  for (const auto& r : records) {
    const auto& o = r.obs;
    std::string truth;
    for (const auto& t : r.truth_ops) truth += (truth.empty() ? "" : ";") + t;
    auto opt_bool = [](const std::optional<bool>& b) { return b ? std::string(*b ? "true" : "false") : std::string(); };
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", r.index, csv_field(r.stratum),
                       csv_field(r.kind), csv_field(r.op), csv_field(r.target), outcome_name(r.outcome), o.fired,
                       o.detected, r.rank ? fmt::format("{}", *r.rank) : "",
                       r.latency_cycles ? fmt::format("{}", *r.latency_cycles) : "", o.output.identical, o.output.within,
                       o.exceptions, o.conditions, o.failing_comparisons,
                       csv_field(o.suspects.empty() ? "" : o.suspects.front().front()), csv_field(truth),
                       csv_field(r.truth_cause), csv_field(o.suspect_causes.empty() ? "" : o.suspect_causes.front()),
                       opt_bool(r.cause_correct), opt_bool(r.element_exact), r.severity,
                       o.output.max_ulp == UINT64_MAX ? std::string("inf") : fmt::format("{}", o.output.max_ulp),
                       csv_field(r.descriptor.dump()));
  }
  return out;
}

}  // namespace probelab::sim
