// Capture and Breakpoint tasks, executed on the vector unit of one granted core
// (ctx.cores[0]), and asynchronous full-tensor captures on the capture DMA engine.
//
// Both read their argument block (spec/kernel_args.h) from HBM, then load the tensor through
// the core's MTE in blocks of half the UB (double-buffered: block b+1 loads while block b is
// processed), convert private formats to the plain layout (NC1HWC0/NHWC -> NCHW,
// FRACTAL_NZ -> ND) and process it; one vector pass over a block costs
// ceil(bytes / vector_bytes_per_cycle) cycles. Passes: statistics 1, hash 1, full copy 1, plus 1
// when the layout is converted. What is computed is defined in spec/capture_math.h.
//  - Capture: the record (stats, hash or the converted elements) goes to the capture unit.
//  - Breakpoint: statistics and the predicate of spec::BreakpointArgs; returns whether the
//    stream must halt (predicate holds, or halt_on_exception and the detection circuit saw an
//    anomaly for this op id and step).
#pragma once

#include "chip_model/core_interface.h"
#include "chip_model/spec/kernel_args.h"

namespace probelab::chip {

void run_capture_task(TaskContext& ctx);
/// An asynchronous full-tensor capture (kTaskFlagAsync) on the capture unit's DMA engine: the
/// tensor is read at one MTE port's rate (HBM client Capture), its layout converted by strided
/// DMA (no Vector pass), and the record produced. Runs in the engine's thread with its own qk.
void run_capture_dma(const ChipServices& chip, const spec::TaskDescriptor& task, std::uint32_t stream,
                     tlm_utils::tlm_quantumkeeper& qk);
/// The same for a full dump a kernel task asked for (TaskDescriptor dump_outputs): tensor `ref`
/// (slot `index`) of `task`, no argument block.
void run_dump_dma(const ChipServices& chip, const spec::TaskDescriptor& task, std::uint32_t stream,
                  tlm_utils::tlm_quantumkeeper& qk, const spec::TensorRef& ref, std::uint16_t index, bool is_input);
bool run_breakpoint_task(TaskContext& ctx);

}  // namespace probelab::chip
