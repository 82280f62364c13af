#include "probes/dump_writer.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <zstd.h>

#include "graph/graph.h"
#include "graph/npy.h"
#include "probes/anomaly.h"
#include "probes/capture_drain.h"
#include "probes/compact_json.h"
#include "probes/tensor_stats.h"

namespace probelab::probes {

namespace fs = std::filesystem;

namespace {


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

// `max_size`: the most the frame may decode to (a frame header may claim any size).
std::vector<std::byte> zstd_decompress(std::span<const std::byte> in, const std::string& what, std::uint64_t max_size) {
  unsigned long long size = ZSTD_getFrameContentSize(in.data(), in.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN)
    throw DumpError(fmt::format("{}: not a zstd frame with a known content size", what));
  if (size > max_size)
    throw DumpError(fmt::format("{}: zstd frame claims {} bytes, the manifest allows {}", what, size, max_size));
  std::vector<std::byte> out(size);
  std::size_t n = ZSTD_decompress(out.data(), out.size(), in.data(), in.size());
  if (ZSTD_isError(n) || n != size) throw DumpError(fmt::format("{}: zstd decompression failed", what));
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

std::string manifest_line(const DumpEntry& e) {
  // Keys added in byte order (CompactObject::str() then has nothing to sort).
  CompactObject j;
  const bool file = !e.file.empty();
  if (file) {
    j.add("compression", e.compressed ? "zstd" : "none")
        .add("crc32", fmt::format("{:08x}", e.crc32))
        .add("data_crc32", fmt::format("{:08x}", e.data_crc32));
    if (!e.delta_base.empty()) j.add("delta_base", e.delta_base);
  }
  j.add("dtype", graph::dtype_name(e.dtype)).add("edge", fmt::format("{}{}", e.is_input ? "in" : "out", e.index));
  if (file) j.add("encoding", e.encoding).add("file", e.file).add("file_bytes", e.file_bytes);
  j.add("format", graph::format_name(e.format));
  if (e.hash) j.add("hash", fmt::format("{:016x}", *e.hash));
  j.add("op", e.op).add("op_id", std::uint64_t{e.op_id}).add("payload", e.payload).add("rank", std::uint64_t{e.rank});
  if (file) j.add("raw_bytes", e.raw_bytes);
  j.add("shape", std::span<const std::int64_t>(e.shape)).add("source_format", graph::format_name(e.source_format));
  if (e.stats) {
    const spec::CaptureStats& s = *e.stats;
    CompactObject st;
    st.add("abs_mean", s.abs_mean).add("count", s.count).add("inf_count", s.inf_count).add("l2", s.l2);
    st.add("max", s.max).add("max_abs", s.max_abs).add("mean", s.mean).add("min", s.min);
    st.add("nan_count", s.nan_count).add("std", s.std).add("zero_count", s.zero_count);
    j.add_raw("statistics", st.str());
  }
  j.add("step", std::uint64_t{e.step}).add("tensor", e.tensor).add("trigger", e.trigger);
  return j.str();
}

DumpWriter::DumpWriter(fs::path dir, OutputOptions opts, std::uint32_t rank)
    : dir_(std::move(dir)), opts_(std::move(opts)), rank_(rank) {
  // The compact text that manifest_crc32 covers is {"checksum":...,"delta":...,"entries":[e1,e2,...],
  // "format_version":1,"rank":r} (keys sorted, as nlohmann::json writes them); write_manifest()
  // carries its CRC over from one call to the next, starting here with the part before the entries.
  manifest_.compression = nlohmann::json(opts_.zstd ? "zstd" : "none").dump();
  manifest_.delta = nlohmann::json(opts_.delta).dump();
  const std::string prefix =
      R"({"checksum":"crc32","compression":)" + manifest_.compression + R"(,"delta":)" + manifest_.delta + R"(,"entries":[)";
  manifest_.crc = crc32(prefix);
}

const DumpEntry& DumpWriter::add_entry(DumpEntry meta) {
  meta.rank = rank_;
  reserve_entry();
  pending_.push_back(std::move(meta));
  return pending_.back();
}

void DumpWriter::reserve_entry() {
  if (pending_.size() >= kFlushEntries) write_manifest();
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
  std::string name = fmt::format("step{}/{}.{}{}.npy", meta.step, file_stem(meta.op), meta.is_input ? "in" : "out", meta.index);
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
  reserve_entry();
  pending_.push_back(std::move(meta));
  return pending_.back();
}

std::string file_stem(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '/') out += '.';
    else if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') out += c;
    else out += '_';
  }
  if (out.empty()) return "_";
  constexpr std::size_t kMaxStem = 150, kKept = 133;
  if (out.size() <= kMaxStem) return out;
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64 of the whole name
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return fmt::format("{}~{:016x}", out.substr(0, kKept), h);
}

void DumpWriter::write_manifest() {
  if (pending_.empty() && manifest_.written) return;  // the file already says all of it
  // Only the entries added since the last call are serialized (see the constructor); the lines
  // of the earlier ones are copied from the previous file.
  std::string fresh;
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    const std::string e = manifest_line(pending_[i]);
    if (written_ + i > 0) {
      manifest_.crc = crc32(",", manifest_.crc);
      fresh += ",\n";
    }
    manifest_.crc = crc32(e, manifest_.crc);
    fresh += "  ";
    fresh += e;
  }
  const std::string suffix = fmt::format(R"(],"format_version":1,"rank":{}}})", rank_);
  const std::uint32_t crc = crc32(suffix, manifest_.crc);
  // The file: one entry per line.
  const std::string head = fmt::format(
      "{{\n \"checksum\": \"crc32\",\n \"compression\": {},\n \"delta\": {},\n \"entries\": [", manifest_.compression,
      manifest_.delta);
  const std::string tail =
      fmt::format("],\n \"format_version\": 1,\n \"manifest_crc32\": \"{:08x}\",\n \"rank\": {}\n}}\n", crc, rank_);
  const fs::path path = dir_ / "dump.json";
  if (manifest_.lines_bytes == 0) {
    std::string s = head;
    if (!fresh.empty()) s += '\n' + fresh + "\n ";
    s += tail;
    write_file_atomic(path, std::as_bytes(std::span(s.data(), s.size())));
  } else {
    // The new lines and the new checksum over the old tail; the lines before it stay.
    const std::uint64_t end = manifest_.lines_at + manifest_.lines_bytes;
    if (fs::file_size(path) < end)
      throw std::runtime_error(fmt::format("{}: shorter than the {} bytes of entries written to it (changed during the run?)",
                                           path.string(), end));
    {
      std::fstream out(path, std::ios::binary | std::ios::in | std::ios::out);
      out.seekp(static_cast<std::streamoff>(end));
      out << fresh << "\n " << tail;
      out.flush();
      if (!out) throw std::runtime_error(fmt::format("write to {} failed", path.string()));
    }
    fs::resize_file(path, end + fresh.size() + 2 + tail.size());
  }
  manifest_.lines_at = head.size() + 1;
  manifest_.lines_bytes += fresh.size();
  written_ += pending_.size();
  pending_.clear();
  manifest_.written = true;
}

std::string manifest_checksum(const nlohmann::json& manifest) {
  nlohmann::json body = manifest;
  if (body.is_object()) body.erase("manifest_crc32");
  const std::string text = body.dump();
  return fmt::format("{:08x}", crc32(text));
}

namespace {

// The fields manifest_line() writes, each of the JSON type it writes (when present).
void check_entry(const nlohmann::json& e, const std::string& where) {
  if (!e.is_object()) throw DumpError(fmt::format("{} is not an object", where));
  const auto bad = [&](const char* key, const char* expected) {
    const std::string got = e[key].dump();
    return DumpError(fmt::format("{}.{}: expected {}, got {}", where, key, expected,
                                 got.size() <= 40 ? got : std::string("a longer ") + e[key].type_name()));
  };
  for (const char* key : {"rank", "step", "op_id", "file_bytes", "raw_bytes"})
    if (e.contains(key) && !e[key].is_number_unsigned()) throw bad(key, "a non-negative integer");
  for (const char* key : {"op", "tensor", "edge", "dtype", "format", "source_format", "payload", "trigger", "hash", "file",
                          "encoding", "delta_base", "compression", "crc32", "data_crc32"})
    if (e.contains(key) && !e[key].is_string()) throw bad(key, "a string");
  if (e.contains("shape") && (!e["shape"].is_array() || !std::all_of(e["shape"].begin(), e["shape"].end(), [](const auto& d) {
                                return d.is_number_unsigned();
                              })))
    throw bad("shape", "a list of non-negative integers");
  if (e.contains("statistics") && !e["statistics"].is_object()) throw bad("statistics", "an object");
}

}  // namespace

void check_manifest(const nlohmann::json& m, const std::string& what) {
  if (!m.is_object() || !m.contains("entries") || !m["entries"].is_array())
    throw DumpError(fmt::format("{}: not a probelab dump manifest (no \"entries\" list)", what));
  if (m.value("format_version", 0) != 1)
    throw DumpError(fmt::format("{}: dump manifest format_version {} (this build reads 1)", what,
                                m.contains("format_version") ? m["format_version"].dump() : std::string("missing")));
  if (!m.contains("manifest_crc32") || !m["manifest_crc32"].is_string())
    throw DumpError(fmt::format("{}: dump manifest without its manifest_crc32 checksum", what));
  if (m["manifest_crc32"].get<std::string>() != manifest_checksum(m))
    throw DumpError(fmt::format("{}: manifest_crc32 mismatch (the manifest was modified or corrupted)", what));
  for (std::size_t i = 0; i < m["entries"].size(); ++i) check_entry(m["entries"][i], fmt::format("{}: entries[{}]", what, i));
}

fs::path dump_file_path(const fs::path& dir, const std::string& file) {
  const fs::path rel(file);
  if (file.empty() || rel.is_absolute())
    throw DumpError(fmt::format("'{}': a dump file must be a relative path inside the dump directory", file));
  for (const auto& part : rel)
    if (part == "..")
      throw DumpError(fmt::format("'{}': a dump file path may not leave the dump directory ('..')", file));
  const fs::path p = dir / rel;
  // Symbolic links may not lead out either.
  std::error_code ec;
  const fs::path real_dir = fs::weakly_canonical(dir, ec);
  const fs::path real = ec ? fs::path() : fs::weakly_canonical(p, ec);
  if (!ec) {
    const auto [d, f] = std::mismatch(real_dir.begin(), real_dir.end(), real.begin(), real.end());
    if (d != real_dir.end())
      throw DumpError(fmt::format("'{}': resolves to {}, outside the dump directory", file, real.string()));
  }
  return p;
}

graph::Tensor load_dump(const fs::path& dir, const nlohmann::json& manifest, const nlohmann::json& entry) {
  auto text_of = [](const nlohmann::json& e, const char* key) -> std::string {
    if (!e.contains(key) || !e[key].is_string())
      throw DumpError(fmt::format("manifest entry without a \"{}\" string", key));
    return e[key].get<std::string>();
  };
  // The delta chain from `entry` down to its raw base, followed without recursion (a chain is as
  // long as the run has steps) and checked for cycles.
  std::map<std::string, const nlohmann::json*> by_file;
  if (manifest.contains("entries") && manifest["entries"].is_array())
    for (const auto& e : manifest["entries"])
      if (e.is_object() && e.contains("file") && e["file"].is_string()) by_file.emplace(e["file"].get<std::string>(), &e);
  std::vector<const nlohmann::json*> chain{&entry};
  std::set<std::string> seen{text_of(entry, "file")};
  while (chain.back()->value("encoding", std::string("raw")) == "xor_delta") {
    const std::string file = text_of(*chain.back(), "file");
    const std::string base_file = text_of(*chain.back(), "delta_base");
    const auto it = by_file.find(base_file);
    if (it == by_file.end()) throw DumpError(fmt::format("{}: delta base {} not in the manifest", file, base_file));
    if (!seen.insert(base_file).second)
      throw DumpError(fmt::format("{}: delta chain loops back to {}", file, base_file));
    chain.push_back(it->second);
  }
  graph::Tensor t;
  for (auto e = chain.rbegin(); e != chain.rend(); ++e) {
    const std::string file = text_of(**e, "file");
    std::vector<std::byte> bytes;
    const fs::path path = dump_file_path(dir, file);
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) throw DumpError(fmt::format("{}: missing", file));
    bytes = read_file_bytes(path);
    if (fmt::format("{:08x}", crc32(bytes)) != text_of(**e, "crc32"))
      throw DumpError(fmt::format("{}: crc32 mismatch (file corrupted)", file));
    if ((*e)->value("compression", std::string("none")) == "zstd") {
      // the .npy inside: the tensor's bytes (raw_bytes) and a header of at most 64 KiB
      const auto& raw = (**e).contains("raw_bytes") ? (**e)["raw_bytes"] : nlohmann::json();
      if (!raw.is_number_unsigned()) throw DumpError(fmt::format("{}: compressed entry without raw_bytes", file));
      bytes = zstd_decompress(bytes, file, raw.get<std::uint64_t>() + 65536);
    }
    graph::Tensor cur;
    try {
      cur = graph::decode_npy(bytes, file);
    } catch (const graph::GraphError& err) {
      throw DumpError(err.what());
    }
    if (e != chain.rbegin()) {
      if (t.nbytes() != cur.nbytes())
        throw DumpError(fmt::format("{}: delta base {} has another size", file, text_of(**e, "delta_base")));
      xor_into(cur.bytes(), t.bytes());
    }
    if (fmt::format("{:08x}", crc32(cur.bytes())) != text_of(**e, "data_crc32"))
      throw DumpError(fmt::format("{}: data crc32 mismatch after decoding", file));
    t = std::move(cur);
  }
  return t;
}

}  // namespace probelab::probes
