// Helpers for the AI core tests: a chip with the AI cores and a bound host port, tensors and
// args blocks placed in its HBM through the backdoor (test setup only).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <systemc>
#include <tlm_utils/simple_initiator_socket.h>

#include "chip_model/ai_core.h"
#include "chip_model/chip.h"
#include "chip_model/spec/op_args.h"
#include "tests/chip_model/chip_test_util.h"
#include "graph/format.h"
#include "graph/tensor.h"

namespace probelab::chip::testing {

/// An unused initiator bound to the chip's host socket (the tests drive registers directly).
struct HostPort : sc_core::sc_module {
  tlm_utils::simple_initiator_socket<HostPort> socket{"socket"};
  explicit HostPort(sc_core::sc_module_name n) : sc_module(n) {}
};

/// A chip whose Kernel tasks run on AiCore, with a TestHost.
struct AiCoreChip {
  AiCore* core = nullptr;
  Chip chip;
  HostPort port{"host_port"};
  TestHost host{chip};
  explicit AiCoreChip(const ChipConfig& cfg, Trace* trace = nullptr, AiCoreOptions opts = {})
      : chip("chip", cfg, options(trace, opts, &core)) {
    port.socket.bind(chip.host_socket);
  }
  static ChipOptions options(Trace* trace, AiCoreOptions opts, AiCore** out) {
    ChipOptions o;
    o.trace = trace;
    o.make_cores = AiCore::factory(opts, out);
    return o;
  }
};

/// Bump allocator over a chip's HBM (4 KiB aligned).
class HbmPlacer {
 public:
  HbmPlacer(Hbm& hbm, std::uint64_t base) : hbm_(hbm), next_(base) {}
  std::uint64_t alloc(std::size_t bytes) {
    const std::uint64_t a = next_;
    next_ += (bytes + 4095) / 4096 * 4096;
    return a;
  }
  spec::TensorRef put(const graph::Tensor& t) {
    const std::uint64_t a = alloc(t.nbytes());
    hbm_.debug_write(a, t.bytes());
    return spec::make_tensor_ref(a, static_cast<std::uint8_t>(t.dtype()), 0, t.shape());
  }
  spec::TensorRef out(graph::DType dt, const graph::Shape& s) {
    return spec::make_tensor_ref(alloc(graph::physical_nbytes({dt, s, graph::Format::ND})),
                                 static_cast<std::uint8_t>(dt), 0, s);
  }
  /// Writes an args block; returns a Kernel task descriptor pointing at it.
  spec::TaskDescriptor kernel(std::uint32_t task_id, const spec::OpArgs& a) {
    const auto bytes = spec::encode_op_args(a);
    const std::uint64_t addr = alloc(bytes.size());
    hbm_.debug_write(addr, bytes);
    auto t = task(spec::TaskKind::Kernel, task_id, addr, static_cast<std::uint32_t>(bytes.size()));
    t.kernel = spec::kKernelOpArgs;
    return t;
  }
  graph::Tensor get(const spec::TensorRef& r) {
    graph::TensorDesc d{static_cast<graph::DType>(r.dtype), graph::Shape(r.dims, r.dims + r.rank), graph::Format::ND};
    std::vector<std::byte> b(graph::physical_nbytes(d));
    hbm_.debug_read(r.addr, b);
    return graph::Tensor(d, std::move(b));
  }

 private:
  Hbm& hbm_;
  std::uint64_t next_;
};

}  // namespace probelab::chip::testing
