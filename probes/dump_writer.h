// Dump files: one `.npy` per captured tensor (optionally `.npy.zst`, optionally XOR-delta encoded
// against the previous capture of the same tensor) plus a `dump.json` manifest. Every file is
// written to "<name>.tmp" and renamed into place, so a reader never sees a partial file.
//
// Layout: <dir>/step<S>/<op>.<out|in><I>.npy[.zst]   (op names sanitised: '/' -> '.', others
//         outside [A-Za-z0-9._-] -> '_'), manifest <dir>/dump.json.
// Delta encoding: when `delta` is on and the previous capture of the same (op, edge) has the same
// dtype and shape, the stored .npy holds the XOR of the element bit patterns (current ^ previous);
// the manifest entry names the base file in "delta_base" and "encoding": "xor_delta". Unchanged
// elements become zero bytes, which is what makes deltas of slowly changing tensors compress well.
// Decoding XORs with the decoded base (down the chain of bases). Checksums: "crc32" is the CRC-32 of
// the file bytes as stored, "data_crc32" the CRC-32 of the tensor's raw element bytes before
// encoding, and the manifest carries "manifest_crc32" over its own content (see manifest_checksum).
// numpy reads a raw uncompressed file as it is; zstd and xor_delta files need `probelab dump
// decode` first (probes/dump_decode.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "chip_model/spec/capture_record.h"
#include "graph/tensor.h"
#include "probes/probe_config.h"

namespace probelab::probes {

struct DumpEntry {
  std::string op, tensor;
  std::uint32_t op_id = 0;
  bool is_input = false;
  std::uint16_t index = 0;
  std::uint32_t step = 0, rank = 0;
  graph::DType dtype = graph::DType::F32;
  graph::Shape shape;
  graph::Format format = graph::Format::ND;     // format of the stored file (logical layout)
  graph::Format source_format = graph::Format::ND;  // format the tensor had in HBM
  std::string payload;                          // "statistics" | "full" | "hash"
  std::optional<spec::CaptureStats> stats;
  std::optional<std::uint64_t> hash;
  std::string file;                             // relative to the dump dir; empty: no file
  std::string encoding = "raw";                 // "raw" | "xor_delta"
  std::string delta_base;
  bool compressed = false;
  std::uint32_t crc32 = 0, data_crc32 = 0;
  std::uint64_t file_bytes = 0, raw_bytes = 0;
  std::string trigger;                          // why it was written: "capture", "full_dump", "break"
};
/// The entry's manifest line: compact JSON, keys sorted (nlohmann's dump() of the same object,
/// which manifest_crc32 covers), written without building a JSON tree (one per capture).
std::string manifest_line(const DumpEntry& e);

class DumpWriter {
 public:
  DumpWriter(std::filesystem::path dir, OutputOptions opts, std::uint32_t rank);

  /// Writes `t` (logical layout) and adds a manifest entry built from `meta` (file fields, and
  /// the statistics when `meta` has none, filled in here). Returns the entry.
  const DumpEntry& write_tensor(DumpEntry meta, const graph::Tensor& t);
  /// Adds an entry without a file (statistics / hash captures). Returned references are valid
  /// until the next write_tensor()/add_entry()/write_manifest().
  const DumpEntry& add_entry(DumpEntry meta);
  /// Brings dump.json up to date (all entries so far, one per line). Serializes only the entries
  /// added since the last call (the manifest's checksum is carried over) and writes only them:
  /// the lines already in the file stay where they are, the new lines and the new tail (checksum)
  /// are written over the old tail, so a call costs what it adds, not the file's size (a run of
  /// thousands of steps rewrote megabytes at every step), and the writer holds no entry once it
  /// is in the file: memory stays bounded however many steps a run dumps. A reader racing the
  /// writer may see a torn tail, which manifest_crc32 rejects (check_manifest); the first call
  /// writes the whole file atomically. Called by the writer itself once kFlushEntries entries
  /// wait (the manifest on disk is then complete up to them).
  void write_manifest();
  static constexpr std::size_t kFlushEntries = 2048;

  /// Entries added so far (in dump.json or waiting for the next write_manifest()).
  std::uint64_t entry_count() const { return written_ + pending_.size(); }
  const std::filesystem::path& dir() const { return dir_; }
  std::uint64_t files() const { return files_; }
  std::uint64_t bytes_written() const { return bytes_; }
  std::uint64_t raw_bytes() const { return raw_bytes_; }

 private:
  std::filesystem::path dir_;
  OutputOptions opts_;
  std::uint32_t rank_;
  /// Makes room for one more entry (writes the manifest when kFlushEntries wait).
  void reserve_entry();

  std::vector<DumpEntry> pending_;  // added, not yet in dump.json
  std::uint64_t written_ = 0;       // entries in dump.json
  /// (op_id, is_input, index) -> (last tensor, its file) for delta encoding
  std::map<std::tuple<std::uint32_t, bool, std::uint16_t>, std::pair<graph::Tensor, std::string>> last_;
  std::uint64_t files_ = 0, bytes_ = 0, raw_bytes_ = 0;
  /// What write_manifest() has written so far: where the entries' lines are in dump.json (they
  /// are copied from there into the next one) and the CRC-32 of the compact text up to the last
  /// of them; the header values as JSON text.
  struct ManifestText {
    std::string compression, delta;
    std::uint64_t lines_at = 0, lines_bytes = 0;
    bool written = false;  // dump.json exists
    std::uint32_t crc = 0;
  };
  ManifestText manifest_;
};

/// Writes `bytes` to `path` atomically (tmp file in the same directory + rename).
void write_file_atomic(const std::filesystem::path& path, std::span<const std::byte> bytes);

/// A file name stem for a tensor or op name: '/' becomes '.', other characters than letters,
/// digits, '.', '_' and '-' become '_' (empty: "_"). A stem past 150 bytes keeps its first 133 and
/// adds '~' and 16 hex digits of a hash of the whole name: file systems take 255 bytes a name, and
/// the suffixes (".in0.capture#2.npy.zst.tmp") need room. The same name always gives the same stem.
std::string file_stem(const std::string& name);
std::vector<std::byte> read_file_bytes(const std::filesystem::path& path);

/// A dump that cannot be read back: missing or corrupt file, a checksum mismatch, a path
/// leaving the dump directory, a manifest that is not one. what() names the file.
class DumpError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// "manifest_crc32" of dump.json: the CRC-32 of the manifest serialized compactly (keys sorted,
/// as nlohmann::json writes them) without that field, so any change to its content is caught
/// whatever the whitespace.
std::string manifest_checksum(const nlohmann::json& manifest);
/// Throws DumpError unless `manifest` is a probelab dump manifest (format_version 1, an
/// "entries" list of objects) whose manifest_crc32 matches and whose entries' fields have the
/// JSON types the writer gives them (the message names the entry and key). `what` names it.
void check_manifest(const nlohmann::json& manifest, const std::string& what);
/// `dir / file` for a manifest's file name; throws DumpError when the name is absolute, climbs
/// with '..', or resolves (through symbolic links) outside `dir`.
std::filesystem::path dump_file_path(const std::filesystem::path& dir, const std::string& file);

/// Reads back the tensor of manifest entry `entry` (a JSON object of dump.json) from `dir`:
/// decompresses, verifies crc32 and data_crc32 and undoes delta encoding, following the chain
/// of bases in `manifest` (iteratively; a loop is an error). Throws DumpError naming the file.
graph::Tensor load_dump(const std::filesystem::path& dir, const nlohmann::json& manifest, const nlohmann::json& entry);

}  // namespace probelab::probes
