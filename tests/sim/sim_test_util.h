// Helpers of the sim tests: temporary directories and scenario text.
#pragma once

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <unistd.h>

namespace probelab::sim::test {

/// A fresh directory under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("probelab_sim_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path write(const std::string& name, const std::string& text) const {
    const auto p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p;
  }

 private:
  std::filesystem::path path_;
};

inline std::filesystem::path source_root() { return PROBELAB_SOURCE_DIR; }

}  // namespace probelab::sim::test
