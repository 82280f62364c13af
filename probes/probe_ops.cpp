// Registration of the probe op types in the graph's op registry (see insertion_pass.h).
#include <mutex>

#include "graph/op_registry.h"
#include "probes/insertion_pass.h"

namespace probelab::probes {

namespace {

graph::OpDef probe_def(std::string_view type, std::string doc) {
  graph::OpDef d;
  d.type = std::string(type);
  d.doc = std::move(doc);
  d.min_inputs = d.max_inputs = 1;
  d.num_outputs = 0;
  d.input_names = {"X"};
  auto s = [](const char* name, const char* def, const char* what) {
    return graph::AttrSpec{name, false, graph::AttrValue{std::string(def)}, what};
  };
  auto i = [](const char* name, std::int64_t def, const char* what) {
    return graph::AttrSpec{name, false, graph::AttrValue{def}, what};
  };
  d.attrs = {s("target", "", "observed tensor"),
             s("target_op", "", "observed op"),
             i("is_input", 0, "1: an input edge of target_op"),
             i("output_index", 0, "slot of the tensor in target_op's inputs/outputs"),
             s("position", "after", "before | after the target op's kernel task"),
             s("source_format", "ND", "format of the tensor in HBM (converted to NCHW/ND on the device)"),
             s("watch_point", "", "watch point id(s), comma separated"),
             s("mode", "statistics", "statistics | full | hash"),
             graph::AttrSpec{"sample_rate", false, graph::AttrValue{1.0}, "sampling probability"}};
  if (type == kProbeBreakpointType) {
    d.attrs.push_back(s("condition", "", "condition expression (empty: exception test only)"));
    d.attrs.push_back(i("halt_on_exception", 0, "1: also halt when the op latched an exception"));
  }
  d.infer = [](const graph::Op&, std::span<const graph::TensorDesc>) { return std::vector<graph::TensorDesc>{}; };
  d.reference = [](const graph::Op&, std::span<const graph::Tensor* const>, std::span<graph::Tensor>,
                   graph::RefPrecision) {};
  return d;
}

}  // namespace

void register_probe_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = graph::OpRegistry::instance();
    if (!r.find(std::string(kProbeCaptureType)))
      r.add(probe_def(kProbeCaptureType, "debug capture of one tensor edge (statistics, full tensor or hash)"));
    if (!r.find(std::string(kProbeSyncType)))
      r.add(probe_def(kProbeSyncType, "cross-rank consistency sample of a collective's input or output"));
    if (!r.find(std::string(kProbeIntegrityType)))
      r.add(probe_def(kProbeIntegrityType, "hash of a tensor as its producer wrote it or as a consumer reads it"));
    if (!r.find(std::string(kProbeBreakpointType)))
      r.add(probe_def(kProbeBreakpointType, "conditional breakpoint: halts the stream after the observed op"));
  });
}

bool is_probe_op(const graph::Op& op) {
  return op.type == kProbeCaptureType || op.type == kProbeSyncType || op.type == kProbeBreakpointType ||
         op.type == kProbeIntegrityType;
}

bool is_collective_type(std::string_view t) {
  return t == "AllReduce" || t == "ReduceScatter" || t == "AllGather" || t == "Broadcast";
}

bool collective_moves_values(std::string_view t) { return t == "AllGather" || t == "Broadcast"; }

std::string_view probe_kind_name(ProbeKind k) {
  switch (k) {
    case ProbeKind::Capture: return "capture";
    case ProbeKind::Sync: return "sync";
    case ProbeKind::Breakpoint: return "breakpoint";
    case ProbeKind::Integrity: return "integrity";
  }
  return "?";
}

}  // namespace probelab::probes
