// The probe configuration: YAML/JSON text -> ProbeConfig, then the insertion pass on a small
// graph (globs, scope regexes and conditions meet real op names there).
#include "fuzz/fuzz_util.h"
#include "graph/model_yaml.h"
#include "probes/insertion_pass.h"
#include "probes/probe_config.h"

namespace {

const probelab::graph::Graph& small_graph() {
  static const probelab::graph::Graph g = probelab::graph::parse_model_yaml(R"(name: net
inputs:
  - {name: x, shape: [2, 8]}
ops:
  - {name: fc1, type: MatMul, inputs: [x], weights: {weight: [8, 8]}, scope: net/layer0/fc1}
  - {name: act, type: Relu, scope: net/layer0/act}
  - {name: fc2, type: MatMul, weights: {weight: [8, 4]}, scope: net/layer1/fc2}
)", "net.yaml").graph;
  return g;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace probelab;
  try {
    const probes::ProbeConfig cfg = probes::ProbeConfig::from_string(fuzz::text(data, size), "fuzz.yaml");
    graph::Graph g = small_graph();
    probes::insert_probes(g, cfg);
  } catch (const probes::ConfigError&) {
    // bad input (exit 2), as sim::is_bad_input classifies the error types of these layers
  } catch (const graph::GraphError&) {
  } catch (const std::exception& e) {
    fuzz::unclassified(e);
  }
  return 0;
}
