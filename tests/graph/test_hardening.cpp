// Input checks of the graph layer: element counts that cannot overflow, a strict .npy header
// parser, duplicate YAML keys and alias bombs, user regexes within limits, ONNX files that are not
// models.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "graph/dtype.h"
#include "graph/graph.h"
#include "graph/model_yaml.h"
#include "graph/npy.h"
#include "graph/onnx/onnx_import.h"
#include "graph/user_regex.h"
#include "graph/yaml_check.h"

using namespace probelab::graph;
namespace fs = std::filesystem;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const GraphError& e) {
    return e.what();
  }
  return "";
}

// A .npy file with `header` (version 1.0) and `data` bytes.
std::vector<std::byte> npy(const std::string& header, std::size_t data = 0) {
  std::string h = header;
  h.append((64 - (11 + h.size()) % 64) % 64, ' ');
  h += '\n';
  std::string s = std::string("\x93NUMPY\x01\x00", 8);
  s += static_cast<char>(h.size() & 0xFF);
  s += static_cast<char>(h.size() >> 8);
  s += h;
  s.append(data, '\0');
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

std::string npy_error(const std::string& shape, std::size_t data = 0) {
  return error_of([&] { decode_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }", data), "w.npy"); });
}

}  // namespace

TEST(Hardening, ElementCountsNeverWrap) {
  EXPECT_EQ(numel({}), 1);
  EXPECT_EQ(numel({3, 0, 1ll << 62}), 0);  // a zero dimension: no elements, whatever the others
  EXPECT_EQ(numel({1ll << 24, 1ll << 24}), 1ll << 48);
  EXPECT_NE(error_of([] { numel({1ll << 32, 1ll << 32, 2}); }).find("more than 2^48 elements"), std::string::npos);
  EXPECT_NE(error_of([] { numel({1ll << 24, (1ll << 24) + 1}); }).find("more than 2^48"), std::string::npos);
  EXPECT_NE(error_of([] { numel({1ll << 20, 1ll << 62, 4}); }).find("more than 2^48"), std::string::npos);  // the product wraps int64
  EXPECT_EQ(numel({1, 1ll << 48, 1}), 1ll << 48);
  EXPECT_NE(error_of([] { numel({4, -16}); }).find("dimension -16 is negative"), std::string::npos);
  EXPECT_NE(error_of([] { Tensor(TensorDesc{DType::F32, {1ll << 32, 1ll << 32, 2}, Format::ND}); }).find("2^48"),
            std::string::npos);
}

TEST(Hardening, NpyShapesAreParsedStrictly) {
  EXPECT_EQ(decode_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24), "w.npy").shape(),
            (Shape{2, 3}));
  EXPECT_EQ(decode_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 16), "w.npy").shape(), (Shape{4}));
  EXPECT_EQ(decode_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4), "w.npy").shape(), (Shape{}));
  EXPECT_NE(npy_error("(-16,)", 64).find("dimension '-16' is not a non-negative integer"), std::string::npos);
  EXPECT_NE(npy_error("(100000000000000000000,)").find("dimension 100000000000000000000 is too large"), std::string::npos);
  EXPECT_NE(npy_error("(4294967296, 4294967296, 2)").find("more than 2^48 elements"), std::string::npos);
  EXPECT_NE(npy_error("(2,, 3)").find("not a tuple of dimensions"), std::string::npos);
  EXPECT_NE(npy_error("(2x, 3)").find("'2x' is not a non-negative integer"), std::string::npos);
  EXPECT_NE(npy_error("(2, 3)", 23).find("needs 24"), std::string::npos);
  // A header larger than numpy accepts, and one without a shape.
  EXPECT_NE(error_of([] { decode_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': '" +
                                         std::string(20000, 'a') + "'}", 4), "w.npy"); })
                .find("at most 10000"),
            std::string::npos);
  EXPECT_NE(error_of([] { decode_npy(npy("{'descr': '<f4', 'fortran_order': False}"), "w.npy"); }).find("has no 'shape' entry"),
            std::string::npos);
}

TEST(Hardening, YamlTextIsUtf8AndOneDocument) {
  EXPECT_FALSE(check_yaml_text("name: caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\n"));  // 2-, 3- and 4-byte forms
  EXPECT_FALSE(check_yaml_text("%YAML 1.2\n---\nname: s\n...\n# end\n"));                  // one document, marked
  EXPECT_FALSE(check_yaml_text("--- # first\nname: s\nd: |\n  ---\n"));                       // indented: block text
  auto at = [](std::string_view t) {
    const auto i = check_yaml_text(t);
    return i ? fmt::format("{}:{} {}", i->line, i->column, i->message) : std::string("none");
  };
  EXPECT_EQ(at("a: 1\nb: x\xFFy\n"), "2:5 the byte 0xFF, which is not UTF-8");
  EXPECT_EQ(at("a: \xC0\xAF\n"), "1:4 the byte 0xC0, which is not UTF-8");          // overlong '/'
  EXPECT_EQ(at("a: \xED\xA0\x80\n"), "1:4 the byte 0xED, which is not UTF-8");      // a surrogate
  EXPECT_EQ(at("a: \xF4\x90\x80\x80\n"), "1:4 the byte 0xF4, which is not UTF-8");  // above U+10FFFF
  EXPECT_EQ(at("a: \xE2\x82\n"), "1:4 the byte 0xE2, which is not UTF-8");           // cut short
  EXPECT_EQ(at(std::string_view("a: 1\nb\0: 2\n", 11)), "2:2 a NUL byte");
  EXPECT_EQ(at("a: 1\n---\nb: 2\n"), "2:1 a second YAML document");
  EXPECT_EQ(at("---\na: 1\n...\nb: 2\n"), "4:1 content after the document end '...'");
  EXPECT_EQ(check_yaml_text("a: 1\n---\n")->expected, "UTF-8 text holding one YAML document");
  auto merge = check_yaml_document(YAML::Load("base: &b {x: 1}\nuse: {<<: *b, y: 2}\nquoted: {'<<': 3}\n"));
  ASSERT_TRUE(merge);
  EXPECT_EQ(merge->key, "use.<<");
  EXPECT_EQ(merge->expected, "the keys written out, without '<<'");
}

TEST(Hardening, DuplicateYamlKeysAndAliasBombs) {
  auto issue = check_yaml_document(YAML::Load("a: 1\nb: {c: 2, d: [{e: 1, e: 2}]}\n"));
  ASSERT_TRUE(issue);
  EXPECT_EQ(issue->key, "b.d[0].e");
  EXPECT_EQ(issue->line, 2);
  EXPECT_EQ(issue->message, "duplicate key 'e' (first given on line 2)");
  EXPECT_FALSE(check_yaml_document(YAML::Load("a: 1\nb: {a: 1}\nc: [a, a]\n")));
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'g'; ++c)
    bomb += std::string(1, c) + ": &" + c + " [" + [&] {
      std::string l;
      for (int i = 0; i < 10; ++i) l += std::string(i ? ", " : "") + "*" + static_cast<char>(c - 1);
      return l;
    }() + "]\n";
  issue = check_yaml_document(YAML::Load(bomb));
  ASSERT_TRUE(issue);
  EXPECT_NE(issue->message.find("more than 1000000 nodes"), std::string::npos);
  EXPECT_NE(error_of([] { parse_model_yaml("name: m\nname: n\ninputs: [{name: x, shape: [2]}]\nops: []\n", "m.yaml"); })
                .find("m.yaml:2:1: name: duplicate key 'name' (first given on line 1)"),
            std::string::npos);
}

TEST(Hardening, UserRegexesWithinLimits) {
  EXPECT_TRUE(user_regex_match("net/layer4/fc", compile_user_regex("net/layer[4-6]/.*")));
  EXPECT_NE(error_of([] { compile_user_regex(std::string(600, 'a')); }).find("regex of 600 characters"), std::string::npos);
  EXPECT_NE(error_of([] { compile_user_regex(fmt::format("{:(>17}a{:)>17}", "", "")); }).find("deeper than 16"),
            std::string::npos);
  EXPECT_NE(error_of([] { compile_user_regex("(a{200}){200}"); }).find("more than 20000 states"), std::string::npos);
  EXPECT_NE(error_of([] { compile_user_regex("(ab"); }), "");  // malformed: std::regex's own reason
  EXPECT_NO_THROW(compile_user_regex("\\((a|b){2,5}[(]x{3}"));  // escaped and bracketed parentheses do not nest
  const std::regex re = compile_user_regex(".*");
  EXPECT_NE(error_of([&] { user_regex_match(std::string(5000, 'x'), re); }).find("name of 5000 characters"),
            std::string::npos);
  Graph g;
  EXPECT_NE(error_of([&] { g.select_scope(std::string(30, '(') + std::string(30, ')')); }).find("scope regex"),
            std::string::npos);
}

TEST(Hardening, OnnxFilesThatAreNotModels) {
  const fs::path dir = fs::temp_directory_path() / ("probelab_graph_hardening_onnx_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "empty.onnx").close();
  EXPECT_NE(error_of([&] { import_onnx((dir / "empty.onnx").string()); }).find("not an ONNX model (no ir_version or no "
                                                                               "graph; the file is empty)"),
            std::string::npos);
  std::ofstream(dir / "text.onnx") << "name: not a model\n";
  EXPECT_NE(error_of([&] { import_onnx((dir / "text.onnx").string()); }).find("text.onnx:"), std::string::npos);
  fs::remove_all(dir);
}
