// Registry of device kernels by canonical op type.
#include <fmt/format.h>

#include <stdexcept>

#include "chip_model/kernels/kernel.h"
#include "graph/fused_ops.h"
#include "graph/op_registry.h"

namespace probelab::chip::kernels {

KernelRegistry& KernelRegistry::instance() {
  static KernelRegistry r;
  return r;
}

KernelRegistry::KernelRegistry() : vector_(make_vector_kernel()), fused_(make_fused_kernel()) {
  graph::ensure_fused_ops_registered();
  register_cube_kernels(*this);
}

void KernelRegistry::add(const std::string& type, std::unique_ptr<Kernel> k) {
  const graph::OpDef* def = graph::OpRegistry::instance().find(type);
  const std::string canonical = def ? def->type : type;
  if (kernels_.count(canonical)) throw std::logic_error(fmt::format("kernel for op type '{}' registered twice", canonical));
  kernels_.emplace(canonical, std::move(k));
}

const Kernel& KernelRegistry::get(const std::string& type) const {
  const graph::OpDef* def = graph::OpRegistry::instance().find(type);
  if (auto it = kernels_.find(def ? def->type : type); it != kernels_.end()) return *it->second;
  if (def && def->reference) return *vector_;
  throw std::runtime_error(fmt::format(
      "no device kernel for op type '{}' (neither a Cube kernel nor a graph reference kernel exists)", type));
}

const Kernel& KernelRegistry::get(const spec::OpArgs& args) const {
  return args.is_fused() ? *fused_ : get(args.op_type);
}

std::vector<std::string> KernelRegistry::explicit_types() const {
  std::vector<std::string> out;
  for (const auto& [type, k] : kernels_) out.push_back(type);
  return out;
}

}  // namespace probelab::chip::kernels
