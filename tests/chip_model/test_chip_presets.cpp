// The presets taken from CANN's platform configuration files (chip_presets.cpp): their figures,
// the derived peaks, and the float-mode rule of the saturation-only Ascend 910.
#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>

#include <functional>

#include "chip_model/chip_config.h"
#include "chip_model/spec/registers.h"

namespace pc = probelab::chip;

namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const pc::ConfigError& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST(ChipPresets, Ascend910bSplitPresetsCarryTheIniFigures) {
  struct Row {
    const char* name;
    std::uint32_t aic, aiv, mhz;
    std::uint64_t l2, hbm;
    double tflops;  // 2 x 4096 MAC x cores x clock
  };
  for (const Row& r : {Row{"ascend910b1", 24, 48, 1850, 192ull << 20, 64ull << 30, 363.7248},
                       Row{"ascend910b2", 24, 48, 1800, 192ull << 20, 64ull << 30, 353.8944},
                       Row{"ascend910b4", 20, 40, 1500, 168ull << 20, 32ull << 30, 245.76}}) {
    SCOPED_TRACE(r.name);
    const pc::ChipConfig c = pc::chip_preset(r.name);
    EXPECT_EQ(c.preset, r.name);
    EXPECT_EQ(c.num_cores, r.aic);
    EXPECT_EQ(c.vector_cores, r.aiv);
    EXPECT_EQ(c.vector_per_core(), 2u);
    EXPECT_EQ(c.clock_mhz, r.mhz);
    EXPECT_EQ(c.l2_bytes, r.l2);
    EXPECT_EQ(c.hbm_bytes, r.hbm);
    EXPECT_EQ(c.mte_bytes_per_cycle, 32u);      // ddr_rate
    EXPECT_EQ(c.l2_read_bytes_per_cycle, 110u);  // l2_read_rate
    EXPECT_EQ(c.l0a_bytes, 64u << 10);
    EXPECT_EQ(c.l0b_bytes, 64u << 10);
    EXPECT_EQ(c.l0c_bytes, 128u << 10);
    EXPECT_EQ(c.l1_bytes, 512u << 10);
    EXPECT_EQ(c.ub_bytes, 192u << 10);
    EXPECT_EQ(c.fp_mode, "inf_nan");
    EXPECT_TRUE(c.supports_inf_nan);
    EXPECT_EQ(c.fp_mode_bits() & probelab::spec::kFpModeSaturation, 0u);
    EXPECT_NEAR(c.peak_cube_flops() / 1e12, r.tflops, 1e-6);
    EXPECT_NO_THROW(c.validate());
    EXPECT_FALSE(pc::chip_preset_summary(r.name).empty());
  }
}

TEST(ChipPresets, Ascend910IsCoupledAndSaturationOnly) {
  const pc::ChipConfig c = pc::chip_preset("ascend910");
  EXPECT_EQ(c.num_cores, 32u);
  EXPECT_EQ(c.vector_cores, 0u);
  EXPECT_EQ(c.vector_per_core(), 1u);
  EXPECT_EQ(c.clock_mhz, 1000u);
  EXPECT_EQ(c.l2_bytes, 32u << 20);
  EXPECT_EQ(c.l0c_bytes, 256u << 10);
  EXPECT_EQ(c.l1_bytes, 1u << 20);
  EXPECT_EQ(c.ub_bytes, 256u << 10);
  EXPECT_EQ(c.fp_mode, "saturation");
  EXPECT_FALSE(c.supports_inf_nan);
  EXPECT_NE(c.fp_mode_bits() & probelab::spec::kFpModeSaturation, 0u);
  EXPECT_NEAR(c.peak_cube_flops() / 1e12, 262.144, 1e-6);
  EXPECT_NO_THROW(c.validate());

  // Asking for INF_NAN on it is an error naming the key.
  pc::ChipConfig bad = c;
  pc::set_param(bad, "fp_mode", "inf_nan");
  const std::string msg = error_of([&] { bad.validate(); });
  EXPECT_NE(msg.find("'fp_mode'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ascend910"), std::string::npos) << msg;
  EXPECT_NE(msg.find("saturation"), std::string::npos) << msg;
  // ... also through the scenario's chip map.
  const std::string yaml_msg =
      error_of([] { pc::chip_config_from_yaml(YAML::Load("{preset: ascend910, fp_mode: inf_nan}"), "s.yaml"); });
  EXPECT_NE(yaml_msg.find("'fp_mode'"), std::string::npos) << yaml_msg;
}

TEST(ChipPresets, VectorCoresMustPairWithTheCubeCores) {
  pc::ChipConfig c = pc::chip_preset("ascend910b1");
  c.vector_cores = 50;
  const std::string msg = error_of([&] { c.validate(); });
  EXPECT_NE(msg.find("'vector_cores'"), std::string::npos) << msg;
  c.vector_cores = 72;  // 1 : 3 is a valid pairing
  EXPECT_NO_THROW(c.validate());
  EXPECT_EQ(c.vector_per_core(), 3u);
}

TEST(ChipPresets, KeyParamsExistAndTheLegacyPresetsKeepTheirFigures) {
  for (const auto& name : pc::chip_preset_names()) {
    const pc::ChipConfig c = pc::chip_preset(name);
    for (const auto& k : pc::chip_key_params()) EXPECT_NO_THROW(pc::get_param(c, k)) << name << " " << k;
  }
  // ascend910b_coupled keeps the figures the timing model used before the split default (192 MiB
  // op-reuse L2, 256 B/cycle, 64 B/cycle MTE ports); the default and tiny are split, from CANN.
  const pc::ChipConfig c = pc::chip_preset("ascend910b_coupled");
  EXPECT_EQ(c.l2_bytes, 192u << 20);
  EXPECT_EQ(c.l2_read_bytes_per_cycle, 256u);
  EXPECT_EQ(c.vector_cores, 0u);
  EXPECT_EQ(c.mte_bytes_per_cycle, 64u);
  EXPECT_EQ(c.l2_model, "op_reuse");
  const pc::ChipConfig b = pc::chip_preset("ascend910b"), b2 = pc::chip_preset("ascend910b2");
  for (const auto& k : pc::chip_key_params()) EXPECT_EQ(pc::get_param(b, k), pc::get_param(b2, k)) << k;
  const pc::ChipConfig t = pc::chip_preset("tiny");
  EXPECT_EQ(t.vector_cores, 2 * t.num_cores);
  EXPECT_EQ(t.mte_bytes_per_cycle, b.mte_bytes_per_cycle);
  EXPECT_EQ(t.l2_model, "shared");
}
