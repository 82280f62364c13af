#include "sim/campaign/campaign_outcome.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>

namespace probelab::sim {

using nlohmann::json;

namespace {

const std::vector<std::pair<Outcome, const char*>> kNames = {
    {Outcome::Top1, "top1"},          {Outcome::Top3, "top3"}, {Outcome::Mislocalized, "mislocalized"},
    {Outcome::Detected, "detected"},  {Outcome::Masked, "masked"}, {Outcome::Tolerated, "tolerated"}, {Outcome::Sdc, "sdc"},
    {Outcome::Crash, "crash"},        {Outcome::Hang, "hang"}, {Outcome::NotFired, "not_fired"}};

template <class T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

template <class T>
std::optional<T> opt_of(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<T>();
}

std::string str_of(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

void add_suspect(std::vector<std::vector<std::string>>& out, std::vector<std::string> names) {
  names.erase(std::remove(names.begin(), names.end(), std::string()), names.end());
  if (names.empty()) return;
  for (const auto& s : out)
    if (s.front() == names.front()) return;  // one place per op
  out.push_back(std::move(names));
}

}  // namespace

std::string_view outcome_name(Outcome o) {
  for (const auto& [v, n] : kNames)
    if (v == o) return n;
  return "?";
}

std::optional<Outcome> parse_outcome(std::string_view s) {
  for (const auto& [v, n] : kNames)
    if (s == n) return v;
  return std::nullopt;
}

const std::vector<Outcome>& all_outcomes() {
  static const std::vector<Outcome> v = [] {
    std::vector<Outcome> out;
    for (const auto& [o, n] : kNames) out.push_back(o);
    return out;
  }();
  return v;
}

json TrialObservation::to_json() const {
  json latches = json::array();
  for (const auto& l : latched)
    latches.push_back({{"op", l.op}, {"kind", l.kind}, {"tensor", l.tensor}, {"step", l.step}, {"rank", l.rank},
                       {"element", l.element}, {"on_input", l.on_input}});
  json rp = json::array();
  for (const auto& [op, step, rank] : replayed) rp.push_back({op, step, rank});
  return {{"status", status},
          {"error", error},
          {"fired", fired},
          {"inject_cycle", opt(inject_cycle)},
          {"detected", detected},
          {"exceptions", exceptions},
          {"conditions", conditions},
          {"failing_comparisons", failing_comparisons},
          {"integrity", integrity},
          {"inconsistent", inconsistent},
          {"suspects", suspects},
          {"suspect_causes", suspect_causes},
          {"perf_suspects", perf_suspects},
          {"perf_causes", perf_causes},
          {"job_hang", job_hang},
          {"hang_links", hang_links},
          {"hang_cycle", opt(hang_cycle)},
          {"latched", latches},
          {"replayed", rp},
          {"detection_cycle", opt(detection_cycle)},
          {"output", output.to_json()}};
}

TrialObservation TrialObservation::from_json(const json& j) {
  TrialObservation o;
  o.status = j.at("status").get<std::string>();
  o.error = str_of(j, "error");
  o.fired = j.value("fired", false);
  o.inject_cycle = opt_of<std::uint64_t>(j, "inject_cycle");
  o.detected = j.value("detected", false);
  o.exceptions = j.value("exceptions", std::uint64_t{0});
  o.conditions = j.value("conditions", std::uint64_t{0});
  o.failing_comparisons = j.value("failing_comparisons", std::uint64_t{0});
  o.integrity = j.value("integrity", std::uint64_t{0});
  o.inconsistent = j.value("inconsistent", false);
  if (j.contains("suspects")) o.suspects = j["suspects"].get<std::vector<std::vector<std::string>>>();
  if (j.contains("suspect_causes")) o.suspect_causes = j["suspect_causes"].get<std::vector<std::string>>();
  if (j.contains("perf_suspects")) o.perf_suspects = j["perf_suspects"].get<std::vector<std::string>>();
  if (j.contains("perf_causes")) o.perf_causes = j["perf_causes"].get<std::vector<std::string>>();
  o.job_hang = j.value("job_hang", false);
  if (j.contains("hang_links")) o.hang_links = j["hang_links"].get<std::vector<std::string>>();
  o.hang_cycle = opt_of<std::uint64_t>(j, "hang_cycle");
  if (j.contains("latched"))
    for (const auto& l : j["latched"])
      o.latched.push_back({l.at("op").get<std::string>(), l.at("kind").get<std::string>(), l.at("tensor").get<std::string>(),
                           l.at("step").get<std::uint32_t>(), l.at("rank").get<std::uint32_t>(),
                           l.at("element").get<std::uint64_t>(), l.at("on_input").get<bool>()});
  if (j.contains("replayed"))
    for (const auto& r : j["replayed"])
      o.replayed.emplace_back(r.at(0).get<std::string>(), r.at(1).get<std::uint32_t>(), r.at(2).get<std::uint32_t>());
  o.detection_cycle = opt_of<std::uint64_t>(j, "detection_cycle");
  if (j.contains("output")) o.output = OutputCheck::from_json(j["output"]);
  return o;
}

TrialObservation observe(const json& r, const OutputCheck& output) {
  TrialObservation o;
  o.output = output;
  o.status = r.value("status", std::string("error"));
  // A job that hung still reports what it completed (and where it is blocked): observed as usual.
  o.job_hang = o.status == "hang" && r.contains("hang") && r["hang"].is_object();
  if (o.status != "ok") {
    o.error = r.value("error", std::string("simulation failed"));
    if (!o.job_hang) return o;
    const json& h = r["hang"];
    if (h.contains("lost"))
      for (const auto& l : h["lost"]) {
        const std::string link = "link " + str_of(l, "link");
        if (std::find(o.hang_links.begin(), o.hang_links.end(), link) == o.hang_links.end()) o.hang_links.push_back(link);
      }
    o.hang_cycle = opt_of<std::uint64_t>(h, "cycle");
  }
  // The trial's injection is the last descriptor (the scenario's own come first).
  if (r.contains("injections") && r["injections"].is_array() && !r["injections"].empty()) {
    const json& inj = r["injections"].back();
    o.fired = inj.value("fired", false);
    if (inj.contains("proof"))
      for (const auto& p : inj["proof"])
        if (p.contains("cycle")) {
          const auto c = p["cycle"].get<std::uint64_t>();
          o.inject_cycle = o.inject_cycle ? std::min(*o.inject_cycle, c) : c;
        }
  }
  std::vector<const json*> sources;
  if (r.contains("anomalies"))
    for (const auto& a : r["anomalies"]) {
      if (a.value("kind", "") == "condition") {
        ++o.conditions;
        continue;
      }
      if (a.value("kind", "") == "integrity") {
        ++o.integrity;
        continue;
      }
      ++o.exceptions;
      if (o.latched.size() < 256)
        o.latched.push_back({str_of(a, "op"), str_of(a, "kind"), str_of(a, "tensor"), a.value("step", 0u),
                             a.value("rank", 0u), a.value("element", std::uint64_t{0}), a.value("on_input", false)});
      // The host learns of the latch when its ISR reads it: that moment, if after the fault.
      const std::uint64_t seen = a.value("cycle", std::uint64_t{0}) + a.value("latency_cycles", std::uint64_t{0});
      if (!o.inject_cycle || seen >= *o.inject_cycle)
        o.detection_cycle = o.detection_cycle ? std::min(*o.detection_cycle, seen) : seen;
      sources.push_back(&a);
    }
  if (r.contains("comparisons"))
    for (const auto& c : r["comparisons"])
      if (!c.value("passed", true)) ++o.failing_comparisons;
  if (r.contains("consistency") && r["consistency"].is_object())
    o.inconsistent = r["consistency"].value("checked", false) && !r["consistency"].value("consistent", true);
  o.detected = o.exceptions + o.conditions + o.failing_comparisons + o.integrity > 0 || o.inconsistent;
  if (r.contains("replays") && r["replays"].is_array())
    for (const auto& x : r["replays"]) o.replayed.emplace_back(str_of(x, "op"), x.value("step", 0u), x.value("rank", 0u));

  if (r.contains("perf") && r["perf"].contains("findings"))
    for (const auto& f : r["perf"]["findings"]) {
      o.perf_suspects.push_back(perf_component(f));
      o.perf_causes.push_back(str_of(f, "cause"));
    }
  if (r.contains("diagnosis") && !r["diagnosis"].empty()) {
    for (const auto& c : r["diagnosis"]) {
      const std::size_t before = o.suspects.size();
      add_suspect(o.suspects, {str_of(c, "op"), str_of(c, "inner_op"), str_of(c, "forward_op")});
      if (o.suspects.size() > before) o.suspect_causes.push_back(str_of(c, "cause"));
    }
  } else {
    // Exception latches: sources first, in cycle order (stable), then what they propagated from.
    std::stable_sort(sources.begin(), sources.end(), [](const json* a, const json* b) {
      const bool sa = a->value("role", "") == "source", sb = b->value("role", "") == "source";
      if (sa != sb) return sa;
      return a->value("cycle", std::uint64_t{0}) < b->value("cycle", std::uint64_t{0});
    });
    for (const json* a : sources) {
      std::vector<std::string> names = {str_of(*a, "source_op").empty() ? str_of(*a, "op") : str_of(*a, "source_op")};
      if (a->contains("fused_from") && (*a)["fused_from"].is_array())
        for (const auto& f : (*a)["fused_from"]) names.push_back(f.get<std::string>());
      add_suspect(o.suspects, names);
    }
    if (r.contains("first_failing_op") && r["first_failing_op"].is_string())
      add_suspect(o.suspects, {r["first_failing_op"].get<std::string>()});
    if (r.contains("anomalies"))
      for (const auto& a : r["anomalies"])
        if (a.value("kind", "") == "condition") add_suspect(o.suspects, {str_of(a, "op")});
    if (o.inconsistent && r["consistency"]["first_divergence"].is_object())
      add_suspect(o.suspects, {str_of(r["consistency"]["first_divergence"], "op")});
  }
  return o;
}

std::string perf_component(const json& f) {
  const std::string cause = str_of(f, "cause");
  const auto rank = f.value("rank", 0u);
  if (cause == "hbm_channel") return fmt::format("hbm_channel r{} ch{}", rank, f.value("channel", 0u));
  if (cause == "link") return "link " + str_of(f, "link");
  if (cause == "core") return fmt::format("core r{} c{}", rank, f.value("core", 0u));
  return fmt::format("{} r{}", cause, rank);
}

bool flags_anything(const TrialObservation& o, bool perf) { return o.detected || (perf && !o.perf_suspects.empty()); }

std::optional<std::size_t> truth_rank(const TrialObservation& o, const std::vector<std::string>& truth) {
  for (std::size_t i = 0; i < o.suspects.size(); ++i)
    for (const auto& name : o.suspects[i])
      if (std::find(truth.begin(), truth.end(), name) != truth.end()) return i + 1;
  return std::nullopt;
}

std::string sdc_severity(const OutputCheck& c) {
  if (c.max_ulp == UINT64_MAX || !std::isfinite(c.max_rel)) return "nonfinite";
  if (c.max_ulp <= 16) return "low";
  if (c.max_ulp <= 1024) return "medium";
  return "high";
}

Outcome classify(const TrialObservation& o, const std::vector<std::string>& truth, const SdcTolerance& tol) {
  if (o.status == "hang") return Outcome::Hang;
  if (o.status != "ok") return Outcome::Crash;
  if (!o.fired) return Outcome::NotFired;
  if (o.detected) {
    if (truth.empty()) return Outcome::Detected;
    const auto r = truth_rank(o, truth);
    if (r && *r == 1) return Outcome::Top1;
    if (r && *r <= 3) return Outcome::Top3;
    return Outcome::Mislocalized;
  }
  if (o.output.within) return Outcome::Masked;
  const bool tolerated = o.output.max_ulp != UINT64_MAX &&
                         (o.output.max_ulp <= tol.max_ulp || (tol.rtol > 0 && o.output.max_rel <= tol.rtol));
  return tolerated ? Outcome::Tolerated : Outcome::Sdc;
}

TrialRecord make_record(const TrialSpec& spec, TrialObservation obs, const SdcTolerance& tol) {
  TrialRecord r;
  r.index = spec.index;
  r.stratum = spec.stratum;
  r.kind = spec.kind;
  r.op = spec.op;
  r.target = spec.target;
  r.truth_ops = spec.truth_ops;
  r.nonfinite = spec.nonfinite;
  r.descriptor = spec.descriptor_json();
  if (spec.perf) {
    // Scored on the perf findings: the slowed component and its cause.
    obs.detected = !obs.perf_suspects.empty();
    obs.suspects.clear();
    for (const auto& p : obs.perf_suspects) obs.suspects.push_back({p});
    obs.suspect_causes = obs.perf_causes;
  }
  if (spec.hang_scored && obs.job_hang) {
    // Scored on the hang: its lost messages' links are the suspects.
    obs.status = "ok";
    obs.detected = true;
    obs.suspects.clear();
    for (const auto& l : obs.hang_links) obs.suspects.push_back({l});
    obs.suspect_causes.assign(obs.hang_links.size(), "link_down");
    obs.detection_cycle = obs.hang_cycle;
  }
  r.outcome = classify(obs, spec.truth_ops, tol);
  if (obs.detected) r.rank = truth_rank(obs, spec.truth_ops);
  if (obs.detected && obs.detection_cycle && obs.inject_cycle && *obs.detection_cycle >= *obs.inject_cycle)
    r.latency_cycles = *obs.detection_cycle - *obs.inject_cycle;
  // the cause the evidence of this run supports: a replay of the true op at the injected step
  // cannot reproduce an injected value, so it makes the fault a corruption
  bool replayed = false;
  if (!spec.truth_cause_replayed.empty() && spec.step)
    for (const auto& [op, step, rank] : obs.replayed)
      if (op == spec.op && step == *spec.step && (!spec.rank || rank == *spec.rank)) replayed = true;
  r.truth_cause = replayed ? spec.truth_cause_replayed : spec.truth_cause;
  if (obs.status == "ok" && obs.fired && obs.detected && !r.truth_cause.empty())
    r.cause_correct = !obs.suspect_causes.empty() && obs.suspect_causes.front() == r.truth_cause;
  if (obs.status == "ok" && obs.fired && spec.element && spec.step) {
    const bool in = spec.side == "input";
    for (const auto& l : obs.latched)
      if (l.op == spec.op && l.step == *spec.step && (!spec.rank || l.rank == *spec.rank) && l.on_input == in &&
          l.kind != "underflow" && (spec.tensor_name.empty() || l.tensor == spec.tensor_name)) {
        r.element_exact = l.element == *spec.element;
        break;
      }
  }
  if (r.outcome == Outcome::Sdc) r.severity = sdc_severity(obs.output);
  r.obs = std::move(obs);
  return r;
}

json TrialRecord::to_json() const {
  return {{"index", index},
          {"stratum", stratum},
          {"kind", kind},
          {"op", op},
          {"target", target},
          {"truth_ops", truth_ops},
          {"descriptor", descriptor},
          {"outcome", std::string(outcome_name(outcome))},
          {"truth_rank", opt(rank)},
          {"latency_cycles", opt(latency_cycles)},
          {"truth_cause", truth_cause},
          {"nonfinite", nonfinite},
          {"cause_correct", opt(cause_correct)},
          {"element_exact", opt(element_exact)},
          {"severity", severity},
          {"observation", obs.to_json()}};
}

TrialRecord TrialRecord::from_json(const json& j) {
  TrialRecord r;
  r.index = j.at("index").get<std::uint64_t>();
  r.stratum = j.at("stratum").get<std::string>();
  r.kind = j.at("kind").get<std::string>();
  r.op = j.at("op").get<std::string>();
  r.target = j.value("target", "");
  r.truth_ops = j.at("truth_ops").get<std::vector<std::string>>();
  r.descriptor = j.at("descriptor");
  const auto o = parse_outcome(j.at("outcome").get<std::string>());
  if (!o) throw std::runtime_error("unknown outcome '" + j.at("outcome").get<std::string>() + "'");
  r.outcome = *o;
  r.rank = opt_of<std::size_t>(j, "truth_rank");
  r.latency_cycles = opt_of<std::uint64_t>(j, "latency_cycles");
  r.truth_cause = j.value("truth_cause", "");
  r.nonfinite = j.value("nonfinite", false);
  r.cause_correct = opt_of<bool>(j, "cause_correct");
  r.element_exact = opt_of<bool>(j, "element_exact");
  r.severity = j.value("severity", "");
  r.obs = TrialObservation::from_json(j.at("observation"));
  return r;
}

}  // namespace probelab::sim
