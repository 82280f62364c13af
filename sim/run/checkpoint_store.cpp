// Step checkpoints on disk (checkpoint_store.h).
#include "sim/run/checkpoint_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "graph/npy.h"
#include "sim/run/runner.h"
#include "sim/run/simulation.h"
#include "sim/scenario/scenario_error.h"

namespace probelab::sim {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
fs::path step_dir(const fs::path& root, std::uint32_t rank, std::uint32_t step) {
  return root / fmt::format("rank{}", rank) / fmt::format("step{}", step);
}
}  // namespace

void write_checkpoint(const fs::path& root, std::uint32_t rank, std::uint32_t step,
                      const std::map<std::string, graph::Tensor>& state) {
  const fs::path dir = step_dir(root, rank, step);
  fs::create_directories(dir);
  json tensors = json::array();
  std::uint64_t bytes = 0;
  for (const auto& [name, t] : state) {
    const std::string file = sanitize_name(name) + ".npy";
    graph::write_npy((dir / file).string(), t);
    tensors.push_back({{"name", name}, {"file", file}});
    bytes += t.nbytes();
  }
  const json j = {{"step", step}, {"rank", rank}, {"bytes", bytes}, {"tensors", tensors}};
  write_text_atomic(dir / "checkpoint.json", j.dump(1) + "\n");
}

void write_checkpoint_scenario(const fs::path& root, const Scenario& s) {
  fs::create_directories(root);
  YAML::Emitter e;
  e << s.resolved;
  write_text_atomic(root / "scenario.yaml", std::string(e.c_str()) + "\n");
  write_text_atomic(root / "run.json", json({{"file", s.file.string()}, {"seed", s.seed}}).dump(1) + "\n");
}

Scenario read_checkpoint_scenario(const fs::path& root, const LoadOptions& opts) {
  std::ifstream meta(root / "run.json"), text(root / "scenario.yaml");
  if (!meta || !text)
    throw ScenarioError(root.string(), 0, 0, "checkpoints",
                        "the checkpoints of a run (its scenario needs checkpoints: {every: N})");
  const json m = json::parse(meta);
  const std::string yaml((std::istreambuf_iterator<char>(text)), std::istreambuf_iterator<char>());
  LoadOptions o = opts;
  // The run's seed (it may have come from --seed, which scenario.yaml does not hold), unless the
  // caller sets another one (replay --set seed=S: steps K.. with other data and injections).
  const bool set_seed = std::any_of(o.sets.begin(), o.sets.end(), [](const auto& st) { return st.key == "seed"; });
  if (!o.seed && !set_seed) o.seed = m.at("seed").get<std::uint64_t>();
  return parse_scenario(yaml, m.at("file").get<std::string>(), o);
}

std::vector<std::uint32_t> checkpoint_steps(const fs::path& root, std::uint32_t rank) {
  std::vector<std::uint32_t> out;
  const fs::path dir = root / fmt::format("rank{}", rank);
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("step", 0) != 0 || !fs::exists(e.path() / "checkpoint.json")) continue;
    try {
      out.push_back(static_cast<std::uint32_t>(std::stoul(n.substr(4))));
    } catch (const std::exception&) {
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

[[noreturn]] void no_checkpoint(const fs::path& root, std::uint32_t rank, std::uint32_t step) {
  const auto have = checkpoint_steps(root, rank);
  if (have.empty() && rank > 0 && !checkpoint_steps(root, 0).empty())
    throw ScenarioError(root.string(), 0, 0, "ranks", "only ranks the run has checkpoints of (was ranks changed with --set?)",
                        fmt::format("rank {}, which has none", rank));
  throw ScenarioError(root.string(), 0, 0, "--from-step",
                      have.empty() ? std::string("a run with checkpoints (scenario key checkpoints: {every: N})")
                                   : fmt::format("a step with a checkpoint of rank {}: {}", rank, fmt::join(have, ", ")),
                      std::to_string(step));
}

}  // namespace

void require_checkpoint(const fs::path& root, std::uint32_t rank, std::uint32_t step) {
  std::error_code ec;
  if (!fs::is_regular_file(step_dir(root, rank, step) / "checkpoint.json", ec)) no_checkpoint(root, rank, step);
}

std::map<std::string, graph::Tensor> read_checkpoint(const fs::path& root, std::uint32_t rank, std::uint32_t step) {
  const fs::path dir = step_dir(root, rank, step);
  std::ifstream in(dir / "checkpoint.json");
  if (!in) no_checkpoint(root, rank, step);
  const json j = json::parse(in);
  std::map<std::string, graph::Tensor> state;
  for (const json& t : j.at("tensors"))
    state.emplace(t.at("name").get<std::string>(), graph::read_npy((dir / t.at("file").get<std::string>()).string()));
  return state;
}

}  // namespace probelab::sim
