// Helpers for the device-kernel tests: an in-memory HBM, tensors placed in it, op args, and
// running one op through kernels::OpRunner without SystemC.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "chip_model/kernels/op_runner.h"
#include "numerics/fp16.h"
#include "chip_model/spec/op_args.h"
#include "graph/format.h"
#include "graph/tensor.h"

namespace probelab::chip::testing {

/// Sparse byte store standing in for HBM.
class MemStore final : public kernels::KernelMemory {
 public:
  void read(std::uint64_t addr, std::span<std::byte> dst) override {
    for (std::size_t i = 0; i < dst.size(); ++i) {
      auto it = bytes_.find(addr + i);
      dst[i] = it == bytes_.end() ? std::byte{0} : it->second;
    }
  }
  void write(std::uint64_t addr, std::span<const std::byte> src) override {
    for (std::size_t i = 0; i < src.size(); ++i) bytes_[addr + i] = src[i];
  }

 private:
  std::map<std::uint64_t, std::byte> bytes_;
};

/// Places tensors at increasing addresses and builds their TensorRefs.
class Placer {
 public:
  explicit Placer(MemStore& mem, std::uint64_t base = 0x1000) : mem_(mem), next_(base) {}
  /// Stores `t` (logical layout) converted to `format`.
  spec::TensorRef put(const graph::Tensor& t, graph::Format format = graph::Format::ND) {
    const graph::Tensor stored = format == graph::Format::ND || format == graph::Format::NCHW
                                     ? t
                                     : graph::convert_format(t, format);
    const std::uint64_t addr = next_;
    mem_.write(addr, stored.bytes());
    next_ += (stored.nbytes() + 63) / 64 * 64 + 64;
    return spec::make_tensor_ref(addr, static_cast<std::uint8_t>(t.dtype()), static_cast<std::uint8_t>(format),
                                 t.shape());
  }
  /// A reference for an output of `dtype` and `shape` (stored in `format`).
  spec::TensorRef out(graph::DType dtype, const graph::Shape& shape, graph::Format format = graph::Format::ND) {
    const std::uint64_t addr = next_;
    next_ += (graph::physical_nbytes({dtype, shape, format}) + 63) / 64 * 64 + 64;
    return spec::make_tensor_ref(addr, static_cast<std::uint8_t>(dtype), static_cast<std::uint8_t>(format), shape);
  }

 private:
  MemStore& mem_;
  std::uint64_t next_;
};

/// Reads back a tensor in its logical layout.
inline graph::Tensor fetch(MemStore& mem, const spec::TensorRef& r) {
  graph::TensorDesc d{static_cast<graph::DType>(r.dtype), graph::Shape(r.dims, r.dims + r.rank),
                      static_cast<graph::Format>(r.format)};
  std::vector<std::byte> b(graph::physical_nbytes(d));
  mem.read(r.addr, b);
  return graph::to_logical(graph::Tensor(d, std::move(b)));
}

/// Random FP16 tensor with values uniform in [lo, hi), seeded.
inline graph::Tensor random_f16(const graph::Shape& shape, std::uint64_t seed, float lo = -1.0f, float hi = 1.0f,
                                graph::DType dtype = graph::DType::F16) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(graph::numel(shape)));
  for (float& x : v) x = u(rng);
  return graph::Tensor::from_f32(shape, v, dtype);
}

/// The FP16 elements of an F16 tensor.
inline const num::f16* f16p(const graph::Tensor& t) { return reinterpret_cast<const num::f16*>(t.data<std::uint16_t>().data()); }

inline std::uint16_t bits_at(const graph::Tensor& t, std::size_t i) { return t.data<std::uint16_t>()[i]; }
inline void set_bits(graph::Tensor& t, std::size_t i, std::uint16_t b) { t.data<std::uint16_t>()[i] = b; }

/// Runs one op through OpRunner (load, compute, finish, store) and returns it.
inline kernels::OpRunner run_op(MemStore& mem, const spec::OpArgs& args, num::Mode mode = {},
                                FaultHooks* hooks = nullptr) {
  kernels::OpRunner r(spec::decode_op_args(spec::encode_op_args(args)), mode);
  r.load(mem, hooks, FaultSite{});
  r.compute(hooks, FaultSite{});
  r.finish(hooks, FaultSite{}, 64);
  r.store(mem);
  return r;
}

inline spec::OpArgs op_args(std::string type, std::vector<spec::TensorRef> in, std::vector<spec::TensorRef> out,
                            spec::OpAttrs attrs = {}) {
  spec::OpArgs a;
  a.op_type = type;
  a.op_name = "test/" + type;
  a.inputs = std::move(in);
  a.outputs = std::move(out);
  a.attrs = std::move(attrs);
  return a;
}

}  // namespace probelab::chip::testing
