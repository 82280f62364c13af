// `probelab query RUN nonfinite TENSOR | exceeds TENSOR X | writer TENSOR ELEMENT [--step S]`:
// reverse queries on a finished run, answered from its checkpoints plus deterministic
// re-execution (sim/run/reverse_query.h). Exit 0 when the answer is found, 1 when the tensor never
// did it in the run, 2 on bad input (no run, no checkpoints, unknown tensor, element or step).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/cli/commands.h"
#include "sim/run/reverse_query.h"
#include "sim/scenario/scenario_error.h"

namespace probelab::cli {
namespace {

std::string value_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

void print_answer(const nlohmann::json& j) {
  const std::string q = j["query"];
  const std::string t = j["tensor"];
  const auto& s = j["search"];
  if (q == "writer") {
    const auto& w = j["writer"];
    fmt::print("{} element {} [{}] at the end of step {} (rank {}): last written by {} ({})\n", t,
               j["element"].get<std::uint64_t>(), fmt::join(j["coordinate"].get<std::vector<std::int64_t>>(), ", "),
               j["step"].get<std::uint32_t>(), j["rank"].get<std::uint32_t>(),
               w["op"].is_string() ? w["op"].get<std::string>() : std::string("the host"), w["kind"].get<std::string>());
    fmt::print("  before {}  after {}\n", j["before"].is_null() ? std::string("(not written yet)") : value_text(j["before"]),
               value_text(j["after"]));
    for (const auto& r : j["readers"])
      fmt::print("  read by {}@{}: {}{}\n", r["op"].get<std::string>(), r["step"].get<std::uint32_t>(), value_text(r["saw"]),
                 r["same"].get<bool>() ? "" : "  <- differs from what was written");
    if (j.contains("note")) fmt::print("  {}\n", j["note"].get<std::string>());
  } else {
    const std::string what = q == "nonfinite" ? "a NaN or Inf" : fmt::format("|x| > {:g}", j["threshold"].get<double>());
    if (!j["found"].get<bool>()) {
      fmt::print("{} (rank {}) never held {} in steps 0..{}\n", t, j["rank"].get<std::uint32_t>(), what,
                 s["run_steps"].get<int>() - 1);
    } else {
      fmt::print("{} (rank {}) first held {} at step {}, written by {}", t, j["rank"].get<std::uint32_t>(), what,
                 j["step"].get<std::uint32_t>(), j["written_by"].get<std::string>());
      if (j.contains("element"))
        fmt::print(": element {} [{}] = {}", j["element"].get<std::uint64_t>(),
                   fmt::join(j["coordinate"].get<std::vector<std::int64_t>>(), ", "), value_text(j["value"]));
      fmt::print("\n");
      if (j.contains("note")) fmt::print("  {}\n", j["note"].get<std::string>());
    }
  }
  fmt::print("  search: {}; {} checkpoint files read, {} re-execution{} ({} of {} steps simulated)\n",
             s.value("method", std::string("re-execution")), s.value("checkpoints_read", 0),
             s["simulations"].get<std::size_t>(), s["simulations"].get<std::size_t>() == 1 ? "" : "s",
             s["steps_simulated"].get<std::size_t>(), s["run_steps"].get<int>());
}

}  // namespace

Command add_query(CLI::App& app) {
  struct Args {
    std::string run, kind, tensor, out, extra;
    std::optional<std::uint32_t> step;
    std::uint32_t rank = 0;
    int jobs = 1;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("query", "Reverse queries on a finished run with checkpoints: when a tensor first became "
                                          "non-finite or exceeded a bound, which op last wrote an element");
  sub->add_option("RUN", a->run, "Output directory of a run whose scenario sets checkpoints: {every: N}")->required();
  sub->add_option("QUERY", a->kind, "nonfinite | exceeds | writer")->required()->check(CLI::IsMember({"nonfinite", "exceeds", "writer"}));
  sub->add_option("TENSOR", a->tensor, "Tensor name of the executed graph (probelab show lists them)")->required();
  sub->add_option("ARG", a->extra, "exceeds: the bound X; writer: the element (linear row-major index)");
  sub->add_option("--step", a->step, "writer: the step (default: the run's last)");
  sub->add_option("--rank", a->rank, "Rank (default 0)");
  sub->add_option("--out", a->out, "Where the re-executions and query.json go (default RUN/query)");
  sub->add_option("--jobs,-j", a->jobs, "Simulations at a time (default 1)")->check(CLI::Range(1, 256));
  sub->add_flag("--json", a->json, "Print query.json");
  return [a] {
    sim::QueryOptions o;
    o.kind = a->kind;
    o.tensor = a->tensor;
    o.step = a->step;
    o.rank = a->rank;
    o.out = a->out;
    o.jobs = a->jobs;
    if (a->kind == "exceeds" || a->kind == "writer") {
      const std::string expected = a->kind == "exceeds" ? "a bound X >= 0 after the tensor (exceeds TENSOR X)"
                                                        : "an element index after the tensor (writer TENSOR ELEMENT)";
      if (a->extra.empty()) throw sim::ScenarioError("query", 0, 0, "ARG", expected, "nothing");
      try {
        std::size_t used = 0;
        if (a->kind == "exceeds") {
          o.threshold = std::stod(a->extra, &used);
          if (!std::isfinite(o.threshold) || o.threshold < 0) used = 0;
        } else {
          if (a->extra.find_first_not_of("0123456789") != std::string::npos) throw std::invalid_argument("");
          o.element = std::stoull(a->extra, &used);
        }
        if (used != a->extra.size()) throw std::invalid_argument("");
      } catch (const std::exception&) {
        throw sim::ScenarioError("query", 0, 0, "ARG", expected, "'" + a->extra + "'");
      }
    } else if (!a->extra.empty()) {
      throw sim::ScenarioError("query", 0, 0, "ARG", "nothing after the tensor for nonfinite", "'" + a->extra + "'");
    }
    const sim::QueryResult r = sim::reverse_query(a->run, o, progress_to_stderr);
    if (a->json) fmt::print("{}\n", r.answer.dump(2));
    else print_answer(r.answer);
    return r.found ? 0 : 1;
  };
}

}  // namespace probelab::cli
