// The probe runtime must never link or include SystemC (DESIGN.md, one-way dependency rule).
// Besides the CMake configure-time check, these tests inspect what was actually built.
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace fs = std::filesystem;

namespace {

fs::path build_root() {
  fs::path p = fs::read_symlink("/proc/self/exe").parent_path();
  for (; !p.empty() && p != p.root_path(); p = p.parent_path())
    if (fs::exists(p / "CMakeCache.txt")) return p;
  return {};
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return out;
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) out.append(buf.data(), n);
  pclose(f);
  return out;
}

std::vector<std::string> systemc_symbols(const std::string& nm_output) {
  std::vector<std::string> hits;
  std::istringstream in(nm_output);
  std::string line;
  while (std::getline(in, line))
    if (line.find("sc_core::") != std::string::npos || line.find("sc_dt::") != std::string::npos ||
        line.find("tlm::") != std::string::npos)
      hits.push_back(line);
  return hits;
}

}  // namespace

TEST(Layering, ProbesArchiveHasNoSystemCSymbols) {
  fs::path root = build_root();
  ASSERT_FALSE(root.empty()) << "build directory not found from the test binary";
  fs::path lib = root / "probes" / "libprobelab_probes.a";
  ASSERT_TRUE(fs::exists(lib)) << lib;
  std::string nm = run("nm -C " + lib.string() + " 2>/dev/null");
  ASSERT_FALSE(nm.empty()) << "nm produced no output for " << lib;
  ASSERT_NE(nm.find("probelab::probes::ProbeRuntime"), std::string::npos) << "unexpected nm output";
  auto hits = systemc_symbols(nm);
  EXPECT_TRUE(hits.empty()) << "libprobelab_probes.a references SystemC, e.g.: " << hits.front();
}

TEST(Layering, TestBinaryLinkLineAndImageHaveNoSystemC) {
  fs::path root = build_root();
  ASSERT_FALSE(root.empty());
  fs::path link = root / "tests" / "probes" / "CMakeFiles" / "probes_test_layering.dir" / "link.txt";
  ASSERT_TRUE(fs::exists(link)) << link;
  std::ifstream in(link);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str().find("systemc"), std::string::npos) << "the probes test links SystemC: " << ss.str();
  auto hits = systemc_symbols(run("nm -C /proc/self/exe 2>/dev/null"));
  EXPECT_TRUE(hits.empty()) << hits.front();
}

TEST(Layering, ProbeSourcesDoNotIncludeSystemC) {
  fs::path dir = fs::path(PROBELAB_SOURCE_DIR) / "probes";
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    auto ext = e.path().extension();
    if (ext != ".h" && ext != ".cpp") continue;
    ++files;
    std::ifstream in(e.path());
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      bool include = line.find("#include") != std::string::npos;
      bool chip_internal =
          line.find("chip_model/") != std::string::npos && line.find("chip_model/spec/") == std::string::npos;
      bool systemc = line.find("systemc") != std::string::npos || line.find("<tlm") != std::string::npos;
      EXPECT_FALSE(include && (systemc || chip_internal)) << e.path() << ":" << n << ": " << line;
    }
  }
  EXPECT_GT(files, 10);
}
