// Limits and validation of the probe runtime's inputs: expression nesting and length, scope
// regexes, the dump directory, dump manifests (checksum, paths, delta chains), and watch points
// merged on one edge applying only at their own steps.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "probes/dump_writer.h"
#include "probes/expr.h"
#include "probes/probe_config.h"
#include "tests/probes/probe_test_util.h"

using namespace probe_test;
namespace fs = std::filesystem;
using probes::ProbeConfig;

namespace {

std::string repeat(const std::string& s, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += s;
  return out;
}

std::string expr_error(const std::string& text) {
  try {
    probes::Expr::parse(text);
  } catch (const probes::ExprError& e) {
    return e.what();
  }
  return "";
}

std::string config_error(const std::string& yaml) {
  try {
    ProbeConfig::from_string(yaml, "p.yaml");
  } catch (const probes::ConfigError& e) {
    return e.what();
  }
  return "";
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}


}  // namespace

TEST(Hardening, ExpressionsHaveLengthAndDepthLimitsNotStackOverflows) {
  EXPECT_NE(expr_error(repeat("(", 200000) + "1").find("characters (at most 4096)"), std::string::npos);
  EXPECT_NE(expr_error(repeat("-", 500000) + "1").find("at most 4096"), std::string::npos);
  EXPECT_NE(expr_error(repeat("(", 65) + "1" + repeat(")", 65)).find("nesting deeper than 64"), std::string::npos);
  EXPECT_NE(expr_error(repeat("!", 70) + "max_abs").find("nesting deeper than 64"), std::string::npos);
  // Within the limits: deep but legal nesting, and a long flat chain (a deep tree, evaluated fine).
  const probes::Expr nested = probes::Expr::parse(repeat("(", 60) + "max_abs > 1" + repeat(")", 60));
  probes::EvalContext ctx;
  ctx.set(probes::Var::MaxAbs, 2.0);
  EXPECT_TRUE(nested.test(ctx));
  const probes::Expr chain = probes::Expr::parse("0" + repeat(" + max_abs", 400) + " > 799");
  EXPECT_TRUE(chain.test(ctx));
  const probes::Expr copy = chain;  // copies and destructors walk the same tree
  EXPECT_TRUE(copy.test(ctx));
}

TEST(Hardening, ScopeRegexesWithinLimits) {
  EXPECT_NE(config_error("scope: '" + repeat("(", 50000) + "a" + repeat(")", 50000) + "'").find("invalid regex"),
            std::string::npos);
  EXPECT_NE(config_error("scope: '" + repeat("(", 17) + "a" + repeat(")", 17) + "'").find("deeper than 16"),
            std::string::npos);
  EXPECT_NE(config_error("scope: '((a{999}){999})'").find("more than 20000 states"), std::string::npos);
  EXPECT_NE(config_error("scope: 'a{30000}'").find("more than 20000 states"), std::string::npos);
  EXPECT_NE(config_error("scope: '(ab'").find("invalid regex"), std::string::npos);
  EXPECT_EQ(config_error("scope: 'net/layer[0-9]+/(fc|act){1,3}.*'"), "");
}

TEST(Hardening, DumpDirectoryStaysInsideTheOutputDirectory) {
  EXPECT_NE(config_error("output: {dir: ../x}").find("leaves the output directory"), std::string::npos);
  EXPECT_NE(config_error("output: {dir: a/../../x}").find("leaves the output directory"), std::string::npos);
  EXPECT_NE(config_error("output: {dir: /tmp/x}").find("is an absolute path"), std::string::npos);
  EXPECT_NE(config_error("output: {dir: ''}").find("is empty"), std::string::npos);
  EXPECT_NE(config_error("output: {dir: 'a b'}").find("has the character ' '"), std::string::npos);
  EXPECT_NE(config_error("output: {dir: a//b}").find("empty or '.' path component"), std::string::npos);
  EXPECT_EQ(config_error("output: {dir: dumps/probe-1}"), "");
}

TEST(Hardening, DuplicateKeysAndNaNInProbeConfigs) {
  EXPECT_NE(config_error("mode: full\nmode: hash\n").find("p.yaml:2: mode: duplicate key 'mode' (first given on line 1)"),
            std::string::npos)
      << config_error("mode: full\nmode: hash\n");
  EXPECT_NE(config_error("compare: {criteria: {cosine_min: .nan}}").find("got NaN"), std::string::npos);
}

TEST(Hardening, ManifestChecksumPathsAndDeltaChains) {
  const fs::path dir = temp_dir("hardening_manifest");
  probes::OutputOptions opts;
  opts.delta = true;
  probes::DumpWriter w(dir, opts, 0);
  for (std::uint32_t step = 0; step < 3; ++step) {
    probes::DumpEntry e;
    e.op = "fc";
    e.tensor = "fc:0";
    e.step = step;
    w.write_tensor(e, graph::Tensor::from_f32({4}, std::vector<float>{1, 2, 3, static_cast<float>(step)}));
  }
  w.write_manifest();
  nlohmann::json m = read_json(dir / "dump.json");
  EXPECT_NO_THROW(probes::check_manifest(m, "dump.json"));
  EXPECT_EQ(probes::load_dump(dir, m, m["entries"][2]).to_f32()[3], 2.0f);

  // Any change of content breaks the manifest's own checksum, whatever the formatting.
  nlohmann::json edited = m;
  edited["entries"][0]["step"] = 7;
  EXPECT_THROW(probes::check_manifest(edited, "dump.json"), probes::DumpError);
  EXPECT_NO_THROW(probes::check_manifest(nlohmann::json::parse(m.dump(4)), "dump.json"));
  nlohmann::json no_crc = m;
  no_crc.erase("manifest_crc32");
  EXPECT_THROW(probes::check_manifest(no_crc, "dump.json"), probes::DumpError);
  EXPECT_THROW(probes::check_manifest(nlohmann::json{{"data", 1}}, "dump.json"), probes::DumpError);

  // File names may not leave the dump directory, not even through a symbolic link.
  EXPECT_THROW(probes::dump_file_path(dir, "../../etc/passwd"), probes::DumpError);
  EXPECT_THROW(probes::dump_file_path(dir, "/etc/passwd"), probes::DumpError);
  fs::create_symlink("/etc", dir / "escape");
  EXPECT_THROW(probes::dump_file_path(dir, "escape/passwd"), probes::DumpError);
  EXPECT_NO_THROW(probes::dump_file_path(dir, "step0/fc.out0.npy"));

  // A delta chain that loops is an error, not a stack overflow.
  nlohmann::json loop = m;
  loop["entries"][0]["encoding"] = "xor_delta";
  loop["entries"][0]["delta_base"] = loop["entries"][2]["file"];
  try {
    probes::load_dump(dir, loop, loop["entries"][2]);
    ADD_FAILURE() << "no error";
  } catch (const probes::DumpError& e) {
    EXPECT_NE(std::string(e.what()).find("delta chain loops back"), std::string::npos) << e.what();
  }
  // A long chain is followed without recursion.
  probes::DumpWriter long_chain(dir / "long", opts, 0);
  for (std::uint32_t step = 0; step < 3000; ++step) {
    probes::DumpEntry e;
    e.op = "fc";
    e.step = step;
    long_chain.write_tensor(e, graph::Tensor::from_f32({2}, std::vector<float>{1, static_cast<float>(step)}));
  }
  long_chain.write_manifest();
  const nlohmann::json lm = read_json(dir / "long" / "dump.json");
  EXPECT_EQ(probes::load_dump(dir / "long", lm, lm["entries"][2999]).to_f32()[1], 2999.0f);

  // Missing and corrupted files name themselves.
  fs::remove(dir / m["entries"][0]["file"].get<std::string>());
  try {
    probes::load_dump(dir, m, m["entries"][1]);
    ADD_FAILURE() << "no error";
  } catch (const probes::DumpError& e) {
    EXPECT_NE(std::string(e.what()).find("step0/fc.out0.npy: missing"), std::string::npos) << e.what();
  }
}

TEST(Hardening, MergedWatchPointsApplyOnlyAtTheirOwnSteps) {
  // `every` takes statistics of every op at every step; `once` dumps relu1 in full at step 1
  // only. Both select relu1's output, so they share one probe: at steps 0 and 2 only the
  // statistics watch point applies.
  const fs::path out = temp_dir("hardening_merged");
  MiniExecutor ex(mlp(),
                  ProbeConfig::from_string("watch_points:\n"
                                           "  - {name: every, match: ['*'], mode: statistics}\n"
                                           "  - {name: once, match: ['relu1'], mode: full, steps: [1]}\n"),
                  out);
  for (std::uint32_t step = 0; step < 3; ++step) {
    ex.place_step({{"x", f16({2, 8}, ramp(16, 0.1f * static_cast<float>(step + 1)))}});
    ex.run_step(step);
  }
  ex.rt->finish();
  const nlohmann::json m = read_json(out / "dump" / "rank0" / "dump.json");
  std::map<std::uint32_t, std::string> relu1;
  for (const auto& e : m["entries"])
    if (e["op"] == "relu1") relu1[e["step"].get<std::uint32_t>()] = e["payload"].get<std::string>();
  EXPECT_EQ(relu1, (std::map<std::uint32_t, std::string>{{0, "statistics"}, {1, "full"}, {2, "statistics"}}))
      << m.dump(1);
}
