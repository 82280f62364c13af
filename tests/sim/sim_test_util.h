// Helpers of the sim tests: temporary directories and scenario text.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
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

/// A tiny classifier (MatMul, Add, Relu, MatMul) without a loss, so its logits are an output;
/// write it as "tinynet.yaml" next to a scenario.
inline const char* kTinyNet = R"(name: tinynet
seed: 5
inputs:
  - {name: x, shape: [4, 8]}
ops:
  - {name: fc1, type: MatMul, inputs: [x], weights: {weight: [8, 16]}}
  - {name: fc1_bias, type: Add, weights: {b: [16]}}
  - {name: relu, type: Relu}
  - {name: fc2, type: MatMul, weights: {weight: [16, 4]}}
outputs: [fc2]
)";

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The start of an `mpirun` command line as the tests run it (oversubscribed, as root in CI). In
/// the sanitizer build its processes unwind allocation stacks with DWARF: Open MPI's libraries have
/// no frame pointers, and only so are its allocations attributed to it and matched by
/// scripts/sanitizers/lsan.supp (elsewhere the variable is read by nothing).
inline std::string mpirun_prefix(int np) {
  return "ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0\" mpirun --oversubscribe --allow-run-as-root -np " +
         std::to_string(np) + " ";
}

/// Exit code and captured output of a shell command.
struct CmdResult {
  int code = -1;
  std::string out, err;
};

/// Runs `cmdline` through the shell in `dir` (with the repository as PROBELAB_SOURCE_DIR).
inline CmdResult shell(const std::string& cmdline, const TempDir& dir) {
  const auto out = dir.path() / "stdout.txt", err = dir.path() / "stderr.txt";
  const std::string cmd = "cd '" + dir.path().string() + "' && SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1 PROBELAB_SOURCE_DIR='" +
                          source_root().string() + "' " + cmdline + " >'" + out.string() + "' 2>'" + err.string() + "'";
  const int st = std::system(cmd.c_str());
  CmdResult r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

#ifdef PROBELAB_BINARY
/// `probelab ARGS` run in `dir` (shell()).
inline CmdResult probelab(const std::string& args, const TempDir& dir) {
  return shell(std::string("'") + PROBELAB_BINARY + "' " + args, dir);
}
#endif

}  // namespace probelab::sim::test
