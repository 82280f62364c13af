// The timing-model cost of Cube GEMMs (chip_model/kernels/matmul_kernels.cpp), shared by the
// kernels that run one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "chip_model/kernels/kernel.h"

namespace probelab::chip::kernels {

/// `count` GEMMs of m x k by k x n reading inputs ia (A) and ib (B) of the call: their dtype's
/// bytes per element, their HBM bytes and addresses; a_distinct / b_distinct as in GemmWork.
GemmWork gemm_work(const KernelCall& c, std::int64_t count, std::int64_t m, std::int64_t n, std::int64_t k,
                   std::int64_t a_distinct, std::int64_t b_distinct, std::size_t ia, std::size_t ib);

/// An op's cost made of GEMM `g` plus `epilogue_elems` Vector elements; HBM traffic of all its
/// inputs and its first output.
OpWork cube_work(const KernelCall& c, GemmWork g, std::uint64_t epilogue_elems);

}  // namespace probelab::chip::kernels
