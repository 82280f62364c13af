// The .npy reader: bytes -> tensor (decode_npy), then its statistics, as a loaded weight is used.
#include <vector>

#include "fuzz/fuzz_util.h"
#include "graph/graph.h"
#include "graph/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace probelab;
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>(data[i]);
  try {
    const graph::Tensor t = graph::decode_npy(bytes, "fuzz.npy");
    (void)t.to_f64();
    (void)graph::encode_npy(t);
  } catch (const graph::GraphError&) {
    // bad input (exit 2): the only error type of the graph layer, which knows no layer above it
  } catch (const std::exception& e) {
    fuzz::unclassified(e);
  }
  return 0;
}
