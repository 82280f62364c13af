// `probelab dump decode`: zstd + XOR-delta dumps become the same .npy bytes a run without
// compression or deltas writes; foreign manifests and corrupt files are named errors (exit 2).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/cli/cli_test_util.h"

namespace probelab::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::TempDir;

using test::run;

std::string scenario(const std::string& name, const std::string& output) {
  return "name: " + name + "\nmodel: tinynet.yaml\nchip: tiny\nseed: 3\nsteps: 4\nprobes:\n  mode: full\n" +
         "  watch_points: [\"*\"]\n  output: " + output + "\n";
}

TEST(DumpDecode, DeltaAndZstdDumpsDecodeToThePlainBytes) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("packed.yaml", scenario("packed", "{compression: zstd, delta: true}"));
  dir.write("plain.yaml", scenario("plain", "{compression: none, delta: false}"));
  ASSERT_EQ(run("run packed.yaml plain.yaml --out out --no-trace --no-baseline", dir).code, 0);
  const test::CmdResult d = run("dump decode out/packed --json", dir);
  ASSERT_EQ(d.code, 0) << d.out << d.err;
  const json s = json::parse(d.out);
  EXPECT_GT(s["files"].get<int>(), 10);
  EXPECT_EQ(s["decompressed"], s["files"]);
  EXPECT_GT(s["undeltaed"].get<int>(), 0) << "steps after the first are deltas";
  const fs::path dec = dir.path() / "out/packed/dump/rank0/decoded", plain = dir.path() / "out/plain/dump/rank0";
  const json m = json::parse(test::slurp(dec / "dump.json"));
  int compared = 0;
  for (const auto& e : m["entries"]) {
    if (!e.contains("file")) continue;
    EXPECT_EQ(e["encoding"], "raw");
    EXPECT_EQ(e["compression"], "none");
    const std::string f = e["file"];
    ASSERT_TRUE(fs::exists(plain / f)) << f;
    EXPECT_EQ(test::slurp(dec / f), test::slurp(plain / f)) << f;
    ++compared;
  }
  EXPECT_EQ(compared, s["files"].get<int>());
  // the decoded directory is itself a dump: compare finds no divergence against the plain run
  EXPECT_EQ(run("compare out/packed/dump/rank0/decoded out/plain/dump/rank0", dir).code, 0);
  // --out mirrors the tree elsewhere
  ASSERT_EQ(run("dump decode out/packed --out elsewhere", dir).code, 0);
  EXPECT_TRUE(fs::exists(dir.path() / "elsewhere/dump/rank0/dump.json"));
}

TEST(DumpDecode, ForeignManifestsAndCorruptFilesAreNamedErrors) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  EXPECT_EQ(run("dump decode nowhere", dir).code, 2);
  fs::create_directories(dir.path() / "empty");
  test::CmdResult r = run("dump decode empty", dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no dump.json"), std::string::npos) << r.err;
  fs::create_directories(dir.path() / "foreign");
  dir.write("foreign/dump.json", R"({"task": "tensor", "level": "L1", "data": {}})");  // msprobe's dump.json
  r = run("dump decode foreign", dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("not a probelab dump manifest"), std::string::npos) << r.err;

  dir.write("p.yaml", scenario("p", "{compression: zstd, delta: true}"));
  ASSERT_EQ(run("run p.yaml --out out --no-trace --no-baseline", dir).code, 0);
  const json m = json::parse(test::slurp(dir.path() / "out/p/dump/rank0/dump.json"));
  std::string victim;
  for (const auto& e : m["entries"])
    if (e.contains("file")) victim = e["file"];
  ASSERT_FALSE(victim.empty());
  std::fstream f(dir.path() / "out/p/dump/rank0" / victim, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(10);
  f.put('\x5a');
  f.close();
  r = run("dump decode out/p", dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(victim), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("crc32 mismatch"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace probelab::sim
