// Where the bundled models and scenarios are found: the order of resolve_source_root's places, and
// find_source_root() from a directory outside every tree (a build configured with cmake -B
// elsewhere finds the tree it was configured from).
#include "sim/scenario/source_root.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace probelab::sim {
namespace {

namespace fs = std::filesystem;

class SourceRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / ("probelab_source_root_" + std::to_string(::getpid()));
    fs::remove_all(base_);
    for (const char* d : {"a/scenarios", "a/sub/dir", "b/scenarios", "c/bin", "empty"}) fs::create_directories(base_ / d);
  }
  void TearDown() override { fs::remove_all(base_); }
  fs::path at(const char* p) const { return base_ / p; }
  fs::path base_;
};

TEST_F(SourceRoot, PlacesAreTriedInOrder) {
  // The environment first, even beside an executable inside another tree.
  EXPECT_EQ(resolve_source_root(at("b"), at("a/build/probelab"), at("a"), at("a")), at("b"));
  // An environment value without scenarios/ is skipped; the executable's ancestors come next.
  EXPECT_EQ(resolve_source_root(at("empty"), at("a/build/probelab"), at("b"), at("b")), at("a"));
  // An executable outside every tree: the configured source tree, before the current directory.
  EXPECT_EQ(resolve_source_root({}, at("c/bin/probelab"), at("b"), at("a/sub/dir")), at("b"));
  // Without a configured tree: the current directory's nearest ancestor holding scenarios/.
  EXPECT_EQ(resolve_source_root({}, at("c/bin/probelab"), {}, at("a/sub/dir")), at("a"));
  EXPECT_EQ(resolve_source_root({}, at("c/bin/probelab"), at("empty"), at("a/sub/dir")), at("a"));
}

TEST_F(SourceRoot, NothingFoundGivesTheCurrentDirectory) {
  EXPECT_EQ(resolve_source_root({}, at("c/bin/probelab"), at("empty"), at("empty")), at("empty"));
  EXPECT_EQ(resolve_source_root({}, {}, {}, {}), fs::path("."));
}

TEST_F(SourceRoot, FoundFromADirectoryOutsideTheTree) {
  const char* saved = std::getenv("PROBELAB_SOURCE_DIR");
  const std::string env = saved ? saved : "";
  ::unsetenv("PROBELAB_SOURCE_DIR");
  const fs::path cwd = fs::current_path();
  fs::current_path(at("empty"));
  const fs::path root = find_source_root();
  fs::current_path(cwd);
  if (saved) ::setenv("PROBELAB_SOURCE_DIR", env.c_str(), 1);
  EXPECT_TRUE(fs::is_regular_file(root / "scenarios/models/mlp.yaml")) << root;
  EXPECT_TRUE(fs::equivalent(root, PROBELAB_SOURCE_DIR)) << root;
}

}  // namespace
}  // namespace probelab::sim
