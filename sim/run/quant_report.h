// report.json `quantization`: what the quantized Cube ops did on the chip, per layer. The chip's
// op records carry, for every execution of a quantized op (or fused body op), each operand's
// format, scale, amax, saturated / flushed / subnormal codes and (activations) the amax of every
// input channel; this section aggregates them:
//
//   quantization  {layers: [{op, rank, executions,
//                            activations | weights: {format, scaling (current | delayed),
//                              elements, saturated, underflow, subnormal,
//                              amax: {min, max, last}, scale: {min, max, last},
//                              per_step: [{step, amax, scale, next_scale (delayed), saturated, underflow, subnormal}],
//                              channels (activations): {axis_size, amax: [last step, per channel],
//                                                        scale: [amax / qmax of the format, per channel],
//                                                        spread: max / smallest non-zero channel amax}}}],
//                  saturated, underflow: totals over every layer and step,
//                  first_saturation: {op, rank, step, operand, count} | null  (earliest step, then
//                                     executed order)}
//                 null when nothing is quantized. Layers in executed order per rank, ranks in order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/run/perf_ledger.h"

namespace probelab::sim {

/// One entry per execution of a quantized op in `ledger` (rank `rank`), in completion order.
nlohmann::json quant_executions(const PerfLedger& ledger, std::uint32_t rank);
/// The `quantization` section from every rank's executions (null when there are none).
nlohmann::json quant_section(const std::vector<nlohmann::json>& executions);
/// Summary lines ("  quantization: ..."), empty when the section is null.
std::string quant_summary(const nlohmann::json& section);

}  // namespace probelab::sim
