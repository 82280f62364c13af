// Warnings of `probelab run`: a variant's preparation warnings (a probe config that selects
// nothing) are reported like the scenario's own: once, naming the variant, on stdout, in
// summary.txt and report.json, and by `show`; --strict makes them bad input. A variant's runtime
// warnings are reported too, naming it, unless the scenario's own run gave the same. A runtime
// warning every rank gives is on stderr once.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/cli/cli_test_util.h"

namespace probelab::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::TempDir;

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

// A scenario on the tiny net with `probes` and one variant `variant` setting `set`.
std::string scenario(const std::string& name, const std::string& probes, const std::string& variant,
                     const std::string& set) {
  return "name: " + name + "\nmodel: tinynet.yaml\nchip: tiny\nseed: 3\nsteps: 2\nprobes: " + probes +
         "\nvariants:\n  - name: " + variant + "\n    set: " + set + "\n";
}

// vw.yaml: the scenario's watch point selects every op, its variant 'blind's selects nothing.
void write_blind_variant(TempDir& dir) {
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("vw.yaml", scenario("vw", "{watch_points: ['*']}", "blind", "{probes.watch_points: ['no_such_op']}"));
}
// `warnings` is one warning, starting with `named`.
void expect_only_warning(const json& warnings, const std::string& named) {
  ASSERT_EQ(warnings.size(), 1u) << warnings;
  EXPECT_EQ(warnings[0].get<std::string>().rfind(named, 0), 0u) << warnings;
}
const std::string kBlind = "variant 'blind': probes: the config selects nothing to capture";

TEST(VariantWarnings, AVariantSelectingNothingIsReportedOnceAndFailsWithStrict) {
  TempDir dir;
  write_blind_variant(dir);
  const std::string& named = kBlind;

  test::CmdResult r = test::run("run vw.yaml --out out --no-trace --no-baseline", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out, named), 1u) << r.out;
  EXPECT_EQ(count(test::slurp(dir.path() / "out/vw/summary.txt"), named), 1u);
  const json rep = json::parse(test::slurp(dir.path() / "out/vw/report.json"));
  expect_only_warning(rep["warnings"], named);

  r = test::run("run vw.yaml --out strict --no-trace --no-baseline --strict", dir);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(named), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.path() / "strict" / "vw")) << "nothing runs on bad input";
}

TEST(VariantWarnings, ShowListsAVariantsWarningAsRunReportsIt) {
  TempDir dir;
  write_blind_variant(dir);
  test::CmdResult r = test::run("show vw.yaml", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out, "warning: " + kBlind), 1u) << r.out;
  r = test::run("show vw.yaml --json", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const json j = json::parse(r.out);
  expect_only_warning(j["warnings"], kBlind);
}

TEST(VariantWarnings, AWarningTheScenarioGivesItselfIsNotRepeatedPerVariant) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("same.yaml", scenario("same", "{watch_points: ['no_such_op']}", "full", "{probes.mode: full}"));
  const test::CmdResult r = test::run("run same.yaml --out out --no-trace --no-baseline", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const json rep = json::parse(test::slurp(dir.path() / "out/same/report.json"));
  ASSERT_EQ(rep["warnings"].size(), 1u) << rep["warnings"];
  EXPECT_EQ(rep["warnings"][0].get<std::string>().find("variant"), std::string::npos) << rep["warnings"];
}

// Full capture compared on the host; variant 'tight' keeps 64 bytes of comparison store, which
// its run warns about at simulation time (the scenario's own run keeps everything).
TEST(VariantWarnings, AVariantsRuntimeWarningsAreReportedNamingIt) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("rt.yaml", scenario("rt", "{watch_points: ['*'], mode: full, compare: {enabled: true}}", "tight",
                                "{probes.compare.max_store_bytes: 64}"));
  const test::CmdResult r = test::run("run rt.yaml --out out --no-trace --no-baseline", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const json rep = json::parse(test::slurp(dir.path() / "out/rt/report.json"));
  ASSERT_FALSE(rep["warnings"].empty()) << rep["warnings"];
  const std::string full = "variant 'tight': comparison store full (64 bytes): ";
  for (const auto& w : rep["warnings"]) EXPECT_EQ(w.get<std::string>().rfind(full, 0), 0u) << w;
  const std::string first = rep["warnings"][0].get<std::string>();
  EXPECT_EQ(count(r.out, first), 1u) << r.out;
  EXPECT_EQ(count(test::slurp(dir.path() / "out/rt/summary.txt"), first), 1u);
}

// The same store limit on the scenario itself: its run and the variant's give the same warnings,
// which are reported once, as the scenario's.
TEST(VariantWarnings, ARuntimeWarningTheScenarioGivesItselfIsNotRepeatedPerVariant) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("rs.yaml", scenario("rs", "{watch_points: ['*'], mode: full, compare: {enabled: true, max_store_bytes: 64}}",
                                "again", "{seed: 4}"));
  const test::CmdResult r = test::run("run rs.yaml --out out --no-trace --no-baseline", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const json rep = json::parse(test::slurp(dir.path() / "out/rs/report.json"));
  ASSERT_FALSE(rep["warnings"].empty()) << rep["warnings"];
  for (const auto& w : rep["warnings"]) {
    EXPECT_EQ(w.get<std::string>().rfind("comparison store full (64 bytes): ", 0), 0u) << w;
  }
}

TEST(RankWarnings, ARuntimeWarningOfEveryRankIsOnStderrOnce) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("r16.yaml", "name: r16\nmodel: tinynet.yaml\nchip: tiny\nseed: 3\nsteps: 2\nranks: 16\n"
                        "probes: {watch_points: ['*', 'no_such_op']}\n");
  const test::CmdResult r = test::run("run r16.yaml --out out --no-trace --no-baseline", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string msg = "watch point 'wp1' selects no op or tensor";
  EXPECT_EQ(count(r.err, msg), 1u) << r.err;
  EXPECT_NE(r.err.find("[probes:runtime] warning: rank 0: " + msg + " (and 15 more ranks)\n"), std::string::npos)
      << r.err;
  // the report's list is the simulation's own, one entry for all ranks
  const json rep = json::parse(test::slurp(dir.path() / "out/r16/report.json"));
  EXPECT_EQ(rep["warnings"], json::array({msg})) << rep["warnings"];
}

}  // namespace
}  // namespace probelab::sim
