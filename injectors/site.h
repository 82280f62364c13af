// Shared pieces of injection sites: which ops, steps and ranks a descriptor targets, and
// element-level bit access in a tensor's bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "chip_model/hooks/fault_hooks.h"
#include "graph/graph.h"
#include "injectors/params.h"

namespace probelab::inject {

/// The common site keys: op (glob over op names of the executed graph), step, rank.
struct SiteFilter {
  std::set<std::uint32_t> op_ids;  // empty with any_op: every op
  bool any_op = false;
  IndexSet steps;
  IndexSet ranks;

  bool matches(const chip::FaultSite& s) const;
  bool matches_op(std::uint32_t op_id) const { return any_op || op_ids.count(op_id) != 0; }
};

/// Param specs of the common keys (for an injector's ParamSpec list). `op_default` "" makes op required.
std::vector<ParamSpec> site_params(const std::string& op_default, const std::string& step_default = "0",
                                   const std::string& rank_default = "0");

/// Reads op/step/rank. `op_types` (non-empty) restricts matches to ops of these types; a glob that
/// matches nothing is an error listing a few op names. Ranks beyond env ranks are errors.
SiteFilter read_site(const Params& p, const graph::Graph* g, std::uint32_t ranks, std::uint32_t steps,
                     const std::vector<std::string>& op_types = {});

/// The op types the collective engine runs (not an AI core): AllReduce, ReduceScatter, AllGather,
/// Broadcast.
const std::vector<std::string>& collective_op_types();

/// Bit-level element access for the storage dtypes (F32, F16, BF16, I32, I64, Bool, F64).
std::size_t element_bits(graph::DType t);
std::uint64_t get_bits(std::span<const std::byte> bytes, graph::DType t, std::uint64_t index);
void set_bits(std::span<std::byte> bytes, graph::DType t, std::uint64_t index, std::uint64_t bits);
/// Encodes a double as the dtype's bit pattern (RNE); NaN gives the quiet NaN.
std::uint64_t encode_value(double v, graph::DType t);
std::string hex_bits(std::uint64_t bits, graph::DType t);
/// Multi-dimensional coordinate of a linear row-major index, e.g. "[0, 2, 1]".
std::string coord_str(const graph::Shape& shape, std::uint64_t linear);

/// splitmix64: counter-based, for seeded draws that do not depend on call order.
std::uint64_t splitmix64(std::uint64_t x);

}  // namespace probelab::inject
