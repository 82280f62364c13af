// The folder-level include rule of docs/architecture.md: each source folder includes only from
// itself and the folders listed for it below (a `detail/` folder counts as its parent). A folder
// with sources that is not in the table fails the test, so a new folder states its place.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kGraph = {"numerics"};
const std::vector<std::string> kChipBase = {"chip_model/spec", "chip_model/hooks", "graph", "graph/ops", "numerics"};

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// folder -> folders it may include (besides itself). Bottom up.
const std::map<std::string, std::vector<std::string>>& allowed() {
  static const std::vector<std::string> chip_all =
      plus(kChipBase, {"chip_model", "chip_model/kernels", "chip_model/collective"});
  static const std::vector<std::string> below_sim = plus(chip_all, {"probes", "injectors", "graph/onnx"});
  static const std::map<std::string, std::vector<std::string>> m = {
      {"numerics", {}},
      {"graph", kGraph},
      {"graph/ops", {"graph", "numerics"}},
      {"graph/onnx", {"graph", "graph/ops", "numerics"}},
      {"chip_model/spec", {"graph", "numerics"}},
      {"chip_model/hooks", {"graph", "numerics"}},
      {"chip_model/sc_stub", {}},
      {"probes", {"chip_model/spec", "graph", "numerics"}},
      {"chip_model/kernels", kChipBase},
      {"chip_model", plus(kChipBase, {"chip_model/kernels"})},
      {"chip_model/collective", plus(kChipBase, {"chip_model"})},
      {"injectors", {"chip_model/hooks", "chip_model/spec", "graph", "numerics"}},
      {"sim/platform", below_sim},
      {"sim/scenario", below_sim},
      {"sim/scenario/expectations", plus(below_sim, {"sim/scenario"})},
      {"sim/html", {}},
      {"sim/run", plus(below_sim, {"sim/platform", "sim/scenario", "sim/html"})},
      {"sim/campaign", plus(below_sim, {"sim/run", "sim/scenario", "sim/html"})},
      {"sim/cli", plus(below_sim, {"sim/platform", "sim/scenario", "sim/run", "sim/campaign", "sim/html"})},
      // sim/ itself: the executables' start-up (heap_preinit.cpp, an object linked into each).
      {"sim", {"sim/run"}},
      // The Python extension module sits beside the CLI: it binds the harness.
      {"python/src", plus(below_sim, {"sim/platform", "sim/scenario", "sim/run", "sim/campaign", "sim/html"})},
  };
  return m;
}

// "numerics/detail" -> "numerics"; "sim/scenario/expectations" -> "sim/scenario" is NOT folded:
// a subfolder is its own row unless it is a detail folder.
std::string folder_of(const fs::path& rel) {
  std::string d = rel.parent_path().generic_string();
  const std::string tail = "/detail";
  if (d.size() > tail.size() && d.compare(d.size() - tail.size(), tail.size(), tail) == 0)
    d.resize(d.size() - tail.size());
  return d;
}

bool is_source(const fs::path& p) { return p.extension() == ".h" || p.extension() == ".cpp"; }

}  // namespace

TEST(Layout, EveryFolderIncludesOnlyFromTheFoldersBelowIt) {
  const fs::path root = PROBELAB_SOURCE_DIR;
  const std::regex inc(R"re(^\s*#\s*include\s+"([^"]+)")re");
  int files = 0, includes = 0;
  std::vector<std::string> violations;
  for (const char* top : {"numerics", "graph", "chip_model", "probes", "injectors", "sim", "python"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / top)) {
      if (!e.is_regular_file() || !is_source(e.path())) continue;
      fs::path rel = fs::relative(e.path(), root);
      std::string from = folder_of(rel);
      const std::vector<std::string>* ok = nullptr;
      if (auto it = allowed().find(from); it != allowed().end()) ok = &it->second;
      if (!ok) {
        violations.push_back(rel.generic_string() + ": folder '" + from + "' is not in the layer table");
        continue;
      }
      ++files;
      std::ifstream in(e.path());
      std::string line;
      int n = 0;
      while (std::getline(in, line)) {
        ++n;
        std::smatch m;
        if (!std::regex_search(line, m, inc)) continue;
        fs::path target = m[1].str();
        if (!fs::exists(root / target)) continue;  // a third-party header found by quotes
        ++includes;
        std::string to = folder_of(target);
        if (to == from) continue;
        if (std::find(ok->begin(), ok->end(), to) == ok->end())
          violations.push_back(rel.generic_string() + ":" + std::to_string(n) + ": '" + from + "' includes '" +
                               target.generic_string() + "' from '" + to + "'");
      }
    }
  }
  EXPECT_GT(files, 200);
  EXPECT_GT(includes, 500);
  std::string all;
  for (const auto& v : violations) all += "\n  " + v;
  EXPECT_TRUE(violations.empty()) << violations.size() << " include(s) against the layer table:" << all;
}

TEST(Layout, TheCheckSeesAViolation) {
  // The table itself must refuse an upward include, or the test above asserts nothing.
  const auto& a = allowed();
  auto refuses = [&](const std::string& from, const std::string& to) {
    const auto& v = a.at(from);
    return std::find(v.begin(), v.end(), to) == v.end();
  };
  EXPECT_TRUE(refuses("numerics", "graph"));
  EXPECT_TRUE(refuses("graph", "chip_model"));
  EXPECT_TRUE(refuses("graph", "graph/ops"));
  EXPECT_TRUE(refuses("probes", "chip_model"));
  EXPECT_TRUE(refuses("chip_model/kernels", "chip_model"));
  EXPECT_TRUE(refuses("chip_model", "chip_model/collective"));
  EXPECT_TRUE(refuses("sim/platform", "sim/scenario"));
  EXPECT_TRUE(refuses("sim/scenario", "sim/run"));
  EXPECT_TRUE(refuses("sim/run", "sim/campaign"));
  EXPECT_TRUE(refuses("sim/campaign", "sim/cli"));
  EXPECT_TRUE(refuses("sim/html", "sim/run"));
  EXPECT_TRUE(refuses("sim/run", "python/src"));
  EXPECT_EQ(folder_of("numerics/detail/x.h"), "numerics");
  EXPECT_EQ(folder_of("sim/scenario/expectations/detection.cpp"), "sim/scenario/expectations");
}
