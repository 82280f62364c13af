// NumPy .npy files (format version 1.0 written; 1.0, 2.0 and 3.0 read): little-endian, C order.
// Supported element types: float16 ('<f2'), float32 ('<f4'), float64 ('<f8'), int32 ('<i4'),
// int64 ('<i8'), bool ('|b1'). NumPy has no bfloat16: BF16 tensors are written as float32 (exact
// widening) and therefore read back as F32. Tensors in private formats are written in their
// logical layout. Every error names the file (or the `what` given for in-memory data).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "graph/tensor.h"

namespace probelab::graph {

Tensor read_npy(const std::string& path);
void write_npy(const std::string& path, const Tensor& t);

/// In-memory forms of the same encoding. `what` names the data in error messages.
Tensor decode_npy(const std::vector<std::byte>& data, const std::string& what);
std::vector<std::byte> encode_npy(const Tensor& t);

}  // namespace probelab::graph
