// Errors of scenario files and command-line input: each names the file, the line and column of
// the offending YAML node (1-based; 0 when unknown, e.g. for a value set with --set), the dotted key
// path and what was expected. The CLI turns every ScenarioError into exit code 2.
#pragma once

#include <stdexcept>
#include <string>

namespace probelab::sim {

class ScenarioError : public std::runtime_error {
 public:
  /// `got` (optional) is what was found instead.
  ScenarioError(std::string file, int line, int column, std::string key, std::string expected,
                std::string got = {});

  const std::string& file() const { return file_; }
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& key() const { return key_; }
  const std::string& expected() const { return expected_; }

 private:
  std::string file_;
  int line_;
  int column_;
  std::string key_;
  std::string expected_;
};

}  // namespace probelab::sim
