// Host-side statistics and digests of tensors, with exactly the definitions the capture unit
// uses (spec::CaptureStats, CapturePayload::Hash), so host-computed and device-computed values
// agree for full captures and breakpoint dumps.
#pragma once

#include <cstdint>
#include <span>

#include "chip_model/spec/capture_record.h"
#include "graph/tensor.h"

namespace probelab::probes {

/// Statistics over the logical elements in row-major order with FP64 accumulation. NaN and Inf
/// elements are excluded from min/max/mean/abs_mean/std/l2/max_abs and counted instead; zero_count
/// counts +-0. std is the population standard deviation. For a tensor with no finite element all
/// moments are 0. count is the number of elements.
spec::CaptureStats compute_stats(const graph::Tensor& t);
spec::CaptureStats compute_stats(std::span<const double> values);

/// XXH64 (seed 0) of bytes: the digest of CapturePayload::Hash (over the raw element bytes in
/// the logical layout).
std::uint64_t xxh64(std::span<const std::byte> bytes, std::uint64_t seed = 0);

}  // namespace probelab::probes
