#include "probes/dump_decode.h"

#include <algorithm>
#include <fstream>
#include <span>
#include <sstream>

#include <fmt/format.h>

#include "graph/npy.h"
#include "probes/capture_drain.h"
#include "probes/dump_writer.h"
#include "probes/probe_config.h"

namespace probelab::probes {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_manifest(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError(file.string(), 0, "<file>", "cannot open the manifest");
  std::stringstream ss;
  ss << in.rdbuf();
  json m;
  try {
    m = json::parse(ss.str());
  } catch (const json::exception& e) {
    throw ConfigError(file.string(), 0, "<document>", fmt::format("not JSON: {}", e.what()));
  }
  if (!m.is_object() || !m.contains("entries") || !m["entries"].is_array() || !m.contains("format_version"))
    throw ConfigError(file.string(), 0, "<document>",
                      "not a probelab dump manifest (expected an object with format_version and entries)");
  // An edited manifest is refused as compare refuses it: decoding it would sign the edit with a
  // fresh manifest_crc32.
  check_manifest(m, file.string());
  return m;
}

// What a decode created, to undo on failure: files that did not exist, and the topmost directory
// of each chain of directories it made.
class Created {
 public:
  void write(const fs::path& file, std::span<const std::byte> bytes) {
    fs::path top, p = file.parent_path();
    for (; !p.empty() && !fs::exists(p); p = p.parent_path()) top = p;
    if (!top.empty()) dirs_.push_back(top);
    if (!fs::exists(file)) files_.push_back(file);
    fs::create_directories(file.parent_path());
    write_file_atomic(file, bytes);
  }
  void undo() noexcept {
    std::error_code ec;
    for (const auto& f : files_) fs::remove(f, ec);
    for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) fs::remove_all(*it, ec);
  }

 private:
  std::vector<fs::path> files_, dirs_;
};

DecodeSummary decode_all(const fs::path& dir, const std::optional<fs::path>& out, const std::vector<fs::path>& manifests,
                         const std::vector<json>& read, Created& created);

// Where the files of manifest `mf` found under `dir` are decoded to.
fs::path decoded_dir(const fs::path& dir, const std::optional<fs::path>& out, const fs::path& mf) {
  return out ? *out / fs::relative(mf.parent_path(), dir) : mf.parent_path() / "decoded";
}

}  // namespace

json DecodeSummary::to_json() const {
  json dirs = json::array();
  for (const auto& d : out_dirs) dirs.push_back(d.string());
  return {{"manifests", manifests}, {"files", files}, {"decompressed", decompressed}, {"undeltaed", undeltaed},
          {"out_dirs", dirs}};
}

DecodeSummary decode_dumps(const fs::path& dir, const std::optional<fs::path>& out) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw ConfigError(dir.string(), 0, "DIR", "not a directory");
  std::vector<fs::path> manifests;
  if (fs::exists(dir / "dump.json")) manifests.push_back(dir / "dump.json");
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().filename() != "dump.json") continue;
    const fs::path rel = fs::relative(e.path().parent_path(), dir);
    if (rel.begin() != rel.end() && *rel.begin() == "decoded") continue;  // our own output
    if (e.path().parent_path().filename() == "decoded") continue;
    if (e.path() != dir / "dump.json") manifests.push_back(e.path());
  }
  std::sort(manifests.begin(), manifests.end());
  if (manifests.empty()) throw ConfigError(dir.string(), 0, "DIR", "no dump.json manifest under this directory");

  // Every manifest is checked before anything is written; a file that cannot be decoded removes
  // what this call wrote before it (files and directories that did not exist), so bad input
  // leaves no partial decode behind.
  std::vector<json> read;
  for (const fs::path& mf : manifests) read.push_back(read_manifest(mf));
  for (const fs::path& mf : manifests) {  // and where the decoded files go
    const fs::path dst = decoded_dir(dir, out, mf);
    std::error_code ec;
    for (fs::path p = dst; !p.empty(); p = p.parent_path()) {
      if (fs::exists(p, ec) && !fs::is_directory(p, ec))
        throw ConfigError(dst.string(), 0, out ? "--out" : "DIR",
                          fmt::format("expected a directory for the decoded files{}, but {} is a file",
                                      out ? "" : " (<dump dir>/decoded without --out)", p.string()));
      if (!p.has_relative_path()) break;
    }
  }
  Created created;
  try {
    return decode_all(dir, out, manifests, read, created);
  } catch (...) {
    created.undo();
    throw;
  }
}

namespace {

DecodeSummary decode_all(const fs::path& dir, const std::optional<fs::path>& out, const std::vector<fs::path>& manifests,
                         const std::vector<json>& read, Created& created) {
  DecodeSummary s;
  for (std::size_t k = 0; k < manifests.size(); ++k) {
    const fs::path& mf = manifests[k];
    const fs::path src = mf.parent_path();
    const json& m = read[k];
    const fs::path dst = decoded_dir(dir, out, mf);
    json decoded = m;
    decoded["compression"] = "none";
    decoded["delta"] = false;
    decoded["entries"] = json::array();
    for (std::size_t i = 0; i < m["entries"].size(); ++i) {
      json e = m["entries"][i];
      if (!e.contains("file")) {
        decoded["entries"].push_back(e);
        continue;
      }
      const std::string key = fmt::format("entries[{}]", i);
      graph::Tensor t;
      try {
        t = load_dump(src, m, e);
      } catch (const std::exception& ex) {
        throw ConfigError(mf.string(), 0, key, fmt::format("{} cannot be decoded: {}", e.value("file", "?"), ex.what()));
      }
      std::string name = e["file"].get<std::string>();
      if (name.size() > 4 && name.ends_with(".zst")) name.resize(name.size() - 4);
      const std::vector<std::byte> bytes = graph::encode_npy(t);
      created.write(dst / name, bytes);
      if (e.value("compression", "none") == "zstd") ++s.decompressed;
      if (e.value("encoding", "raw") == "xor_delta") ++s.undeltaed;
      e["file"] = name;
      e["compression"] = "none";
      e["encoding"] = "raw";
      e.erase("delta_base");
      e["crc32"] = fmt::format("{:08x}", crc32(bytes));
      e["file_bytes"] = bytes.size();
      decoded["entries"].push_back(std::move(e));
      ++s.files;
    }
    if (decoded.contains("manifest_crc32")) decoded["manifest_crc32"] = manifest_checksum(decoded);
    const std::string text = decoded.dump(1);
    created.write(dst / "dump.json", std::as_bytes(std::span(text.data(), text.size())));
    ++s.manifests;
    s.out_dirs.push_back(dst);
  }
  return s;
}

}  // namespace

}  // namespace probelab::probes
