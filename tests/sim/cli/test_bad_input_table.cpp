// The bad-input table (bad_input_cases.yaml): one row per input a user may get wrong, each with
// the command, the exit code and a fragment of the message it must print. Every row is its own
// test (BadInput/Table.Case/<name>). Beyond the row's own checks, every row checks that the
// command wrote nothing outside --out, and that a command exiting with 2 wrote nothing at all
// outside --out and presented no report.
//
// Row keys:
//   name      test name ([a-z0-9_]+)
//   files     {path: content} written into a fresh directory first; content is text, or a map:
//               {npy: HEADER, data_bytes: N}  a .npy file: magic, version 1.0, HEADER, N zero bytes
//               {onnx: TEXTPROTO}             an ONNX model encoded with protoc from text format
//               {dir: true}                   an empty directory
//             and "@REPEAT(s,n)@" in text expands to s repeated n times
//   setup     commands run first (probelab subcommands, e.g. a run to compare); each must exit 0
//   mutate    edits after setup: {file: P, replace: [FROM, TO]} | {file: P, delete: true} |
//             {file: P, flip_byte: OFFSET} (xor: MASK, default 1) | {file: P, json_set: {POINTER: VALUE}, fix_crc: true}
//             (fix_crc recomputes a dump manifest's manifest_crc32 after the edit) | {file: P, write: TEXT}
//             (creates P or replaces it)
//   run       the probelab command line (without the binary)
//   code      expected exit code
//   message   fragment expected in stderr (or stdout); a list: every fragment
//   absent    paths that must not exist afterwards
// PROBELAB_TABLE_BINARY=<probelab> in the environment runs the rows against another binary.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "probes/dump_writer.h"
#include "tests/sim/sim_test_util.h"

namespace probelab::sim {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

const fs::path kTable = fs::path(PROBELAB_SOURCE_DIR) / "tests/sim/cli/bad_input_cases.yaml";

std::vector<YAML::Node> rows() {
  std::vector<YAML::Node> out;
  for (const auto& r : YAML::LoadFile(kTable.string())) out.push_back(r);
  return out;
}

std::string expand(std::string text) {
  for (std::size_t at = text.find("@REPEAT("); at != std::string::npos; at = text.find("@REPEAT(", at)) {
    const std::size_t comma = text.find(',', at), end = text.find(")@", at);
    const std::string what = text.substr(at + 8, comma - at - 8);
    const auto n = std::stoul(text.substr(comma + 1, end - comma - 1));
    std::string rep;
    for (std::size_t i = 0; i < n; ++i) rep += what;
    text.replace(at, end + 2 - at, rep);
    at += rep.size();
  }
  return text;
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

void make_file(const fs::path& p, const YAML::Node& content, const TempDir& dir) {
  if (content.IsScalar()) return write_bytes(p, expand(content.Scalar()));
  if (content["dir"]) return (void)fs::create_directories(p);
  if (content["npy"]) {
    std::string header = content["npy"].Scalar();
    const std::size_t unpadded = 10 + header.size() + 1;
    header.append((64 - unpadded % 64) % 64, ' ');
    header += '\n';
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
    bytes += static_cast<char>(header.size() & 0xFF);
    bytes += static_cast<char>(header.size() >> 8);
    bytes += header;
    bytes.append(content["data_bytes"] ? content["data_bytes"].as<std::size_t>() : 0, '\0');
    return write_bytes(p, bytes);
  }
  if (content["onnx"]) {
    const fs::path text = p.string() + ".textproto";
    write_bytes(text, content["onnx"].Scalar());
    const std::string cmd = "protoc --encode=onnx.ModelProto -I/usr/include/onnx onnx.proto < '" + text.string() +
                            "' > '" + p.string() + "' 2>'" + (dir.path() / "protoc.err").string() + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << "protoc: " << test::slurp(dir.path() / "protoc.err");
    fs::remove(dir.path() / "protoc.err");
    fs::remove(text);
    return;
  }
  FAIL() << "unknown file kind for " << p;
}

void mutate(const fs::path& root, const YAML::Node& m) {
  const fs::path p = root / m["file"].Scalar();
  if (m["write"]) return write_bytes(p, m["write"].Scalar());  // creates the file or replaces it
  ASSERT_TRUE(fs::exists(p)) << "mutate: no file " << p;
  if (m["delete"]) return (void)fs::remove(p);
  std::string bytes = test::slurp(p);
  if (m["flip_byte"]) {
    const auto at = m["flip_byte"].as<std::size_t>() % bytes.size();
    const int mask = m["xor"] ? m["xor"].as<int>() : 0x01;
    bytes[at] = static_cast<char>(bytes[at] ^ mask);
  } else if (m["replace"]) {
    const std::string from = m["replace"][0].Scalar(), to = m["replace"][1].Scalar();
    const auto at = bytes.find(from);
    ASSERT_NE(at, std::string::npos) << "mutate: '" << from << "' not in " << p;
    bytes.replace(at, from.size(), to);
  } else if (m["json_set"]) {
    nlohmann::json j = nlohmann::json::parse(bytes);
    for (const auto& kv : m["json_set"])
      j[nlohmann::json::json_pointer(kv.first.Scalar())] = nlohmann::json::parse(kv.second.Scalar());
    if (m["fix_crc"]) j["manifest_crc32"] = probes::manifest_checksum(j);
    bytes = j.dump(1);
  }
  write_bytes(p, bytes);
}

// Every path under `root` (files and directories), relative.
std::set<std::string> tree(const fs::path& root) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) out.insert(fs::relative(e.path(), root).string());
  return out;
}

// The --out argument of a command line ("out" when absent, as probelab defaults to).
std::string out_arg(const std::string& cmd) {
  const auto at = cmd.find("--out ");
  if (at == std::string::npos) return "out";
  const auto begin = at + 6, end = cmd.find(' ', begin);
  return cmd.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

class Table : public ::testing::TestWithParam<YAML::Node> {};

TEST_P(Table, Case) {
  const YAML::Node& row = GetParam();
  TempDir dir;
  const fs::path work = dir.path() / "work";
  fs::create_directories(work);
  write_bytes(work / "tinynet.yaml", test::kTinyNet);
  if (row["files"])
    for (const auto& kv : row["files"]) {
      make_file(work / kv.first.Scalar(), kv.second, dir);
      if (HasFatalFailure()) return;
    }
  // PROBELAB_TABLE_BINARY runs the table against another build (e.g. one without the fixes).
  const char* other = std::getenv("PROBELAB_TABLE_BINARY");
  const std::string bin = std::string("'") + (other ? other : PROBELAB_BINARY) + "' ";
  auto in_work = [&](const std::string& args) { return test::shell("cd work && " + bin + args, dir); };
  if (row["setup"])
    for (const auto& cmd : row["setup"]) {
      const test::CmdResult r = in_work(cmd.Scalar());
      ASSERT_EQ(r.code, 0) << "setup '" << cmd.Scalar() << "': " << r.err << r.out;
    }
  if (row["mutate"])
    for (const auto& m : row["mutate"]) {
      mutate(work, m);
      if (HasFatalFailure()) return;
    }
  const std::set<std::string> before = tree(dir.path());
  const std::string cmd = row["run"].Scalar();
  const test::CmdResult r = in_work(cmd);
  EXPECT_EQ(r.code, row["code"].as<int>()) << "probelab " << cmd << "\nstderr: " << r.err << "\nstdout: " << r.out;
  std::vector<std::string> fragments;
  if (row["message"].IsSequence())
    for (const auto& f : row["message"]) fragments.push_back(f.Scalar());
  else if (row["message"])
    fragments.push_back(row["message"].Scalar());
  for (const auto& f : fragments)
    EXPECT_TRUE(r.err.find(f) != std::string::npos || r.out.find(f) != std::string::npos)
        << "expected '" << f << "' in the output of probelab " << cmd << "\nstderr: " << r.err << "\nstdout: " << r.out;
  if (row["absent"]) {
    for (const auto& a : row["absent"]) EXPECT_FALSE(fs::exists(work / a.Scalar())) << a.Scalar() << " exists";
  }
  // Nothing new outside --out (the shell's own stdout/stderr captures aside); nothing at all on bad input.
  const fs::path out = fs::path("work") / out_arg(cmd);
  for (const auto& p : tree(dir.path())) {
    if (before.count(p) || p == "stdout.txt" || p == "stderr.txt") continue;
    const bool inside = p.rfind(out.string() + "/", 0) == 0 || p == out.string();
    EXPECT_TRUE(inside && r.code != 2) << "probelab " << cmd << " (exit " << r.code << ") wrote " << p;
  }
}

std::string row_name(const ::testing::TestParamInfo<YAML::Node>& info) { return info.param["name"].Scalar(); }

INSTANTIATE_TEST_SUITE_P(BadInput, Table, ::testing::ValuesIn(rows()), row_name);

}  // namespace
}  // namespace probelab::sim
