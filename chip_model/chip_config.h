// Parameters of one simulated chip, with documented defaults (Ascend 910B class), named presets,
// and overrides from scenario YAML or `key=value` strings. No SystemC here.
//
// Every parameter is described in chip_params() (name, type, unit, default, meaning, source of
// the figure); `probelab list` prints that table. Unknown keys are errors that name the key and
// list the valid ones; values of the wrong type or out of range are errors naming the key.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace YAML {
class Node;
}

namespace probelab::chip {

/// Thrown for unknown keys, bad values and unknown presets. what() names the key (and the
/// source, e.g. the scenario file, when the caller passed one).
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ChipConfig {
  /// Name of the preset this config started from. The defaults below are the coupled layout the
  /// model started with (preset "ascend910b_coupled"); the default preset "ascend910b" is the
  /// split Atlas A2 chip of CANN's files (chip_presets.cpp).
  std::string preset = "ascend910b_coupled";

  // ---- compute ----
  std::uint32_t num_cores = 24;    // AI cores; on a split chip the Cube cores (AIC)
  std::uint32_t vector_cores = 0;  // split chips: Vector cores (AIV), a multiple of num_cores; 0: coupled
  std::uint32_t clock_mhz = 1800;
  std::uint32_t cube_m = 16;  // Cube: m x n x k FP16 MACs per cycle per core
  std::uint32_t cube_n = 16;
  std::uint32_t cube_k = 16;
  std::uint32_t vector_bytes_per_cycle = 256;
  std::uint32_t mte_bytes_per_cycle = 64;  // one core's HBM <-> L1/UB port
  std::uint64_t l1_bytes = 512 * 1024;
  std::uint64_t l0a_bytes = 64 * 1024;
  std::uint64_t l0b_bytes = 64 * 1024;
  std::uint64_t l0c_bytes = 128 * 1024;
  std::uint64_t ub_bytes = 192 * 1024;
  std::uint32_t l1_l0a_bytes_per_cycle = 512;  // L1 -> L0A (Cube left operand), MTE1
  std::uint32_t l1_l0b_bytes_per_cycle = 256;  // L1 -> L0B (Cube right operand), MTE1
  std::uint32_t task_dispatch_ns = 200;

  // ---- L2 ----
  std::uint64_t l2_bytes = 192ull << 20;          // shared L2 that holds an op's reused operands
  std::uint32_t l2_read_bytes_per_cycle = 256;    // one core's L2 read port
  std::uint32_t l2_write_bytes_per_cycle = 256;   // one core's L2 write port ("shared" model)
  /// "op_reuse": within one op, blocks after their first load hit the L2 (nothing is kept
  /// between ops, stores go to HBM); "shared": l2_cache.h, lines stay resident across ops,
  /// stores are written back to HBM on eviction.
  std::string l2_model = "op_reuse";
  /// Shared L2 only: whether capture records are written into the L2 ("allocate") or past it to
  /// HBM ("bypass": Ascend C's SetL2CacheHint(CACHE_MODE_DISABLE) for data written once). Every
  /// other non-core access is coherent with the L2 either way (hbm.h attach_l2).
  std::string capture_l2 = "bypass";

  // ---- HBM ----
  std::uint64_t hbm_bytes = 64ull << 30;
  double hbm_bandwidth_gbps = 1600.0;  // GB/s (1e9 bytes/s), all channels together
  std::uint32_t hbm_channels = 32;
  std::uint32_t hbm_interleave_bytes = 512;
  std::uint32_t hbm_latency_ns = 120;

  // ---- host interface ----
  double pcie_bandwidth_gbps = 52.0;
  std::uint32_t pcie_latency_ns = 900;
  std::uint32_t mmio_latency_ns = 50;
  std::uint32_t irq_latency_ns = 2000;
  std::uint64_t capture_buffer_bytes = 8ull << 20;

  // ---- inter-chip links ----
  double link_bandwidth_gbps = 56.0;
  std::uint32_t link_latency_ns = 1000;
  std::uint32_t link_count = 7;

  // ---- numerics ----
  std::string fp_mode = "inf_nan";  // "inf_nan" | "saturation": reset value of kRegFpMode
  bool flush_denormals = false;     // reset value of kFpModeFlushDenormals
  bool supports_inf_nan = true;     // false: saturation only (kFpModeSaturation reads as 1)

  // ---- simulation ----
  std::uint32_t quantum_ns = 1000;  // temporal-decoupling quantum of every initiator

  /// Peak Cube throughput in FLOP/s (2 FLOP per MAC).
  double peak_cube_flops() const;
  /// Reset value of spec::kRegFpMode built from fp_mode and flush_denormals.
  std::uint32_t fp_mode_bits() const;
  /// Vector cores per AI core: vector_cores / num_cores on a split chip, 1 when coupled.
  std::uint32_t vector_per_core() const;
  /// Lanes of the Vector unit as the fault hooks see them: 32-bit lanes of one cycle's bytes.
  std::uint32_t vector_lanes() const { return vector_bytes_per_cycle / 4 > 0 ? vector_bytes_per_cycle / 4 : 1; }
  /// Cross-parameter checks (e.g. interleave is a power of two, fp_mode inf_nan only where
  /// supports_inf_nan); throws ConfigError naming the key.
  void validate() const;
};

enum class ParamType : std::uint8_t { UInt, Double, Bool, String };

/// Description of one parameter, for `probelab list` and error messages.
struct ParamInfo {
  std::string name;
  ParamType type;
  std::string unit;     // "", "MHz", "bytes", "GB/s", "ns", ...
  std::string doc;      // what it means
  std::string source;   // where the default comes from ("estimate: ..." when it is one)
  double min = 0, max = 0;             // numeric range (inclusive), for UInt/Double
  std::vector<std::string> choices;    // allowed values, for String
};

/// All parameters, in a stable documented order.
const std::vector<ParamInfo>& chip_params();

/// Parses `text` as the number `info` describes (UInt: decimal, 0x hex, KiB/MiB/GiB for "bytes";
/// Double) and checks its range; throws ConfigError naming `info.name` (prefixed with `where`).
/// For other parameter tables built from ParamInfo rows (the cluster parameters).
double parse_param_number(const ParamInfo& info, std::string_view text, std::string_view where = {});
/// What a value of `info` must be, for error messages: "one of a, b", "an integer in [1, 64]".
std::string expected_value(const ParamInfo& info);

/// Value of a parameter of `cfg` as text (the form accepted by set_param). Throws on unknown key.
std::string get_param(const ChipConfig& cfg, std::string_view key);

/// Sets one parameter from text. UInt accepts decimal, 0x hex and, for "bytes" parameters, the
/// suffixes KiB/MiB/GiB; Bool accepts true/false/1/0. Setting num_cores on a split chip keeps its
/// Vector cores per Cube core (vector_cores follows; set vector_cores after it to change them). Throws ConfigError naming `key` (prefixed
/// with `where` when not empty) on an unknown key, a malformed value or a value out of range.
void set_param(ChipConfig& cfg, std::string_view key, std::string_view value,
               std::string_view where = {});

/// Applies "key=value" strings in order (e.g. from the command line).
void apply_overrides(ChipConfig& cfg, const std::vector<std::string>& key_values,
                     std::string_view where = {});

/// Applies a YAML map of key: scalar. A key "preset" is ignored here (see chip_config_from_yaml).
void apply_yaml(ChipConfig& cfg, const YAML::Node& map, std::string_view where = {});

/// A chip config from a scenario's `chip:` node: either a scalar preset name, or a map with an
/// optional `preset` (default "ascend910b") and parameter overrides. Validated.
ChipConfig chip_config_from_yaml(const YAML::Node& node, std::string_view where = {});

/// Preset registry (chip_presets.cpp). "ascend910b" (the default): the split Atlas A2 chip of
/// CANN's Ascend910B2.ini; "ascend910b_coupled": the documented defaults above; "tiny": 2 Cube
/// and 4 Vector cores of the default with small buffers for fast tests and scenarios;
/// "ascend910b1", "ascend910b2", "ascend910b4" and "ascend910" from CANN's platform
/// configuration files (each figure cites its file and line there). Unknown names throw
/// ConfigError listing the presets.
ChipConfig chip_preset(std::string_view name);
std::vector<std::string> chip_preset_names();  // sorted

/// One line about a preset for `probelab list chips`: what it models and where its figures come from.
std::string chip_preset_summary(std::string_view name);

/// The parameters `probelab list chips` shows for every preset, in this order.
const std::vector<std::string>& chip_key_params();

/// One row per parameter: "name  default unit  doc  [source]" for `probelab list`.
std::string describe_chip_params(const ChipConfig& defaults = ChipConfig{});

}  // namespace probelab::chip
