// `probelab compare` on a dump manifest: the input is run A's dump.json, beside real dump files
// (a raw, a zstd-compressed and an XOR-delta .npy); run B is a valid copy. An input starting with
// the line "#crc" has that line removed and, when the rest parses as JSON, its manifest_crc32
// recomputed, so mutations reach the entries instead of stopping at the checksum.
#include <nlohmann/json.hpp>

#include "fuzz/fuzz_util.h"
#include "probes/dump_writer.h"
#include "sim/run/run_compare.h"
#include "sim/scenario/bad_input.h"

namespace {

namespace fs = std::filesystem;
using namespace probelab;

// Writes a valid dump of three captures into `dir` once; returns the manifest text.
std::string reference_dump(const fs::path& dir) {
  probes::OutputOptions opts;
  opts.delta = true;
  probes::DumpWriter w(dir, opts, 0);
  for (std::uint32_t step = 0; step < 2; ++step) {
    probes::DumpEntry e;
    e.op = "fc1";
    e.tensor = "fc1";
    e.step = step;
    w.write_tensor(e, graph::Tensor::from_f32({2, 3}, std::vector<float>{1, 2, 3, 4, 5, static_cast<float>(6 + step)}));
  }
  probes::OutputOptions z;
  z.zstd = true;
  probes::DumpWriter wz(dir / "z", z, 0);
  probes::DumpEntry e;
  e.op = "fc2";
  e.tensor = "fc2";
  wz.write_tensor(e, graph::Tensor::from_f32({4}, std::vector<float>{0, 0, 0, 1}));
  wz.write_manifest();
  w.write_manifest();
  std::ifstream in(dir / "dump.json", std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fs::path a = fuzz::scratch_dir() / "a", b = fuzz::scratch_dir() / "b";
  static const std::string manifest = [] {
    reference_dump(a);
    return reference_dump(b);
  }();
  (void)manifest;
  std::string input = fuzz::text(data, size);
  if (input.rfind("#crc\n", 0) == 0) {
    input.erase(0, 5);
    try {
      nlohmann::json j = nlohmann::json::parse(input);
      if (j.is_object()) j["manifest_crc32"] = probes::manifest_checksum(j);
      input = j.dump();
    } catch (const std::exception&) {
    }
  }
  fuzz::write_file(a / "dump.json", input);
  try {
    const sim::RunComparison c = sim::compare_runs(a, b);
    (void)c.to_json().dump();
  } catch (const std::exception& e) {
    if (!sim::is_bad_input(e)) fuzz::unclassified(e);
  }
  return 0;
}
