// Internal bulk helpers shared by bulk*.cpp and gemm*.cpp.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "numerics/bulk.h"

namespace probelab::num::detail {

// Throws std::invalid_argument "probelab::num::<what>: <a> has <n> elements, <b> has <m>".
void require_same_size(const char* what, std::size_t n, std::size_t m, const char* a, const char* b);

// Applies the Mode to FP32 results in place (fp32.h deliver), element by element.
BulkReport deliver_inplace(std::span<float> x, const Mode& mode);

}  // namespace probelab::num::detail
