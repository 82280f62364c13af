#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <set>

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

TEST(ChipConfig, DefaultsAreTheAscend910bPresetAndDocumented) {
  const pc::ChipConfig d = pc::chip_preset("ascend910b");
  EXPECT_EQ(d.num_cores, 24u);
  EXPECT_EQ(d.vector_cores, 48u);  // the split Atlas A2 chip of CANN's Ascend910B2.ini
  EXPECT_EQ(d.l2_model, "shared");
  // The struct's own defaults are the coupled layout, reachable as a preset.
  const pc::ChipConfig coupled = pc::chip_preset("ascend910b_coupled");
  EXPECT_EQ(coupled.vector_cores, 0u);
  EXPECT_EQ(coupled.mte_bytes_per_cycle, pc::ChipConfig{}.mte_bytes_per_cycle);
  EXPECT_EQ(pc::ChipConfig{}.preset, "ascend910b_coupled");
  EXPECT_EQ(d.cube_m * d.cube_n * d.cube_k, 4096u);
  // 24 cores x 4096 MACs x 2 FLOP x 1.8 GHz
  EXPECT_NEAR(d.peak_cube_flops(), 353.9e12, 0.1e12);
  std::set<std::string> names;
  for (const auto& p : pc::chip_params()) {
    EXPECT_FALSE(p.doc.empty()) << p.name;
    EXPECT_FALSE(p.source.empty()) << p.name;
    EXPECT_TRUE(names.insert(p.name).second) << "duplicate " << p.name;
    EXPECT_NO_THROW(pc::get_param(d, p.name));
  }
  EXPECT_GE(names.size(), 28u);
  EXPECT_NE(pc::describe_chip_params().find("hbm_bandwidth_gbps"), std::string::npos);
  EXPECT_NO_THROW(d.validate());
}

TEST(ChipConfig, TinyPresetAndRegistry) {
  const auto names = pc::chip_preset_names();
  EXPECT_EQ(names, (std::vector<std::string>{"ascend910", "ascend910b", "ascend910b1", "ascend910b2", "ascend910b4",
                                              "ascend910b_coupled", "tiny", "tiny_coupled"}));
  const auto t = pc::chip_preset("tiny");
  EXPECT_EQ(t.num_cores, 2u);
  EXPECT_EQ(t.vector_cores, 4u);  // 2 AIC + 4 AIV of the default
  EXPECT_EQ(t.preset, "tiny");
  const auto msg = error_of([] { pc::chip_preset("ascend999"); });
  EXPECT_NE(msg.find("ascend999"), std::string::npos);
  EXPECT_NE(msg.find("tiny"), std::string::npos);
}

TEST(ChipConfig, UnknownKeyNamesKeyAndListsValidOnes) {
  pc::ChipConfig c;
  const auto msg = error_of([&] { pc::set_param(c, "hbm_bandwith_gbps", "100", "scen.yaml"); });
  EXPECT_NE(msg.find("scen.yaml"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'hbm_bandwith_gbps'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("hbm_bandwidth_gbps"), std::string::npos) << msg;  // listed as valid
  EXPECT_NE(msg.find("num_cores"), std::string::npos) << msg;
}

TEST(ChipConfig, BadValuesNameTheKey) {
  pc::ChipConfig c;
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"num_cores", "many"}, {"num_cores", "0"}, {"num_cores", "-3"}, {"clock_mhz", "1.5"},
           {"hbm_bandwidth_gbps", "fast"}, {"hbm_bandwidth_gbps", "-1"}, {"flush_denormals", "maybe"},
           {"fp_mode", "ieee"}, {"l1_bytes", "12XB"}, {"irq_latency_ns", "99999999999"}}) {
    const auto msg = error_of([&] { pc::set_param(c, key, value); });
    EXPECT_NE(msg.find("'" + key + "'"), std::string::npos) << key << "=" << value << ": " << msg;
    EXPECT_NE(msg.find(value), std::string::npos) << msg;
  }
  // Nothing was changed by the failed sets.
  EXPECT_EQ(c.num_cores, pc::ChipConfig{}.num_cores);
}

TEST(ChipConfig, KeyValueOverridesAndSuffixes) {
  pc::ChipConfig c;
  pc::apply_overrides(c, {"num_cores=4", "l1_bytes=256KiB", "hbm_bandwidth_gbps = 800.5", "fp_mode=saturation",
                          "flush_denormals=true", "hbm_channels=0x10"});
  EXPECT_EQ(c.num_cores, 4u);
  EXPECT_EQ(c.l1_bytes, 256u * 1024u);
  EXPECT_DOUBLE_EQ(c.hbm_bandwidth_gbps, 800.5);
  EXPECT_EQ(c.hbm_channels, 16u);
  EXPECT_EQ(c.fp_mode_bits(), probelab::spec::kFpModeSaturation | probelab::spec::kFpModeFlushDenormals);
  EXPECT_EQ(pc::get_param(c, "l1_bytes"), "262144");
  EXPECT_EQ(pc::get_param(c, "hbm_bandwidth_gbps"), "800.5");
  EXPECT_NE(error_of([&] { pc::apply_overrides(c, {"num_cores"}); }).find("key=value"), std::string::npos);
}

TEST(ChipConfig, FromYaml) {
  const auto node = YAML::Load("{preset: tiny, clock_mhz: 1000, hbm_latency_ns: 80}");
  const auto c = pc::chip_config_from_yaml(node, "s.yaml");
  EXPECT_EQ(c.preset, "tiny");
  EXPECT_EQ(c.num_cores, 2u);
  EXPECT_EQ(c.clock_mhz, 1000u);
  EXPECT_EQ(c.hbm_latency_ns, 80u);
  EXPECT_EQ(pc::chip_config_from_yaml(YAML::Load("tiny")).num_cores, 2u);
  const auto msg = error_of([] { pc::chip_config_from_yaml(YAML::Load("{preset: tiny, cores: 3}"), "s.yaml"); });
  EXPECT_NE(msg.find("s.yaml"), std::string::npos);
  EXPECT_NE(msg.find("'cores'"), std::string::npos);
  EXPECT_NE(error_of([] { pc::chip_config_from_yaml(YAML::Load("{num_cores: [1, 2]}")); }).find("'num_cores'"),
            std::string::npos);
}

TEST(ChipConfig, CrossChecks) {
  pc::ChipConfig c;
  c.hbm_interleave_bytes = 384;
  EXPECT_NE(error_of([&] { c.validate(); }).find("power of two"), std::string::npos);
  c = pc::ChipConfig{};
  c.num_cores = 0;  // set directly, bypassing set_param: validate re-checks ranges
  EXPECT_NE(error_of([&] { c.validate(); }).find("'num_cores'"), std::string::npos);
}
