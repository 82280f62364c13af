// The built-in injector kinds, registered explicitly (no static-initialisation order games).
#include "injectors/injector.h"

namespace probelab::inject {

void register_value_injectors(InjectorRegistry& r);
void register_accumulation_injector(InjectorRegistry& r);
void register_collective_order_injector(InjectorRegistry& r);
void register_bitflip_injector(InjectorRegistry& r);
void register_device_fault_injectors(InjectorRegistry& r);
void register_perf_fault_injectors(InjectorRegistry& r);
void register_float_status_injectors(InjectorRegistry& r);

void register_builtin_injectors(InjectorRegistry& r) {
  register_value_injectors(r);
  register_accumulation_injector(r);
  register_collective_order_injector(r);
  register_bitflip_injector(r);
  register_device_fault_injectors(r);
  register_perf_fault_injectors(r);
  register_float_status_injectors(r);
}

}  // namespace probelab::inject
