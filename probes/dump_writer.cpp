#include "probes/dump_writer.h"

#include <cstring>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>
#include <zstd.h>

#include "graph/npy.h"
#include "probes/anomaly.h"
#include "probes/capture_drain.h"
#include "probes/tensor_stats.h"

namespace probelab::probes {

namespace fs = std::filesystem;

namespace {

std::string sanitize(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '/') out += '.';
    else if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') out += c;
    else out += '_';
  }
  return out.empty() ? std::string("_") : out;
}

/// The tensor as stored in the file: BF16 widened to F32 (NumPy has no bfloat16), others as is.
graph::Tensor file_tensor(const graph::Tensor& t) {
  if (t.dtype() != graph::DType::BF16) return t;
  auto v = t.to_f32();
  return graph::Tensor::from_f32(t.shape(), v, graph::DType::F32);
}

void xor_into(std::span<std::byte> dst, std::span<const std::byte> base) {
  for (std::size_t i = 0; i < dst.size(); ++i) dst[i] ^= base[i];
}

std::vector<std::byte> zstd_compress(std::span<const std::byte> in, int level) {
  std::vector<std::byte> out(ZSTD_compressBound(in.size()));
  std::size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), level);
  if (ZSTD_isError(n)) throw std::runtime_error(fmt::format("zstd compression failed: {}", ZSTD_getErrorName(n)));
  out.resize(n);
  return out;
}

std::vector<std::byte> zstd_decompress(std::span<const std::byte> in, const std::string& what) {
  unsigned long long size = ZSTD_getFrameContentSize(in.data(), in.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN)
    throw std::runtime_error(fmt::format("{}: not a zstd frame with a known content size", what));
  std::vector<std::byte> out(size);
  std::size_t n = ZSTD_decompress(out.data(), out.size(), in.data(), in.size());
  if (ZSTD_isError(n) || n != size) throw std::runtime_error(fmt::format("{}: zstd decompression failed", what));
  return out;
}

}  // namespace

void write_file_atomic(const fs::path& path, std::span<const std::byte> bytes) {
  fs::create_directories(path.parent_path());
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(fmt::format("cannot write {}", tmp.string()));
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) throw std::runtime_error(fmt::format("write to {} failed", tmp.string()));
  }
  fs::rename(tmp, path);
}

std::vector<std::byte> read_file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot open {}", path.string()));
  in.seekg(0, std::ios::end);
  std::vector<std::byte> out(static_cast<std::size_t>(in.tellg()));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()));
  return out;
}

nlohmann::json to_json(const DumpEntry& e) {
  nlohmann::json j = {{"op", e.op},
                      {"op_id", e.op_id},
                      {"tensor", e.tensor},
                      {"edge", fmt::format("{}{}", e.is_input ? "in" : "out", e.index)},
                      {"step", e.step},
                      {"rank", e.rank},
                      {"dtype", graph::dtype_name(e.dtype)},
                      {"shape", e.shape},
                      {"format", graph::format_name(e.format)},
                      {"source_format", graph::format_name(e.source_format)},
                      {"payload", e.payload},
                      {"trigger", e.trigger}};
  if (e.stats) j["statistics"] = stats_json(*e.stats);
  if (e.hash) j["hash"] = fmt::format("{:016x}", *e.hash);
  if (!e.file.empty()) {
    j["file"] = e.file;
    j["encoding"] = e.encoding;
    if (!e.delta_base.empty()) j["delta_base"] = e.delta_base;
    j["compression"] = e.compressed ? "zstd" : "none";
    j["crc32"] = fmt::format("{:08x}", e.crc32);
    j["data_crc32"] = fmt::format("{:08x}", e.data_crc32);
    j["file_bytes"] = e.file_bytes;
    j["raw_bytes"] = e.raw_bytes;
  }
  return j;
}

DumpWriter::DumpWriter(fs::path dir, OutputOptions opts, std::uint32_t rank)
    : dir_(std::move(dir)), opts_(std::move(opts)), rank_(rank) {}

const DumpEntry& DumpWriter::add_entry(DumpEntry meta) {
  meta.rank = rank_;
  entries_.push_back(std::move(meta));
  return entries_.back();
}

const DumpEntry& DumpWriter::write_tensor(DumpEntry meta, const graph::Tensor& t) {
  meta.rank = rank_;
  meta.dtype = t.dtype();
  meta.shape = t.shape();
  meta.format = t.shape().size() == 4 ? graph::Format::NCHW : graph::Format::ND;
  meta.payload = meta.payload.empty() ? "full" : meta.payload;
  if (!meta.stats) meta.stats = compute_stats(t);
  graph::Tensor stored = file_tensor(t);
  meta.data_crc32 = crc32(stored.bytes());
  meta.raw_bytes = stored.nbytes();

  auto key = std::make_tuple(meta.op_id, meta.is_input, meta.index);
  auto prev = last_.find(key);
  graph::Tensor encoded = stored;
  if (opts_.delta && prev != last_.end() && prev->second.first.desc() == stored.desc()) {
    xor_into(encoded.bytes(), prev->second.first.bytes());
    meta.encoding = "xor_delta";
    meta.delta_base = prev->second.second;
  }
  std::vector<std::byte> bytes = graph::encode_npy(encoded);
  std::string name = fmt::format("step{}/{}.{}{}.npy", meta.step, sanitize(meta.op), meta.is_input ? "in" : "out", meta.index);
  if (!meta.trigger.empty() && meta.trigger != "capture") name.insert(name.size() - 4, "." + meta.trigger);
  if (opts_.zstd) {
    bytes = zstd_compress(bytes, opts_.zstd_level);
    name += ".zst";
    meta.compressed = true;
  }
  // Never overwrite an earlier file of this run (e.g. a breakpoint dump and a capture of the same
  // edge in the same step): suffix a counter.
  for (int n = 1; fs::exists(dir_ / name); ++n) {
    auto dot = name.find(".npy");
    std::string base = name.substr(0, dot);
    auto pos = base.rfind('#');
    if (pos != std::string::npos) base.erase(pos);
    name = fmt::format("{}#{}{}", base, n, name.substr(dot));
  }
  write_file_atomic(dir_ / name, bytes);
  meta.file = name;
  meta.crc32 = crc32(bytes);
  meta.file_bytes = bytes.size();
  ++files_;
  bytes_ += bytes.size();
  raw_bytes_ += meta.raw_bytes;
  last_[key] = {std::move(stored), name};
  entries_.push_back(std::move(meta));
  return entries_.back();
}

void DumpWriter::write_manifest() const {
  nlohmann::json j;
  j["format_version"] = 1;
  j["rank"] = rank_;
  j["compression"] = opts_.zstd ? "zstd" : "none";
  j["delta"] = opts_.delta;
  j["checksum"] = "crc32";
  j["entries"] = nlohmann::json::array();
  for (const auto& e : entries_) j["entries"].push_back(to_json(e));
  std::string s = j.dump(1);
  s += '\n';
  write_file_atomic(dir_ / "dump.json", std::as_bytes(std::span(s.data(), s.size())));
}

graph::Tensor load_dump(const fs::path& dir, const nlohmann::json& manifest, const nlohmann::json& entry) {
  std::string file = entry.at("file").get<std::string>();
  std::vector<std::byte> bytes = read_file_bytes(dir / file);
  if (fmt::format("{:08x}", crc32(bytes)) != entry.at("crc32").get<std::string>())
    throw std::runtime_error(fmt::format("{}: crc32 mismatch (file corrupted)", file));
  if (entry.value("compression", "none") == "zstd") bytes = zstd_decompress(bytes, file);
  graph::Tensor t = graph::decode_npy(bytes, file);
  if (entry.value("encoding", "raw") == "xor_delta") {
    std::string base_file = entry.at("delta_base").get<std::string>();
    const nlohmann::json* base = nullptr;
    for (const auto& e : manifest.at("entries"))
      if (e.value("file", "") == base_file) base = &e;
    if (!base) throw std::runtime_error(fmt::format("{}: delta base {} not in the manifest", file, base_file));
    graph::Tensor b = load_dump(dir, manifest, *base);
    if (b.nbytes() != t.nbytes()) throw std::runtime_error(fmt::format("{}: delta base {} has another size", file, base_file));
    xor_into(t.bytes(), b.bytes());
  }
  if (fmt::format("{:08x}", crc32(t.bytes())) != entry.at("data_crc32").get<std::string>())
    throw std::runtime_error(fmt::format("{}: data crc32 mismatch after decoding", file));
  return t;
}

}  // namespace probelab::probes
