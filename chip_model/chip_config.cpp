#include "chip_model/chip_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <variant>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "chip_model/spec/registers.h"

namespace probelab::chip {
namespace {

using Member = std::variant<std::uint32_t ChipConfig::*, std::uint64_t ChipConfig::*, double ChipConfig::*,
                            bool ChipConfig::*, std::string ChipConfig::*>;

struct Param {
  ParamInfo info;
  Member member;
};

constexpr double kU32Max = 4294967295.0;

Param u32(std::string name, std::uint32_t ChipConfig::*m, std::string unit, double lo, double hi,
          std::string doc, std::string source) {
  return {{std::move(name), ParamType::UInt, std::move(unit), std::move(doc), std::move(source), lo, hi, {}}, m};
}
Param u64(std::string name, std::uint64_t ChipConfig::*m, std::string unit, double lo, double hi,
          std::string doc, std::string source) {
  return {{std::move(name), ParamType::UInt, std::move(unit), std::move(doc), std::move(source), lo, hi, {}}, m};
}
Param dbl(std::string name, double ChipConfig::*m, std::string unit, double lo, double hi, std::string doc,
          std::string source) {
  return {{std::move(name), ParamType::Double, std::move(unit), std::move(doc), std::move(source), lo, hi, {}}, m};
}

const std::vector<Param>& params() {
  static const std::vector<Param> table = [] {
    std::vector<Param> p;
    const std::string hc19 = "Huawei, DaVinci architecture, Hot Chips 31 (2019)";
    // compute
    p.push_back(u32("num_cores", &ChipConfig::num_cores, "", 1, 64,
                    "AI cores on the chip: Cube cores (AIC) on a split chip, coupled Cube+Vector cores otherwise",
                    "CANN Ascend910B2.ini [SoCInfo] cube_core_cnt=24 (910B4-1: 20; the 2019 Ascend 910: 32)"));
    p.push_back(u32("vector_cores", &ChipConfig::vector_cores, "", 0, 256,
                    "Vector cores (AIV) of a split chip, a multiple of num_cores; Vector-only ops tile over "
                    "them (each with its own MTE port and Vector unit). 0: coupled, each AI core holds both",
                    "CANN platform_config Ascend910B*.ini [SoCInfo] vector_core_cnt, cube_vector_combine=split"));
    p.push_back(u32("clock_mhz", &ChipConfig::clock_mhz, "MHz", 1, 10000, "AI core clock",
                    "estimate: 24 cores x 4096 MAC x 2 x 1.8 GHz = 354 TFLOPS FP16, within the 280-376 TFLOPS "
                    "published for 910B SKUs"));
    p.push_back(u32("cube_m", &ChipConfig::cube_m, "", 1, 256, "Cube tile rows (M) per cycle",
                    hc19 + ": Cube = 16x16x16 = 4096 FP16 MACs per cycle per core"));
    p.push_back(u32("cube_n", &ChipConfig::cube_n, "", 1, 256, "Cube tile columns (N) per cycle", hc19));
    p.push_back(u32("cube_k", &ChipConfig::cube_k, "", 1, 256, "Cube reduction depth (K) per cycle", hc19));
    p.push_back(u32("vector_bytes_per_cycle", &ChipConfig::vector_bytes_per_cycle, "bytes/cycle", 1, 65536,
                    "Vector unit width (128 FP16 or 64 FP32 lanes)", hc19 + ": 2048-bit vector unit"));
    p.push_back(u32("mte_bytes_per_cycle", &ChipConfig::mte_bytes_per_cycle, "bytes/cycle", 1, 65536,
                    "One core's memory-transfer-engine port to HBM (L1/UB <-> HBM)",
                    "CANN Ascend910B*.ini [AICoreMemoryRates] ddr_rate=32 (the default ascend910b); "
                    "ascend910b_coupled: 64, an estimate from up to 128 GB/s per core at ~2 GHz (Hot Chips 2019)"));
    p.push_back(u64("l1_bytes", &ChipConfig::l1_bytes, "bytes", 1024, 1ull << 30, "L1 buffer per core",
                    "CANN Ascend C docs for Atlas A2 (910B): L1 = 512 KiB"));
    p.push_back(u64("l0a_bytes", &ChipConfig::l0a_bytes, "bytes", 512, 1ull << 30, "L0A (Cube left operand) per core",
                    "CANN Ascend C docs for Atlas A2 (910B): L0A = 64 KiB"));
    p.push_back(u64("l0b_bytes", &ChipConfig::l0b_bytes, "bytes", 512, 1ull << 30, "L0B (Cube right operand) per core",
                    "CANN Ascend C docs for Atlas A2 (910B): L0B = 64 KiB"));
    p.push_back(u64("l0c_bytes", &ChipConfig::l0c_bytes, "bytes", 1024, 1ull << 30, "L0C (Cube FP32 accumulator) per core",
                    "CANN Ascend C docs for Atlas A2 (910B): L0C = 128 KiB"));
    p.push_back(u64("ub_bytes", &ChipConfig::ub_bytes, "bytes", 1024, 1ull << 30, "Unified Buffer (vector operands) per core",
                    "CANN Ascend C docs for Atlas A2 (910B): UB = 192 KiB"));
    p.push_back(u32("l1_l0a_bytes_per_cycle", &ChipConfig::l1_l0a_bytes_per_cycle, "bytes/cycle", 1, 65536,
                    "One core's L1 -> L0A path: a Cube step waits until its A block is in L0A (overlapped with "
                    "the previous step's Cube work)",
                    "CANN Ascend910B*.ini and Ascend910A.ini [AICoreMemoryRates] l1_to_l0_a_rate=512"));
    p.push_back(u32("l1_l0b_bytes_per_cycle", &ChipConfig::l1_l0b_bytes_per_cycle, "bytes/cycle", 1, 65536,
                    "One core's L1 -> L0B path (as l1_l0a_bytes_per_cycle, for the B block)",
                    "CANN Ascend910B*.ini and Ascend910A.ini [AICoreMemoryRates] l1_to_l0_b_rate=256"));
    p.push_back(u32("task_dispatch_ns", &ChipConfig::task_dispatch_ns, "ns", 0, 1e7,
                    "Device-side cost of dispatching one task from a stream (scheduler, descriptor decode)",
                    "estimate"));
    // L2
    p.push_back(u64("l2_bytes", &ChipConfig::l2_bytes, "bytes", 0, 1ull << 36,
                    "Shared L2: an op whose operands (and output) fit in it loads each block from HBM once, "
                    "later loads of the block hit the L2. 0: no L2, every load from HBM",
                    "Ascend 910B public spec: 192 MB (CANN Ascend910B1.ini [SoCInfo] l2_size=201326592)"));
    p.push_back(u32("l2_read_bytes_per_cycle", &ChipConfig::l2_read_bytes_per_cycle, "bytes/cycle", 1, 65536,
                    "One core's L2 read port (an L2 hit moves at this rate)",
                    "CANN Ascend910B*.ini [AICoreMemoryRates] l2_read_rate=110 (the default ascend910b); "
                    "ascend910b_coupled: 256, an estimate that feeds the Cube at full rate from 128 x 128 tiles"));
    p.push_back(u32("l2_write_bytes_per_cycle", &ChipConfig::l2_write_bytes_per_cycle, "bytes/cycle", 1, 65536,
                    "One core's L2 write port (stores into the shared L2, l2_model=shared)",
                    "CANN Ascend910B*.ini [AICoreMemoryRates] l2_write_rate=86 (the default ascend910b); "
                    "ascend910b_coupled: 256 as its read port"));
    p.push_back({{"l2_model", ParamType::String, "",
                  "op_reuse: an op's repeated block loads hit the L2, nothing stays between ops, stores go to HBM; "
                  "shared: a chip-wide write-back L2 of l2_bytes in 512 B lines (LRU) that every op's tile loads and "
                  "stores go through, so data written or read by one op is an L2 hit for the next",
                  "model choice: shared on the presets from CANN's files (the default ascend910b, tiny); op_reuse on "
                  "ascend910b_coupled, the layout the model started with",
                  0, 0, {"op_reuse", "shared"}},
                 &ChipConfig::l2_model});
    p.push_back({{"capture_l2", ParamType::String, "",
                  "shared L2: where capture records go. bypass: straight to HBM, invalidating any L2 copy of the "
                  "buffer (the records are written once and read only by the host's drain, so allocating them would "
                  "evict the model's working set); allocate: into the L2 as dirty lines like core stores (the drain "
                  "then reads them from the L2, and they evict other lines). Reads of captured tensors, host DMA and "
                  "collectives are coherent with the L2 in both cases",
                  "model choice: bypass, as Ascend C's GlobalTensor::SetL2CacheHint(CacheMode::CACHE_MODE_DISABLE) "
                  "advises for data read only once (CANN Ascend C API docs, Atlas A2)",
                  0, 0, {"bypass", "allocate"}},
                 &ChipConfig::capture_l2});
    // HBM
    p.push_back(u64("hbm_bytes", &ChipConfig::hbm_bytes, "bytes", 1 << 20, 1ull << 40, "HBM capacity",
                    "Ascend 910B product sheets: 64 GB HBM2e"));
    p.push_back(dbl("hbm_bandwidth_gbps", &ChipConfig::hbm_bandwidth_gbps, "GB/s", 0.001, 1e6,
                    "HBM bandwidth, all channels together (1 GB/s = 1e9 bytes/s)",
                    "estimate: ~1.6 TB/s quoted for 910B (4 HBM2e stacks)"));
    p.push_back(u32("hbm_channels", &ChipConfig::hbm_channels, "", 1, 1024,
                    "Independent HBM channels; addresses interleave over them",
                    "estimate: 4 HBM2e stacks x 8 channels"));
    p.push_back(u32("hbm_interleave_bytes", &ChipConfig::hbm_interleave_bytes, "bytes", 32, 1 << 20,
                    "Address interleave granule between channels (power of two)", "estimate"));
    p.push_back(u32("hbm_latency_ns", &ChipConfig::hbm_latency_ns, "ns", 0, 1e6,
                    "Latency of an HBM access beyond its transfer time", "estimate: typical HBM2e load-to-use latency"));
    // host interface
    p.push_back(dbl("pcie_bandwidth_gbps", &ChipConfig::pcie_bandwidth_gbps, "GB/s", 0.001, 1e6,
                    "Host link bandwidth per direction (charged by the host-side initiator)",
                    "estimate: PCIe 5.0 x16 (63 GB/s raw per direction) at ~83% efficiency"));
    p.push_back(u32("pcie_latency_ns", &ChipConfig::pcie_latency_ns, "ns", 0, 1e8,
                    "Host link latency per transaction (charged by the host-side initiator)",
                    "estimate: typical PCIe round trip for a non-posted read"));
    p.push_back(u32("mmio_latency_ns", &ChipConfig::mmio_latency_ns, "ns", 0, 1e8,
                    "Chip-side cost of one MMIO register access (added to the PCIe cost)", "estimate"));
    p.push_back(u32("irq_latency_ns", &ChipConfig::irq_latency_ns, "ns", 0, 1e9,
                    "From the device raising an interrupt to the host ISR running (MSI + OS entry)",
                    "estimate: MSI delivery plus interrupt entry on a server CPU"));
    p.push_back(u64("capture_buffer_bytes", &ChipConfig::capture_buffer_bytes, "bytes", 4096, 4294967295.0,
                    "Default size of each capture buffer the host driver allocates (kRegCapBufSize)",
                    "estimate: a few MiB, as debug trace buffers are sized"));
    // links
    p.push_back(dbl("link_bandwidth_gbps", &ChipConfig::link_bandwidth_gbps, "GB/s", 0.001, 1e6,
                    "Bandwidth of one inter-chip link per direction",
                    "estimate: HCCS on 910B, 56 GB/s per link (392 GB/s over 7 links) as quoted publicly"));
    p.push_back(u32("link_latency_ns", &ChipConfig::link_latency_ns, "ns", 0, 1e9,
                    "Latency of one inter-chip link transfer", "estimate"));
    p.push_back(u32("link_count", &ChipConfig::link_count, "", 1, 64,
                    "Inter-chip links per chip (full mesh of 8 in one server)",
                    "estimate: Atlas 800T A2, 8 chips fully connected by HCCS"));
    // numerics
    {
      Param fp{{"fp_mode", ParamType::String, "", "Reset float mode: inf_nan (IEEE 754) or saturation "
                "(Inf -> +-max finite, NaN -> 0)", "CANN docs: INF_NAN is the default on Atlas A2 (910B); "
                "saturation is the mode of the earlier Ascend 910", 0, 0, {"inf_nan", "saturation"}},
               &ChipConfig::fp_mode};
      p.push_back(std::move(fp));
    }
    p.push_back({{"flush_denormals", ParamType::Bool, "", "Reset value of flush-denormals-to-zero",
                  "model default: off (IEEE gradual underflow)", 0, 1, {}},
                 &ChipConfig::flush_denormals});
    p.push_back({{"supports_inf_nan", ParamType::Bool, "",
                  "The chip has the INF_NAN float mode; false: saturation only (fp_mode must be saturation and "
                  "the saturation bit of kRegFpMode reads as 1 whatever is written)",
                  "CANN platform_config: support_inf_nan=1 in Ascend910B*.ini, absent from Ascend910A.ini", 0, 1, {}},
                 &ChipConfig::supports_inf_nan});
    // simulation
    p.push_back(u32("quantum_ns", &ChipConfig::quantum_ns, "ns", 1, 1e9,
                    "Temporal-decoupling quantum of every initiator (accuracy/speed trade-off)",
                    "model choice: >= 1 us keeps SystemC overhead low (see NOTES)"));
    return p;
  }();
  return table;
}

const Param* find(std::string_view key) {
  for (const auto& p : params())
    if (p.info.name == key) return &p;
  return nullptr;
}

std::string valid_keys() {
  std::string s;
  for (const auto& p : params()) {
    if (!s.empty()) s += ", ";
    s += p.info.name;
  }
  return s;
}

std::string prefix(std::string_view where) { return where.empty() ? std::string() : std::string(where) + ": "; }

[[noreturn]] void bad_value(const ParamInfo& info, std::string_view value, std::string_view where,
                            std::string_view expected) {
  throw ConfigError(fmt::format("{}chip parameter '{}': bad value '{}' (expected {})", prefix(where), info.name,
                                value, expected));
}

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
}

std::string range_text(const ParamInfo& info) {
  return fmt::format("{} in [{}, {}]", info.type == ParamType::Double ? "a number" : "an integer", info.min,
                     info.max);
}

std::uint64_t parse_uint(const ParamInfo& info, std::string_view text, std::string_view where) {
  std::string s = trim(text);
  std::uint64_t mult = 1;
  if (info.unit == "bytes") {
    static const std::pair<const char*, std::uint64_t> suffixes[] = {
        {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"TiB", 1ull << 40}};
    for (const auto& [suf, m] : suffixes) {
      const std::string_view sv(suf);
      if (s.size() > sv.size() && s.ends_with(sv)) {
        mult = m;
        s = trim(std::string_view(s).substr(0, s.size() - sv.size()));
        break;
      }
    }
  }
  int base = 10;
  std::string_view digits = s;
  if (digits.starts_with("0x") || digits.starts_with("0X")) {
    base = 16;
    digits.remove_prefix(2);
  }
  std::uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
  if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size())
    bad_value(info, text, where, range_text(info) + (mult == 1 && info.unit == "bytes" ? ", optional KiB/MiB/GiB" : ""));
  if (mult != 1 && v > UINT64_MAX / mult) bad_value(info, text, where, range_text(info));
  v *= mult;
  if (static_cast<double>(v) < info.min || static_cast<double>(v) > info.max) bad_value(info, text, where, range_text(info));
  return v;
}

double parse_double(const ParamInfo& info, std::string_view text, std::string_view where) {
  const std::string s = trim(text);
  double v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v) || v < info.min ||
      v > info.max)
    bad_value(info, text, where, range_text(info));
  return v;
}

bool parse_bool(const ParamInfo& info, std::string_view text, std::string_view where) {
  const std::string s = trim(text);
  if (s == "true" || s == "1" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "0" || s == "no" || s == "off") return false;
  bad_value(info, text, where, "true or false");
}

std::string format_double(double v) { return fmt::format("{}", v); }

}  // namespace

double ChipConfig::peak_cube_flops() const {
  return 2.0 * cube_m * cube_n * cube_k * static_cast<double>(num_cores) * clock_mhz * 1e6;
}

std::uint32_t ChipConfig::vector_per_core() const {
  return vector_cores == 0 || num_cores == 0 ? 1 : std::max<std::uint32_t>(1, vector_cores / num_cores);
}

std::uint32_t ChipConfig::fp_mode_bits() const {
  std::uint32_t bits = 0;
  if (fp_mode == "saturation" || !supports_inf_nan) bits |= spec::kFpModeSaturation;
  if (flush_denormals) bits |= spec::kFpModeFlushDenormals;
  return bits;
}

void ChipConfig::validate() const {
  // Re-parsing every value through set_param applies the same type and range checks as loading.
  ChipConfig copy = *this;
  for (const auto& p : params()) set_param(copy, p.info.name, get_param(*this, p.info.name), "chip config");
  if ((hbm_interleave_bytes & (hbm_interleave_bytes - 1)) != 0)
    throw ConfigError(fmt::format("chip parameter 'hbm_interleave_bytes': {} is not a power of two",
                                  hbm_interleave_bytes));
  if (num_cores > 64) throw ConfigError("chip parameter 'num_cores': at most 64 cores are supported");
  if (vector_cores % num_cores != 0)
    throw ConfigError(fmt::format("chip parameter 'vector_cores': {} is not a multiple of num_cores ({}); a split chip "
                                  "pairs each Cube core with the same number of Vector cores",
                                  vector_cores, num_cores));
  if (fp_mode == "inf_nan" && !supports_inf_nan)
    throw ConfigError(fmt::format("chip parameter 'fp_mode': preset '{}' models a chip with the saturation float mode "
                                  "only (supports_inf_nan=false); inf_nan is not available, use fp_mode=saturation",
                                  preset));
}

std::string expected_value(const ParamInfo& info) {
  if (info.type == ParamType::String) return fmt::format("one of {}", fmt::join(info.choices, ", "));
  if (info.type == ParamType::Bool) return "true or false";
  return fmt::format("{} in [{}, {}]{}", info.type == ParamType::Double ? "a number" : "an integer", info.min, info.max,
                     info.unit == "bytes" ? " (or with a KiB, MiB or GiB suffix)" : "");
}

double parse_param_number(const ParamInfo& info, std::string_view text, std::string_view where) {
  if (info.type == ParamType::UInt) return static_cast<double>(parse_uint(info, text, where));
  return parse_double(info, text, where);
}

const std::vector<ParamInfo>& chip_params() {
  static const std::vector<ParamInfo> infos = [] {
    std::vector<ParamInfo> v;
    for (const auto& p : params()) v.push_back(p.info);
    return v;
  }();
  return infos;
}

std::string get_param(const ChipConfig& cfg, std::string_view key) {
  const Param* p = find(key);
  if (!p) throw ConfigError(fmt::format("unknown chip parameter '{}' (valid: {})", key, valid_keys()));
  return std::visit(
      [&](auto m) -> std::string {
        const auto& v = cfg.*m;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::string>) return v;
        else if constexpr (std::is_same_v<T, double>) return format_double(v);
        else return std::to_string(v);
      },
      p->member);
}

void set_param(ChipConfig& cfg, std::string_view key, std::string_view value, std::string_view where) {
  const Param* p = find(key);
  if (!p)
    throw ConfigError(fmt::format("{}unknown chip parameter '{}' (valid: {})", prefix(where), key, valid_keys()));
  const ParamInfo& info = p->info;
  // A split chip keeps its Vector cores per Cube core when the Cube cores are changed (a later
  // vector_cores setting wins).
  const std::uint32_t aiv_per_aic =
      key == "num_cores" && cfg.vector_cores > 0 && cfg.num_cores > 0 && cfg.vector_cores % cfg.num_cores == 0
          ? cfg.vector_cores / cfg.num_cores
          : 0;
  std::visit(
      [&](auto m) {
        auto& field = cfg.*m;
        using T = std::decay_t<decltype(field)>;
        if constexpr (std::is_same_v<T, bool>) {
          field = parse_bool(info, value, where);
        } else if constexpr (std::is_same_v<T, std::string>) {
          const std::string s = trim(value);
          if (std::find(info.choices.begin(), info.choices.end(), s) == info.choices.end())
            bad_value(info, value, where, "one of " + fmt::format("{}", fmt::join(info.choices, ", ")));
          field = s;
        } else if constexpr (std::is_same_v<T, double>) {
          field = parse_double(info, value, where);
        } else {
          const std::uint64_t v = parse_uint(info, value, where);
          if constexpr (std::is_same_v<T, std::uint32_t>) {
            if (v > static_cast<std::uint64_t>(kU32Max)) bad_value(info, value, where, range_text(info));
          }
          field = static_cast<T>(v);
        }
      },
      p->member);
  if (aiv_per_aic) cfg.vector_cores = aiv_per_aic * cfg.num_cores;
}

void apply_overrides(ChipConfig& cfg, const std::vector<std::string>& key_values, std::string_view where) {
  for (const auto& kv : key_values) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos)
      throw ConfigError(fmt::format("{}chip override '{}': expected key=value", prefix(where), kv));
    set_param(cfg, trim(std::string_view(kv).substr(0, eq)), std::string_view(kv).substr(eq + 1), where);
  }
}

void apply_yaml(ChipConfig& cfg, const YAML::Node& map, std::string_view where) {
  if (!map || map.IsNull()) return;
  if (!map.IsMap()) throw ConfigError(fmt::format("{}chip: expected a map of parameter: value", prefix(where)));
  for (const auto& kv : map) {
    const auto key = kv.first.as<std::string>();
    if (key == "preset") continue;
    if (!kv.second.IsScalar())
      throw ConfigError(fmt::format("{}chip parameter '{}': expected a scalar value", prefix(where), key));
    set_param(cfg, key, kv.second.Scalar(), where);
  }
}

ChipConfig chip_config_from_yaml(const YAML::Node& node, std::string_view where) {
  ChipConfig cfg = chip_preset("ascend910b");
  if (!node || node.IsNull()) return cfg;
  if (node.IsScalar()) {
    cfg = chip_preset(node.Scalar());
  } else if (node.IsMap()) {
    if (const auto p = node["preset"]) {
      if (!p.IsScalar()) throw ConfigError(fmt::format("{}chip.preset: expected a preset name", prefix(where)));
      cfg = chip_preset(p.Scalar());
    }
    apply_yaml(cfg, node, where);
  } else {
    throw ConfigError(fmt::format("{}chip: expected a preset name or a map", prefix(where)));
  }
  cfg.validate();
  return cfg;
}

std::string describe_chip_params(const ChipConfig& defaults) {
  std::string out;
  for (const auto& p : params()) {
    const auto& i = p.info;
    out += fmt::format("{:<24} {:>14} {:<12} {}\n{:<24} {:>14} {:<12} [{}]\n", i.name, get_param(defaults, i.name),
                       i.unit, i.doc, "", "", "", i.source);
  }
  return out;
}

}  // namespace probelab::chip
