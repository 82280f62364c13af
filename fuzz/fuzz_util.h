// Shared by the libFuzzer harnesses. A harness feeds one input to one reader and accepts exactly
// the outcomes a user may see: success, or an exception that sim::is_bad_input() classifies as
// bad input (exit code 2). Any other exception would reach the user as an internal error (exit
// code 3) for what is an input problem, so the harness aborts on it and libFuzzer reports it like
// a crash, with the input that caused it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <unistd.h>

namespace probelab::fuzz {

/// The input as text.
inline std::string text(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

/// A scratch directory of this process, created once and reused by every execution.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    auto p = std::filesystem::temp_directory_path() / ("probelab_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(p);
    return p;
  }();
  return dir;
}

inline void write_file(const std::filesystem::path& p, std::string_view bytes) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// Aborts (a finding) on an exception that is not classified as bad input.
[[noreturn]] inline void unclassified(const std::exception& e) {
  std::fprintf(stderr, "probelab fuzz: exception not classified as bad input (would exit 3): %s\n", e.what());
  std::abort();
}

}  // namespace probelab::fuzz
