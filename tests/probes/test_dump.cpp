#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "graph/npy.h"
#include "tests/probes/probe_test_util.h"
#include "probes/capture_drain.h"
#include "probes/dump_writer.h"

using namespace probe_test;
namespace fs = std::filesystem;
using probes::DumpEntry;
using probes::DumpWriter;

namespace {

DumpEntry meta(const char* op, std::uint32_t step) {
  DumpEntry e;
  e.op = op;
  e.op_id = 3;
  e.tensor = std::string(op) + ":0";
  e.step = step;
  e.trigger = "capture";
  return e;
}

nlohmann::json manifest(const fs::path& dir) {
  std::ifstream in(dir / "dump.json");
  return nlohmann::json::parse(in);
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool no_tmp_files(const fs::path& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().extension() == ".tmp") return false;
  return true;
}

}  // namespace

TEST(Dump, NpyFilesAndManifest) {
  auto dir = temp_dir("dump_plain");
  DumpWriter w(dir, {}, 2);
  auto t = f16({2, 3}, {1, -2, 3.5f, 0, 65504, -0.25f});
  const DumpEntry e = w.write_tensor(meta("layer1/fc1", 4), t);  // a copy: the writer may flush its entries
  EXPECT_EQ(e.file, "step4/layer1.fc1.out0.npy");
  EXPECT_EQ(e.rank, 2u);
  ASSERT_TRUE(e.stats);
  EXPECT_DOUBLE_EQ(e.stats->max, 65504.0);
  w.add_entry([] {
    DumpEntry s = meta("relu", 4);
    spec::CaptureStats st;
    st.mean = 0.5;
    s.stats = st;
    s.payload = "statistics";
    return s;
  }());
  w.write_manifest();
  // the .npy is readable and bit-identical
  graph::Tensor back = graph::read_npy((dir / e.file).string());
  EXPECT_EQ(back, t);
  auto j = manifest(dir);
  ASSERT_EQ(j["entries"].size(), 2u);
  const auto& je = j["entries"][0];
  EXPECT_EQ(je["op"], "layer1/fc1");
  EXPECT_EQ(je["tensor"], "layer1/fc1:0");
  EXPECT_EQ(je["step"], 4);
  EXPECT_EQ(je["rank"], 2);
  EXPECT_EQ(je["dtype"], "float16");
  EXPECT_EQ(je["shape"], nlohmann::json::array({2, 3}));
  EXPECT_EQ(je["format"], "ND");
  EXPECT_EQ(je["statistics"]["max"], 65504.0);
  EXPECT_EQ(je["crc32"], fmt::format("{:08x}", probes::crc32(probes::read_file_bytes(dir / e.file))));
  EXPECT_EQ(je["data_crc32"], fmt::format("{:08x}", probes::crc32(t.bytes())));
  EXPECT_FALSE(j["entries"][1].contains("file"));
  EXPECT_EQ(j["entries"][1]["statistics"]["mean"], 0.5);
  EXPECT_EQ(probes::load_dump(dir, j, je), t);
  EXPECT_TRUE(no_tmp_files(dir));
  // corruption of a stored file is detected on load
  {
    std::fstream f(dir / e.file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');
  }
  EXPECT_THROW(probes::load_dump(dir, j, je), std::runtime_error);
}

TEST(Dump, ZstdAndDeltaRoundTrip) {
  auto dir = temp_dir("dump_zstd_delta");
  probes::OutputOptions o;
  o.zstd = true;
  o.delta = true;
  DumpWriter w(dir, o, 0);
  // a slowly changing weight-like tensor: 5% of the elements change between captures
  std::vector<float> v(4096);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<float>(i) * 0.01f);
  std::vector<graph::Tensor> versions;
  for (int step = 0; step < 3; ++step) {
    for (std::size_t i = static_cast<std::size_t>(step); i < v.size(); i += 20) v[i] += 0.125f;
    versions.push_back(graph::Tensor::from_f32({64, 64}, v, graph::DType::F32));
    w.write_tensor(meta("w", static_cast<std::uint32_t>(step)), versions.back());
  }
  w.write_manifest();
  auto j = manifest(dir);
  ASSERT_EQ(j["entries"].size(), 3u);
  EXPECT_EQ(j["entries"][0]["encoding"], "raw");
  EXPECT_EQ(j["entries"][1]["encoding"], "xor_delta");
  EXPECT_EQ(j["entries"][1]["delta_base"], j["entries"][0]["file"]);
  EXPECT_EQ(j["entries"][2]["delta_base"], j["entries"][1]["file"]);
  EXPECT_EQ(j["entries"][1]["compression"], "zstd");
  EXPECT_TRUE(j["entries"][1]["file"].get<std::string>().ends_with(".npy.zst"));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(probes::load_dump(dir, j, j["entries"][i]), versions[static_cast<std::size_t>(i)]) << i;
  // deltas of a mostly unchanged tensor compress far better than the raw first capture
  double raw = j["entries"][0]["raw_bytes"].get<double>();
  double first = j["entries"][0]["file_bytes"].get<double>();
  double delta = j["entries"][2]["file_bytes"].get<double>();
  EXPECT_GT(raw / delta, 5.0) << "delta ratio";
  EXPECT_LT(delta, first / 3);
  EXPECT_EQ(w.files(), 3u);
  EXPECT_TRUE(no_tmp_files(dir));
}

TEST(Dump, Bf16IsStoredWidenedAndNamesNeverCollide) {
  auto dir = temp_dir("dump_bf16");
  DumpWriter w(dir, {}, 0);
  std::vector<float> v{1.0f, -2.5f, 3.0e38f, 0.0f};
  auto t = graph::Tensor::from_f32({4}, v, graph::DType::BF16);
  const DumpEntry e1 = w.write_tensor(meta("a", 0), t);
  const DumpEntry e2 = w.write_tensor(meta("a", 0), t);  // same edge, same step (e.g. capture + break dump)
  EXPECT_NE(e1.file, e2.file);
  EXPECT_EQ(e2.dtype, graph::DType::BF16);
  w.write_manifest();
  auto j = manifest(dir);
  auto back = probes::load_dump(dir, j, j["entries"][0]);
  EXPECT_EQ(back.dtype(), graph::DType::F32);
  EXPECT_EQ(back.to_f32(), t.to_f32());
}

// An op name longer than a file name may be (a 300-character ONNX node name): the file's stem is
// its first 133 characters and a hash of the whole name, so the dump is written and read back,
// and two long names that share their first 133 characters still get two files.
TEST(Dump, LongOpNamesGetShortFileNames) {
  auto dir = temp_dir("dump_long");
  DumpWriter w(dir, {}, 0);
  const std::string a(300, 'a'), b = std::string(299, 'a') + "b";
  EXPECT_EQ(probes::file_stem(a).size(), 150u);
  EXPECT_EQ(probes::file_stem(a), probes::file_stem(a));
  EXPECT_NE(probes::file_stem(a), probes::file_stem(b));
  EXPECT_EQ(probes::file_stem("fc1/w:0"), "fc1.w_0");  // short names as before
  EXPECT_EQ(probes::file_stem(std::string(150, 'x')), std::string(150, 'x'));
  const std::vector<float> v{1.0f, 2.0f, 3.0f};
  const auto t = graph::Tensor::from_f32({3}, v);
  const DumpEntry ea = w.write_tensor(meta(a.c_str(), 0), t), eb = w.write_tensor(meta(b.c_str(), 0), t);
  EXPECT_NE(ea.file, eb.file);
  EXPECT_LT(fs::path(ea.file).filename().string().size(), 200u) << ea.file;
  w.write_manifest();
  auto j = manifest(dir);
  EXPECT_EQ(probes::load_dump(dir, j, j["entries"][1]).to_f32(), t.to_f32());
}

TEST(Dump, ManifestWrittenStepByStepEqualsOneWrittenAtOnce) {
  // write_manifest() after every step serializes only the new entries and carries the checksum
  // over; the file must hold what a single write of all entries holds, and pass check_manifest.
  for (bool zstd : {false, true}) {
    probes::OutputOptions opts;
    opts.zstd = zstd;
    auto dir_steps = temp_dir(zstd ? "dump_steps_z" : "dump_steps");
    auto dir_once = temp_dir(zstd ? "dump_once_z" : "dump_once");
    DumpWriter steps(dir_steps, opts, 1), once(dir_once, opts, 1);
    steps.write_manifest();  // before any entry: an empty, valid manifest
    EXPECT_NO_THROW(probes::check_manifest(manifest(dir_steps), "empty"));
    EXPECT_TRUE(manifest(dir_steps)["entries"].empty());
    for (std::uint32_t step = 0; step < 5; ++step) {
      for (std::uint32_t i = 0; i <= step % 3; ++i) {  // zero to two entries more per step
        const std::string op = fmt::format("layer{}/fc", i);
        steps.write_tensor(meta(op.c_str(), step), f16({2, 2}, {1.0f * step, -2, 0.5f * i, 3}));
        once.write_tensor(meta(op.c_str(), step), f16({2, 2}, {1.0f * step, -2, 0.5f * i, 3}));
      }
      const std::string before = read_text(dir_steps / "dump.json");
      const auto links = fs::hard_link_count(dir_steps / "dump.json");
      std::error_code ec;
      fs::create_hard_link(dir_steps / "dump.json", dir_steps / "dump.json.link", ec);
      ASSERT_FALSE(ec) << ec.message();
      steps.write_manifest();
      if (step == 0) {  // the first entries: the whole file, written atomically
        fs::remove(dir_steps / "dump.json.link");
        continue;
      }
      const auto j = manifest(dir_steps);
      EXPECT_NO_THROW(probes::check_manifest(j, fmt::format("step {}", step)));
      EXPECT_EQ(j["entries"].size(), steps.entry_count());
      // Updated in place (the hard link sees the new content: no copy renamed over it), the
      // lines already there untouched: only the old tail (after the last entry line) changes.
      const std::string after = read_text(dir_steps / "dump.json");
      EXPECT_EQ(read_text(dir_steps / "dump.json.link"), after);
      EXPECT_EQ(fs::hard_link_count(dir_steps / "dump.json"), links + 1);
      const std::size_t kept = before.rfind("\n ],");
      ASSERT_NE(kept, std::string::npos) << before;
      EXPECT_EQ(after.substr(0, kept), before.substr(0, kept));
      fs::remove(dir_steps / "dump.json.link");
    }
    once.write_manifest();
    EXPECT_EQ(manifest(dir_steps), manifest(dir_once));
    EXPECT_EQ(read_text(dir_steps / "dump.json"), read_text(dir_once / "dump.json"));
    // an edit anywhere, here in the first entry, breaks the carried-over checksum
    auto j = manifest(dir_steps);
    j["entries"][0]["step"] = 7;
    EXPECT_THROW(probes::check_manifest(j, "edited"), probes::DumpError);
  }
}

TEST(Dump, ManyEntriesGoToTheManifestInsteadOfStayingInMemory) {
  // A long run: once kFlushEntries entries wait, the writer writes them to dump.json itself (a
  // complete manifest of everything so far) and keeps none of them; the lines already in the
  // file are copied from it into the next one. The final file equals one written by a writer
  // whose every entry was written at once.
  constexpr std::size_t kFlush = DumpWriter::kFlushEntries;
  auto dir = temp_dir("dump_flush");
  DumpWriter w(dir, {}, 5);
  auto entry = [](std::size_t i) {
    DumpEntry e = meta(fmt::format("layer{}/fc", i % 7).c_str(), static_cast<std::uint32_t>(i / 7));
    e.payload = "statistics";
    e.stats = spec::CaptureStats{};
    e.stats->mean = 0.25 * static_cast<double>(i);
    e.stats->count = i;
    return e;
  };
  const std::size_t total = 2 * kFlush + kFlush / 2 + 3;
  for (std::size_t i = 0; i < kFlush; ++i) w.add_entry(entry(i));
  EXPECT_FALSE(fs::exists(dir / "dump.json"));  // nothing flushed before the limit
  w.add_entry(entry(kFlush));
  ASSERT_TRUE(fs::exists(dir / "dump.json"));
  EXPECT_EQ(manifest(dir)["entries"].size(), kFlush);
  EXPECT_NO_THROW(probes::check_manifest(manifest(dir), "first flush"));
  for (std::size_t i = kFlush + 1; i < total; ++i) w.add_entry(entry(i));
  EXPECT_EQ(manifest(dir)["entries"].size(), 2 * kFlush);
  EXPECT_EQ(w.entry_count(), total);
  w.write_manifest();
  const auto j = manifest(dir);
  EXPECT_NO_THROW(probes::check_manifest(j, "final"));
  ASSERT_EQ(j["entries"].size(), total);
  for (std::size_t i = 0; i < total; i += 97) {
    EXPECT_EQ(j["entries"][i]["statistics"]["count"], i);
    EXPECT_EQ(j["entries"][i]["step"], i / 7);
    EXPECT_EQ(j["entries"][i]["rank"], 5);
  }
  // the same entries serialized in one go (no flush in between) give the same bytes
  std::string lines;
  for (std::size_t i = 0; i < total; ++i) lines += (i ? ",\n  " : "  ") + probes::manifest_line([&] {
    DumpEntry e = entry(i);
    e.rank = 5;
    return e;
  }());
  const std::string text = read_text(dir / "dump.json");
  EXPECT_NE(text.find(lines), std::string::npos);
  // a second write with nothing new leaves the file as it is
  w.write_manifest();
  EXPECT_EQ(read_text(dir / "dump.json"), text);
  EXPECT_TRUE(no_tmp_files(dir));
}
