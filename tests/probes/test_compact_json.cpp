// CompactObject and manifest_line: byte for byte what nlohmann's compact dump writes, on values
// chosen to hit every formatting branch (escapes, UTF-8, exponents, signed zero, NaN/inf, integers
// as doubles, optional manifest fields) and on random ones.
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "probes/anomaly.h"
#include "probes/compact_json.h"
#include "probes/dump_writer.h"

namespace {

using namespace probelab;
using nlohmann::json;

const std::vector<std::string> kStrings = {
    "",  "fc1/matmul", "a\"b", "back\\slash", "tab\there", "nl\n", "\x01\x1f", "caf\xc3\xa9",
    "\xe4\xb8\xad\xe6\x96\x87", "~del\x7f", "{json}:[1]", "/"};

std::vector<double> special_doubles() {
  return {0.0, -0.0, 1.0, -1.0, 3.0, 0.1, 1e-5, 1e-4, 123456789012345678.0, 1e15, 1e16, 1e17, 1e21, 1e22,
          1.5e300, -2.5e-300, std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::min(),
          std::numeric_limits<double>::max(), 65504.0, 6.103515625e-05, 0.3333333333333333,
          std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
          -std::numeric_limits<double>::infinity()};
}

TEST(CompactJson, StringsAndDoublesAsNlohmannWritesThem) {
  for (const std::string& s : kStrings) EXPECT_EQ(probes::json_quoted(s), json(s).dump()) << s;
  std::mt19937_64 rng(7);
  std::vector<double> values = special_doubles();
  for (int i = 0; i < 20000; ++i) {
    const double d = std::bit_cast<double>(rng());
    if (std::isfinite(d)) values.push_back(d);
    values.push_back(static_cast<double>(static_cast<float>(std::normal_distribution<double>(0, 100)(rng))));
  }
  for (double d : values) {
    probes::CompactObject o;
    o.add("v", d);
    const json expect = {{"v", probes::json_number(d)}};
    EXPECT_EQ(o.str(), expect.dump()) << d;
  }
}

TEST(CompactJson, InvalidUtf8ThrowsAsNlohmannDoes) {
  EXPECT_THROW(probes::json_quoted("bad\xff"), json::type_error);
  EXPECT_THROW(json(std::string("bad\xff")).dump(), json::type_error);
}

TEST(CompactJson, KeysInAnyOrderComeOutSortedAndNestedObjectsKeepTheirText) {
  probes::CompactObject inner;
  inner.add("z", std::uint64_t{1}).add("a", "x");
  probes::CompactObject o;
  o.add("op_id", std::uint64_t{18446744073709551615ULL}).add("op", "m").add_raw("nested", inner.str());
  const std::vector<std::int64_t> shape{2, 0, 7};
  o.add("shape", std::span<const std::int64_t>(shape)).add("empty", std::span<const std::int64_t>());
  const json expect = {{"op_id", 18446744073709551615ULL}, {"op", "m"}, {"nested", {{"z", 1}, {"a", "x"}}},
                       {"shape", shape}, {"empty", json::array()}};
  EXPECT_EQ(o.str(), expect.dump());
}

// The entry as a nlohmann tree (the oracle manifest_line must equal when dumped).
json entry_tree(const probes::DumpEntry& e) {
  json j = {{"op", e.op},
            {"op_id", e.op_id},
            {"tensor", e.tensor},
            {"edge", (e.is_input ? "in" : "out") + std::to_string(e.index)},
            {"step", e.step},
            {"rank", e.rank},
            {"dtype", graph::dtype_name(e.dtype)},
            {"shape", e.shape},
            {"format", graph::format_name(e.format)},
            {"source_format", graph::format_name(e.source_format)},
            {"payload", e.payload},
            {"trigger", e.trigger}};
  if (e.stats) j["statistics"] = probes::stats_json(*e.stats);
  char hex[32];
  if (e.hash) {
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(*e.hash));
    j["hash"] = hex;
  }
  if (!e.file.empty()) {
    j["file"] = e.file;
    j["encoding"] = e.encoding;
    if (!e.delta_base.empty()) j["delta_base"] = e.delta_base;
    j["compression"] = e.compressed ? "zstd" : "none";
    std::snprintf(hex, sizeof hex, "%08x", e.crc32);
    j["crc32"] = hex;
    std::snprintf(hex, sizeof hex, "%08x", e.data_crc32);
    j["data_crc32"] = hex;
    j["file_bytes"] = e.file_bytes;
    j["raw_bytes"] = e.raw_bytes;
  }
  return j;
}

TEST(CompactJson, ManifestLineEqualsTheEntrysJsonDump) {
  std::mt19937_64 rng(11);
  const std::vector<double> specials = special_doubles();
  auto pick = [&](const auto& v) { return v[rng() % v.size()]; };
  auto value = [&] {
    return rng() % 3 == 0 ? pick(specials) : std::normal_distribution<double>(0, 1e3)(rng);
  };
  for (int i = 0; i < 3000; ++i) {
    probes::DumpEntry e;
    e.op = pick(kStrings);
    e.tensor = pick(kStrings) + "/gradient";
    e.op_id = static_cast<std::uint32_t>(rng());
    e.is_input = rng() % 2;
    e.index = static_cast<std::uint16_t>(rng() % 12);
    e.step = static_cast<std::uint32_t>(rng() % 100000);
    e.rank = static_cast<std::uint32_t>(rng() % 4096);
    e.dtype = std::array{graph::DType::F16, graph::DType::F32, graph::DType::BF16}[rng() % 3];
    e.shape.resize(rng() % 5);
    for (auto& d : e.shape) d = static_cast<std::int64_t>(rng() % 5000);
    e.format = rng() % 2 ? graph::Format::NCHW : graph::Format::ND;
    e.source_format = rng() % 2 ? graph::Format::NC1HWC0 : graph::Format::ND;
    e.payload = std::array{"statistics", "full", "hash"}[rng() % 3];
    e.trigger = std::array{"capture", "full_dump", "break"}[rng() % 3];
    if (rng() % 4) {
      spec::CaptureStats s;
      s.min = value(), s.max = value(), s.mean = value(), s.abs_mean = value(), s.std = value();
      s.l2 = value(), s.max_abs = value();
      s.count = rng(), s.nan_count = rng() % 9, s.inf_count = rng() % 9, s.zero_count = rng() % 1000;
      e.stats = s;
    }
    if (rng() % 3 == 0) e.hash = rng();
    if (rng() % 2) {
      e.file = "step" + std::to_string(e.step) + "/" + pick(kStrings) + ".npy";
      e.encoding = rng() % 2 ? "raw" : "xor_delta";
      if (rng() % 2) e.delta_base = "step0/x.npy";
      e.compressed = rng() % 2;
      e.crc32 = static_cast<std::uint32_t>(rng()), e.data_crc32 = static_cast<std::uint32_t>(rng());
      e.file_bytes = rng() % 100000000, e.raw_bytes = rng();
    }
    ASSERT_EQ(probes::manifest_line(e), entry_tree(e).dump()) << i;
  }
}

}  // namespace
