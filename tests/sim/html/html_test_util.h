// Hand-made reports for the HTML tests: small, with every section filled, and large (many ranks
// and ops) to bound the page size.
#pragma once

#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace probelab::html::test {

using nlohmann::json;

/// A NaN at `src` on rank 0 step 2, seen downstream through a chain of plain ops, on 4 ranks
/// with a divergent all-reduce and a failing comparison.
inline json small_report() {
  json r;
  r["schema"] = "probelab.report/1";
  r["status"] = "ok";
  r["passed"] = false;
  r["scenario"] = {{"name", "hand_made"}, {"description", "a report built by hand"}, {"file", "x.yaml"},
                   {"model", "mlp"}, {"mode", "training"}, {"ranks", 4}, {"steps", 3}};
  r["seed"] = 3;
  r["chip"] = {{"preset", "tiny"}, {"overrides", json::object()}, {"params", {{"num_cores", "2"}}}};
  r["precision"] = {{"compute", "float16"}, {"accumulation", "fp32"}};
  r["cycles"] = {{"total", 1000}, {"baseline", 900}, {"per_rank", {1000, 990, 980, 970}},
                 {"per_step", {{300, 300, 400}, {300, 300, 390}, {300, 300, 380}, {300, 300, 370}}}};
  r["ops"] = json::array();
  for (int rank = 0; rank < 4; ++rank)
    for (const char* op : {"fc1", "act", "fc2", "loss", "fc1/grad/allreduce"})
      r["ops"].push_back({{"op", op}, {"type", std::string(op) == "act" ? "Relu" : "MatMul"}, {"rank", rank},
                          {"tasks", 2}, {"cycles", 100 + rank}, {"probe_tasks", 1}, {"probe_cycles", 7}});
  r["tasks"] = {{"kernel", 12}, {"probe", 3}};
  r["anomalies"] = {
      {{"kind", "invalid"}, {"op", "act"}, {"op_type", "Relu"}, {"tensor", "act"}, {"element", 17}, {"step", 2},
       {"rank", 0}, {"cycle", 500}, {"latency_cycles", 60}, {"role", "source"}, {"source_op", "act"},
       {"propagation_path", {"act"}}, {"call_stack", {"net", "act (Relu)"}}},
      {{"kind", "nan_input"}, {"op", "loss"}, {"tensor", "fc2"}, {"step", 2}, {"rank", 0}, {"cycle", 700},
       {"role", "propagation"}, {"source_op", "act"}, {"propagation_path", {"act", "fc2", "loss"}}},
      {{"kind", "condition"}, {"op", "act"}, {"tensor", "act"}, {"step", 2}, {"rank", 0},
       {"condition", "nan_count > 0"}, {"watch_point", "w"}, {"actions", {"break"}}, {"origin", "breakpoint"}}};
  r["diagnosis"] = {{{"op", "act"}, {"cause", "nan_source"}, {"score", 0.9}, {"tensor", "act"}, {"step", 2},
                     {"rank", 0}, {"evidence", {"first NaN of the step produced here"}}, {"suggestion", "clamp it"}}};
  r["consistency"] = {{"checked", true}, {"consistent", false}, {"reference_rank", 0}, {"ranks", {0, 1, 2, 3}},
                      {"comparisons", 12}, {"missing", json::array()}, {"growing", true},
                      {"per_step", {{{"step", 0}, {"max_abs_diff", 0.01}}, {{"step", 1}, {"max_abs_diff", 0.02}}}},
                      {"divergences",
                       {{{"step", 0}, {"op", "fc1/grad/allreduce"}, {"edge", "out0"}, {"ranks", {1, 3}},
                         {"rank_diffs", {0.01, 0.005}}, {"max_abs_diff", 0.01}, {"basis", "statistics"}},
                        {{"step", 1}, {"op", "fc1/grad/allreduce"}, {"edge", "out0"}, {"ranks", {1}},
                         {"rank_diffs", {0.02}}, {"max_abs_diff", 0.02}, {"basis", "statistics"}}}}};
  r["consistency"]["first_divergence"] = r["consistency"]["divergences"][0];
  r["comparisons"] = json::array();
  for (int step = 0; step < 2; ++step)
    for (const char* op : {"fc1", "fc2"})
      r["comparisons"].push_back({{"op", op}, {"step", step}, {"rank", 0}, {"tensor", op},
                                  {"passed", !(step == 1 && std::string(op) == "fc2")},
                                  {"metrics", {{"cosine", step ? 0.9 : 0.99999}, {"max_abs_err", 0.001 * (step + 1)},
                                               {"max_rel_err", 0.002}, {"rmse", 1e-4}}},
                                  {"reasons", json::array()}});
  r["comparisons_skipped"] = json::array();
  r["first_failing_op"] = "fc2";
  r["capture"] = {{"records", 40}, {"drained", 40}, {"dropped", 0}, {"stall_cycles", 5}, {"bytes", 4096},
                  {"cycles_with_probes", 1000}, {"cycles_without_probes", 900}, {"overhead_percent", 11.1111},
                  {"total_overhead_percent", 11.0}};
  r["variants"] = {{{"name", "single"}, {"sets", {{"probes.capture.ping_pong", "false"}}}, {"status", "ok"},
                    {"cycles", 1100}, {"capture", {{"overhead_percent", 22.2}, {"dropped", 1}}}}};
  r["injections"] = {{{"index", 0}, {"kind", "nan"}, {"fired", true}, {"descriptor", {{"op", "act"}, {"element", 17}}},
                      {"proof", {{{"before", "0x3c00"}, {"after", "0x7e00"}}}}}};
  r["float_status"] = {{{"rank", 0}, {"step", 2}, {"flags", {"invalid"}}}};
  r["breakpoints"] = json::array();
  r["rules_fired"] = json::array();
  r["losses"] = {{1.5, 1.4, "nan"}};
  r["warnings"] = {"a warning"};
  r["expectations"] = {{{"index", 0}, {"kind", "detection"}, {"line", 12}, {"passed", true},
                        {"expected", "nan at act"}, {"actual", "invalid at act"}},
                       {{"index", 1}, {"kind", "consistency"}, {"line", 14}, {"passed", false},
                        {"expected", "consistent"}, {"actual", "diverged"}}};
  return r;
}

/// `ranks` x `ops` comparisons over `steps` steps, every op divergent on every other rank.
inline json large_report(int ranks, int ops, int steps) {
  json r = small_report();
  r["scenario"]["ranks"] = ranks;
  r["ops"] = json::array();
  r["comparisons"] = json::array();
  json divs = json::array();
  std::vector<int> all_ranks;
  for (int k = 0; k < ranks; ++k) all_ranks.push_back(k);
  for (int k = 0; k < ranks; ++k)
    for (int o = 0; o < ops; ++o) {
      const std::string op = fmt::format("layer{}/op{}", o / 4, o);
      r["ops"].push_back({{"op", op}, {"type", "MatMul"}, {"rank", k}, {"tasks", 1}, {"cycles", 100 + o}});
      for (int s = 0; s < steps; ++s)
        r["comparisons"].push_back({{"op", op}, {"step", s}, {"rank", k}, {"passed", true},
                                    {"metrics", {{"cosine", 0.9999}, {"max_abs_err", 1e-3 * (k + 1)},
                                                 {"max_rel_err", 1e-4 * (o + 1)}, {"rmse", 1e-5}}}});
    }
  for (int s = 0; s < steps; ++s)
    for (int o = 0; o < ops; ++o) {
      json d = {{"step", s}, {"op", fmt::format("layer{}/op{}", o / 4, o)}, {"edge", "out0"}, {"basis", "statistics"},
                {"max_abs_diff", 0.5}};
      json rs = json::array(), ds = json::array();
      for (int k = 1; k < ranks; k += 2) {
        rs.push_back(k);
        ds.push_back(0.5 * k / ranks);
      }
      d["ranks"] = rs;
      d["rank_diffs"] = ds;
      divs.push_back(d);
    }
  r["consistency"]["ranks"] = all_ranks;
  json per_step = json::array();
  for (int k = 0; k < ranks; ++k) per_step.push_back(json::array({1000 + k, 1100 + k}));
  r["cycles"]["per_step"] = per_step;
  r["consistency"]["divergences"] = divs;
  return r;
}

}  // namespace probelab::html::test
