// The .npy reader: bytes -> tensor (decode_npy), then its statistics, as a loaded weight is used.
#include <vector>

#include "fuzz/fuzz_util.h"
#include "graph/npy.h"
#include "sim/scenario/bad_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace probelab;
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>(data[i]);
  try {
    const graph::Tensor t = graph::decode_npy(bytes, "fuzz.npy");
    (void)t.to_f64();
    (void)graph::encode_npy(t);
  } catch (const std::exception& e) {
    if (!sim::is_bad_input(e)) fuzz::unclassified(e);
  }
  return 0;
}
