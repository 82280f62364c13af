// Chip presets (chip_config.h). The Ascend presets take their figures from CANN's platform
// configuration files, as published in CANN's runtime sources:
//   repository hicann/runtime (github.com/hicann/runtime), commit 681ef7610df13c8128982901142a2c869ddbb53e,
//   folder src/platform/platform_config/cann/
// Each figure below cites "<file>:<line> <key>=<value>". The files give per-core transfer rates in
// [AICoreMemoryRates] as bytes per cycle (ddr_rate, l2_read_rate, ...); they give no HBM
// bandwidth, no PCIe or link figures: those stay the estimates of the ascend910b defaults
// (chip_config.cpp says where each comes from).
#include <functional>
#include <map>

#include <fmt/format.h>

#include "chip_model/chip_config.h"

namespace probelab::chip {
namespace {

/// The figures Ascend910B1.ini and Ascend910B2.ini share (same line numbers in both files).
ChipConfig ascend910b_split(const char* name) {
  ChipConfig c;
  c.preset = name;
  c.num_cores = 24;                 // :19 cube_core_cnt=24
  c.vector_cores = 48;              // :20 vector_core_cnt=48 (:34 cube_vector_combine=split)
  c.hbm_bytes = 68719476736ull;     // :23 memory_size=68719476736
  c.l2_bytes = 201326592;           // :25 l2_size=201326592 (192 MiB)
  c.cube_m = c.cube_n = c.cube_k = 16;  // :42-44 cube_m_size=16 cube_n_size=16 cube_k_size=16
  c.vector_bytes_per_cycle = 256;   // :45 vec_calc_size=128 (FP16 lanes: 256 bytes)
  c.l0a_bytes = 65536;              // :46 l0_a_size=65536
  c.l0b_bytes = 65536;              // :47 l0_b_size=65536
  c.l0c_bytes = 131072;             // :48 l0_c_size=131072
  c.l1_bytes = 524288;              // :49 l1_size=524288
  c.ub_bytes = 196608;              // :56 ub_size=196608
  c.mte_bytes_per_cycle = 32;       // :71-73 ddr_rate=32 ddr_read_rate=32 ddr_write_rate=32
  c.l2_read_bytes_per_cycle = 110;  // :75 l2_read_rate=110
  c.l2_write_bytes_per_cycle = 86;  // :76 l2_write_rate=86
  c.l1_l0a_bytes_per_cycle = 512;   // :77 l1_to_l0_a_rate=512
  c.l1_l0b_bytes_per_cycle = 256;   // :78 l1_to_l0_b_rate=256
  c.l2_model = "shared";
  c.supports_inf_nan = true;        // :38 support_inf_nan=1
  c.fp_mode = "inf_nan";            // CANN default on Atlas A2; saturation "for compatibility only"
  return c;
}

struct Preset {
  std::function<ChipConfig()> make;
  std::string summary;
};

/// A 910B1/B2 preset: the shared figures at `mhz` (the files' cube_freq).
Preset split_preset(const char* name, std::uint32_t mhz, const char* sku) {
  return {[name, mhz] {
            ChipConfig c = ascend910b_split(name);
            c.clock_mhz = mhz;
            return c;
          },
          fmt::format("Atlas A2 910{0} from CANN Ascend910{0}.ini: split, 24 AIC + 48 AIV at {1} MHz, L2 192 MiB, "
                      "64 GiB HBM, DDR 32 / L2 read 110 B/cycle per core, INF_NAN default",
                      sku, mhz)};
}

const std::map<std::string, Preset, std::less<>>& presets() {
  static const std::map<std::string, Preset, std::less<>> m = {
      // The default: the Atlas A2 910B as CANN describes it, at Ascend910B2.ini's clock.
      {"ascend910b",
       {[] {
          ChipConfig c = ascend910b_split("ascend910b");
          c.clock_mhz = 1800;  // Ascend910B2.ini:41 cube_freq=1800
          return c;
        },
        "the default: the Atlas A2 910B as CANN's Ascend910B2.ini describes it (the figures of ascend910b2): split, "
        "24 AIC + 48 AIV at 1800 MHz, shared L2 192 MiB, DDR 32 / L2 read 110 B/cycle per core, INF_NAN default"}},
      {"ascend910b_coupled",
       {[] {
          ChipConfig c;
          c.preset = "ascend910b_coupled";
          return c;
        },
        "the model's documented defaults before the split chip: 24 coupled AI cores (Cube + Vector each) at 1800 MHz, "
        "64 B/cycle MTE ports, 256 B/cycle L2 port, op-reuse L2; kept for comparison"}},
      {"tiny",
       {[] {
          // Small and fast for tests and scenarios: 2 Cube cores and their 4 Vector cores of the
          // default chip, with HBM, L2 and buffers scaled down.
          ChipConfig c = ascend910b_split("tiny");
          c.clock_mhz = 1800;
          c.num_cores = 2;
          c.vector_cores = 4;
          c.hbm_bytes = 1ull << 30;
          c.hbm_bandwidth_gbps = 200.0;
          c.hbm_channels = 4;
          c.l2_bytes = 16ull << 20;  // 192 MiB x 2 / 24 cores
          c.capture_buffer_bytes = 64 * 1024;
          c.link_count = 7;
          return c;
        },
        "2 AIC + 4 AIV of ascend910b, 1 GiB HBM at 200 GB/s, 16 MiB L2, 64 KiB capture buffers: fast tests and "
        "scenarios"}},
      {"tiny_coupled",
       {[] {
          // tiny before the split default: 2 coupled cores of ascend910b_coupled (unit tests of
          // the coupled timing model, comparisons).
          ChipConfig c;
          c.preset = "tiny_coupled";
          c.num_cores = 2;
          c.hbm_bytes = 1ull << 30;
          c.hbm_bandwidth_gbps = 200.0;
          c.hbm_channels = 4;
          c.capture_buffer_bytes = 64 * 1024;
          c.link_count = 7;
          return c;
        },
        "2 coupled AI cores of ascend910b_coupled, 1 GiB HBM at 200 GB/s, 64 KiB capture buffers: tiny before the "
        "split default"}},
      // Ascend910B1.ini:41 cube_freq=1850, Ascend910B2.ini:41 cube_freq=1800; the rest shared (ascend910b_split).
      {"ascend910b1", split_preset("ascend910b1", 1850, "B1")},
      {"ascend910b2", split_preset("ascend910b2", 1800, "B2")},
      {"ascend910b4",
       {[] {
          // Ascend910B4-1.ini: as B1/B2 up to l2_size, one line earlier than them from core_type_list on.
          ChipConfig c = ascend910b_split("ascend910b4");
          c.num_cores = 20;                 // Ascend910B4-1.ini:19 cube_core_cnt=20
          c.vector_cores = 40;              // :20 vector_core_cnt=40 (:33 cube_vector_combine=split)
          c.hbm_bytes = 34359738368ull;     // :23 memory_size=34359738368
          c.l2_bytes = 176160768;           // :25 l2_size=176160768 (168 MiB)
          c.clock_mhz = 1500;               // :40 cube_freq=1500
          // :44-55 vec_calc_size, l0_*_size, l1_size, ub_size as B1; :70-74 ddr_rate=32, l2_read_rate=110;
          // :76-77 l1_to_l0_a_rate=512 l1_to_l0_b_rate=256 as B1;
          // :37 support_inf_nan=1.
          // Not in the file: HBM bandwidth. Estimate: half of B1's stacks (32 GiB vs 64 GiB), 800 GB/s.
          c.hbm_bandwidth_gbps = 800.0;
          c.hbm_channels = 16;
          return c;
        },
        "Atlas A2 910B4 from CANN Ascend910B4-1.ini: split, 20 AIC + 40 AIV at 1500 MHz, L2 168 MiB, 32 GiB HBM "
        "(800 GB/s: estimate), DDR 32 / L2 read 110 B/cycle per core, INF_NAN default"}},
      {"ascend910",
       {[] {
          // The 2019 Ascend 910, Ascend910A.ini: coupled AI cores, no INF_NAN mode.
          ChipConfig c;
          c.preset = "ascend910";
          c.num_cores = 32;                 // Ascend910A.ini:15 ai_core_cnt=32
          c.vector_cores = 0;               // :16 vector_core_cnt=0 (:32 core_type_list=AICore: coupled)
          c.l2_bytes = 33554432;            // :21 l2_size=33554432 (32 MiB)
          c.clock_mhz = 1000;               // :36 cube_freq=1000
          c.cube_m = c.cube_n = c.cube_k = 16;  // :37-39 cube_m_size=16 cube_n_size=16 cube_k_size=16
          c.vector_bytes_per_cycle = 256;   // :40 vec_calc_size=128
          c.l0a_bytes = 65536;              // :41 l0_a_size=65536
          c.l0b_bytes = 65536;              // :42 l0_b_size=65536
          c.l0c_bytes = 262144;             // :43 l0_c_size=262144
          c.l1_bytes = 1048576;             // :44 l1_size=1048576
          c.ub_bytes = 262144;              // :46 ub_size=262144
          c.mte_bytes_per_cycle = 32;       // :60-62 ddr_rate=32 ddr_read_rate=32 ddr_write_rate=32
          c.l2_read_bytes_per_cycle = 110;  // :64 l2_read_rate=110
          c.l2_write_bytes_per_cycle = 86;  // :65 l2_write_rate=86
          c.l1_l0a_bytes_per_cycle = 512;   // :66 l1_to_l0_a_rate=512
          c.l1_l0b_bytes_per_cycle = 256;   // :67 l1_to_l0_b_rate=256
          c.l2_model = "shared";
          c.supports_inf_nan = false;       // no support_inf_nan key in the file (B files :38 support_inf_nan=1)
          c.fp_mode = "saturation";
          // :19 memory_size is empty. Hot Chips 31 (2019): 4 HBM2 stacks, 32 GB, 1.2 TB/s.
          c.hbm_bytes = 32ull << 30;
          c.hbm_bandwidth_gbps = 1200.0;
          return c;
        },
        "the 2019 Ascend 910 from CANN Ascend910A.ini: 32 coupled AI cores at 1000 MHz, L2 32 MiB, DDR 32 / L2 "
        "read 110 B/cycle per core, saturation mode only; 32 GB HBM at 1.2 TB/s (Hot Chips 31)"}},
  };
  return m;
}

const Preset& find_preset(std::string_view name) {
  const auto& m = presets();
  const auto it = m.find(name);
  if (it == m.end())
    throw ConfigError(fmt::format("unknown chip preset '{}' (valid: {})", name, fmt::join(chip_preset_names(), ", ")));
  return it->second;
}

}  // namespace

ChipConfig chip_preset(std::string_view name) { return find_preset(name).make(); }

std::string chip_preset_summary(std::string_view name) { return find_preset(name).summary; }

const std::vector<std::string>& chip_key_params() {
  static const std::vector<std::string> keys = {
      "num_cores", "vector_cores", "clock_mhz", "l2_bytes", "hbm_bytes", "hbm_bandwidth_gbps",
      "mte_bytes_per_cycle", "l2_read_bytes_per_cycle", "fp_mode", "supports_inf_nan"};
  return keys;
}

std::vector<std::string> chip_preset_names() {
  std::vector<std::string> names;
  for (const auto& [k, v] : presets()) names.push_back(k);
  return names;
}

}  // namespace probelab::chip
