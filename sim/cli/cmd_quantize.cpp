// `probelab quantize SCENARIO [--target cosine>=0.999]`: per-layer quantization error of the
// scenario's `quantization:` section against the unquantized run, the layers' sensitivity, and the
// smallest set of layers to keep in the compute dtype so the output target holds
// (sim/run/quant_search.h). Exit 0 when the target holds and quantization.search.expect_keep (if
// given) matches the kept set, 1 otherwise, 2 on bad input.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/cli/commands.h"
#include "sim/run/quant_search.h"
#include "sim/scenario/source_root.h"

namespace probelab::cli {
namespace {

std::string cell(const nlohmann::json& j, const char* key, const char* fmt_spec) {
  if (!j.is_object() || !j.contains(key)) return "-";
  const auto& v = j[key];
  if (v.is_string()) return v.get<std::string>();
  return fmt::format(fmt::runtime(fmt_spec), v.get<double>());
}

}  // namespace

void progress_to_stderr(const std::string& line) {
  fmt::print(stderr, "{}\n", line);
  std::fflush(stderr);
}

Command add_quantize(CLI::App& app) {
  struct Args {
    std::string scenario, target, out = "out";
    std::vector<std::string> sets;
    int jobs = 1;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("quantize", "Per-layer quantization error, sensitivity and the smallest set of layers "
                                             "to keep in higher precision for an output target");
  sub->add_option("SCENARIO", a->scenario, "Scenario file with a quantization: section")->required();
  sub->add_option("--target", a->target, "Output target: cosine>=X, sqnr>=X (dB), max_rel<=X or (training) loss_delta<=X "
                                         "(default: quantization.search.target)");
  sub->add_option("--out", a->out, "Output root (default out); result in <out>/<scenario>/quantize.json");
  sub->add_option("--set", a->sets, "Override a scenario key (key=value), repeatable");
  sub->add_option("--jobs,-j", a->jobs, "Simulations at a time (default 1)")->check(CLI::Range(1, 256));
  sub->add_flag("--json", a->json, "Print quantize.json instead of the table");
  return [a] {
    sim::QuantSearchOptions o;
    o.out_root = a->out;
    o.jobs = a->jobs;
    o.load.source_root = sim::find_source_root();
    for (const auto& s : a->sets) o.load.sets.push_back(sim::parse_set(s));
    if (!a->target.empty()) o.target = sim::parse_quant_target(a->target, "--target");
    const sim::QuantSearchResult r = sim::quantize_search(a->scenario, o, progress_to_stderr);
    const auto& j = r.report;
    if (a->json) {
      fmt::print("{}\n", j.dump(2));
    } else {
      fmt::print("{}: target {} on the outputs\n", j["scenario"].get<std::string>(), j["target"].get<std::string>());
      fmt::print("{:<20} {:>10} {:>10} {:>10}   {:>10} {:>10}\n", "layer", "sqnr_dB", "cosine", "max_rel",
                 "alone:cos", "alone:sqnr");
      for (const auto& l : j["layers"]) {
        const nlohmann::json none;
        const auto& e = l.contains("error") ? l["error"] : none;
        fmt::print("{:<20} {:>10} {:>10} {:>10}   {:>10} {:>10}\n", l["op"].get<std::string>(), cell(e, "sqnr_db", "{:.2f}"),
                   cell(e, "cosine", "{:.6f}"), cell(e, "max_rel", "{:.4f}"), cell(l["alone"], "cosine", "{:.6f}"),
                   cell(l["alone"], "sqnr_db", "{:.2f}"));
      }
      const bool loss = j["target"].get<std::string>().find("loss_delta") != std::string::npos;
      if (loss)
        for (const auto& l : j["layers"])
          fmt::print("{:<20} alone: loss delta {}\n", l["op"].get<std::string>(), cell(l["alone"], "loss_delta", "{:.3g}"));
      for (const auto& s : j["search"])
        fmt::print("keep [{}]: output cosine {}, sqnr {} dB{}{}\n", fmt::join(s["keep"].get<std::vector<std::string>>(), ", "),
                   cell(s["output"], "cosine", "{:.6f}"), cell(s["output"], "sqnr_db", "{:.2f}"),
                   s["output"].contains("loss_delta") ? ", loss delta " + cell(s["output"], "loss_delta", "{:.3g}") : std::string(),
                   s["meets"].get<bool>() ? "  <- meets the target" : "");
      fmt::print("keep in the compute dtype: [{}] ({} evaluations){}\n",
                 fmt::join(j["keep"].get<std::vector<std::string>>(), ", "), j["evaluations"].get<std::size_t>(),
                 r.target_met ? "" : "; the target is NOT met");
      if (!r.expectation_met)
        fmt::print("expectation failed: expect_keep {} but the search kept {}\n", j["expectation"]["expect_keep"].dump(),
                   j["keep"].dump());
      fmt::print("written: {}\n", (r.out_dir / "quantize.json").string());
    }
    return r.target_met && r.expectation_met ? 0 : 1;
  };
}

}  // namespace probelab::cli
