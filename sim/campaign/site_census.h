// The injection sites a fault-free run reached: for every op, which hooks the chips called for it
// (an output or input slot, the Cube accumulation, a core buffer, the vector lanes, a fused inner
// op) and at which (rank, step). A campaign records it during its first fault-free run, and the
// trial generator draws only sites in it, so that a drawn fault can fire (an L0C flip on an op that
// never uses the Cube, a value on a collective's output, never does).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "chip_model/hooks/fault_hooks.h"
#include "graph/graph.h"

namespace probelab::sim {

class SiteCensus final : public chip::FaultHooks {
 public:
  /// Site names: "output:<slot>", "input:<slot>", "gemm", "vector_lanes", "fused_inner",
  /// "buffer:l1|l0a|l0b|l0c|ub".
  using Execution = std::pair<std::uint32_t, std::uint32_t>;  // (rank, step)

  explicit SiteCensus(const graph::Graph* executed = nullptr) : g_(executed) {}

  std::uint32_t sites() const override {
    return chip::kFaultOpInput | chip::kFaultOpOutput | chip::kFaultGemmAccumulation | chip::kFaultVectorLanes |
           chip::kFaultCoreBuffer | chip::kFaultFusedInner;
  }
  void on_op_input(const chip::FaultSite& s, std::uint16_t i, const graph::TensorDesc&, std::span<std::byte>) override;
  void on_op_output(const chip::FaultSite& s, std::uint16_t i, const graph::TensorDesc&, std::uint64_t,
                    std::span<std::byte>) override;
  void on_gemm_accumulation(const chip::FaultSite& s, chip::AccumulationMode&) override;
  void on_fused_inner(const chip::FaultSite& s, std::uint32_t, const std::string&, std::span<float>) override;
  void on_vector_lanes(const chip::FaultSite& s, const graph::TensorDesc&, std::uint64_t, std::uint32_t,
                       std::span<std::byte>) override;
  void on_core_buffer(const chip::FaultSite& s, chip::CoreBuffer b, std::span<std::byte>) override;

  /// Executions of `op` that reached `site` (empty: never).
  const std::set<Execution>& reached(const std::string& op, const std::string& site) const;
  bool empty() const { return sites_.empty(); }

  /// {op: {site: [[rank, step], ...]}}, ops and sites in name order.
  nlohmann::json to_json() const;
  static SiteCensus from_json(const nlohmann::json& j);

  /// The site a fault descriptor of `kind` needs (see above), or "" when it has no op site.
  static std::string site_of(const std::string& kind, const std::string& side, std::uint16_t slot,
                             const std::string& target);

 private:
  void note(const chip::FaultSite& s, const std::string& site);
  const graph::Graph* g_;
  std::map<std::string, std::map<std::string, std::set<Execution>>> sites_;
};

}  // namespace probelab::sim
