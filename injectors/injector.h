// The injector interface and registry. An injector is one fault, described by a replayable
// descriptor (kind + validated parameters + seed), that acts on the chip model only through the
// FaultHooks sites it overrides, and logs proof of every application (site, bits before/after).
// A descriptor that never fires says so in its report, so that "nothing detected" is never
// mistaken for a pass.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "chip_model/hooks/fault_hooks.h"
#include "graph/graph.h"
#include "injectors/params.h"

namespace probelab::inject {

/// Where a tensor lives in a chip's HBM: address of its bytes (logical row-major layout of
/// `desc.dtype`, `desc.format` as stored).
struct TensorPlacement {
  std::uint64_t addr = 0;
  graph::TensorDesc desc;
};

/// What an injector resolves its site against when it is created.
struct InjectionEnv {
  const graph::Graph* executed = nullptr;  // the snapshot whose op ids the chip reports
  std::uint32_t ranks = 1;
  std::uint32_t steps = 1;
  std::uint64_t seed = 0;  // scenario seed: an injector's default seed derives from it and its index
  /// Placement of a tensor on a rank; must answer before the simulation starts for injectors
  /// that schedule HBM faults. Empty or nullopt: unknown.
  std::function<std::optional<TensorPlacement>(std::uint32_t rank, const std::string& tensor)> placement;
  std::uint32_t hbm_channels = 0;  // of the chip config (0: unknown, not checked)
  std::uint32_t cores = 0;         // AI cores of the chip config (0: unknown, not checked)
  std::uint32_t vector_lanes = 0;  // lanes of the Vector unit (ChipConfig::vector_lanes; 0: not checked)
  /// The link chip `src` sends on towards chip `dst` (the first of the route), for injectors that
  /// name a link: its name, and whether it reaches dst directly (false: dst is further along an
  /// HCCS ring). Null: not known, not checked.
  struct FirstLink {
    std::string name;
    bool direct = true;
  };
  std::function<FirstLink(std::uint32_t src, std::uint32_t dst)> first_link = nullptr;
};

/// One application of a fault, as logged by the injector.
struct ProofEntry {
  chip::FaultSite site;
  std::string op;        // op name at the site ("" without task context)
  std::string location;  // e.g. "output 0 element 17 [0, 2, 1]"
  std::string before;    // bits or setting before
  std::string after;     // bits or setting after
};
nlohmann::json to_json(const ProofEntry& e);

class Injector : public chip::FaultHooks {
 public:
  /// Keeps the first kMaxProof entries of each rank; every application is counted. Reports list
  /// the entries by rank (in application order within a rank), at most kMaxProof in all, so a
  /// distributed run (one injector per partition) reports what one process does.
  static constexpr std::size_t kMaxProof = 64;

  const std::string& kind() const { return kind_; }
  /// The replayable descriptor: kind, every parameter with defaults filled in, seed.
  const nlohmann::json& descriptor() const { return descriptor_; }
  /// The logged entries, by rank.
  std::vector<ProofEntry> proof() const;
  std::uint64_t applications() const { return applications_; }
  bool fired() const { return applications_ > 0; }
  /// {kind, descriptor, fired, applications, proof: [...], note}
  nlohmann::json report() const;
  /// What this instance saw, per rank: {kind, descriptor, ranks: [{rank, applications, proof}]}.
  nlohmann::json partial_report() const;
  /// report() of the partial reports of one injector from several partitions (disjoint ranks).
  static nlohmann::json merge_reports(const std::vector<nlohmann::json>& partials);

  void set_identity(std::string kind, nlohmann::json descriptor);
  /// Seed of the injector's random draws (given in the descriptor or derived from the scenario).
  std::uint64_t seed() const { return seed_; }

 protected:
  void record(ProofEntry e);
  /// Op name for an op id of the executed graph ("op#<id>" if out of range).
  std::string op_name(std::uint32_t op_id) const;
  const graph::Graph* graph_ = nullptr;
  std::uint64_t seed_ = 0;

 private:
  std::string kind_;
  nlohmann::json descriptor_;
  std::map<std::uint32_t, std::vector<ProofEntry>> proof_;  // by rank
  std::map<std::uint32_t, std::uint64_t> rank_applications_;
  std::uint64_t applications_ = 0;
};

struct InjectorInfo {
  std::string name;
  std::string doc;
  std::vector<ParamSpec> params;
  std::function<std::unique_ptr<Injector>(const Params&, const InjectionEnv&)> create;
};

/// Injector kinds by name (iteration in name order).
class InjectorRegistry {
 public:
  static InjectorRegistry& instance();
  void add(InjectorInfo info);
  const InjectorInfo* find(const std::string& name) const;
  const std::map<std::string, InjectorInfo>& all() const { return infos_; }

  /// Validates `desc` (a mapping with `kind`) and builds the injector. `where` locates the
  /// descriptor in its file for messages. Throws InjectorError.
  std::unique_ptr<Injector> create(const YAML::Node& desc, const std::string& where, const InjectionEnv& env) const;

 private:
  std::map<std::string, InjectorInfo> infos_;
};

/// Registers the built-in injectors (called by InjectorRegistry::instance()).
void register_builtin_injectors(InjectorRegistry& r);

/// The `seed` parameter every injector accepts: given, or derived from the scenario seed and the
/// descriptor's text so that two descriptors of one scenario draw differently.
ParamSpec seed_param();
std::uint64_t read_seed(const Params& p, const InjectionEnv& env);

/// Converts a YAML node to JSON (scalars that parse as integers/floats/bools become numbers/bools).
nlohmann::json yaml_to_json(const YAML::Node& n);

}  // namespace probelab::inject
