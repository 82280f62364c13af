// Gradient buckets: the data-parallel gradient all-reduce of several parameters as one collective,
// as PyTorch DDP (bucket_cap_mb) and Horovod / HCCL's tensor fusion run it.
//
// Gradients are taken in the order the backward pass produces them (the last layer's first) and
// packed greedily into buckets of at most `cap_bytes` (a gradient larger than the cap is a bucket of
// its own). A bucket of several gradients (numbered from 0 in backward order) becomes
//   <grad>/flat          Reshape to 1-D, per gradient
//   gradient_bucket<i>/concat     Concat of the flat gradients  -> "gradient_bucket<i>"
//   gradient_bucket<i>/allreduce  AllReduce with the job's attributes -> "gradient_bucket<i>/reduced"
//   gradient_bucket<i>/split      Split back into the members   -> "<grad>/reduced/flat"
//   <grad>/reduced/shape Reshape to the gradient's shape       -> "<grad>/reduced"
// so that probes and expectations keep naming "<param>/gradient/reduced"; a bucket of one gradient
// is the per-parameter "<grad>/allreduce". The ring, tree and direct algorithms then cut the bucket,
// not each gradient, into chunks: 2(R-1) ring messages per bucket instead of per parameter, and a
// different reduction order per element than per-parameter all-reduces (a different job).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"

namespace probelab::sim {

struct GradientBuckets {
  std::vector<std::pair<std::string, std::string>> reduced;  // parameter -> reduced gradient
  std::vector<std::string> collectives;                      // the AllReduce ops, bucket by bucket
};

/// Adds the all-reduce of `grads` (parameter, gradient; every gradient a tensor of `g`) in buckets of
/// at most `cap_bytes` (elements of `elem_bytes` each) with AllReduce attributes `attrs`, in backward
/// direction and scope "allreduce/...".
GradientBuckets add_gradient_buckets(graph::Graph& g, const std::vector<std::pair<std::string, std::string>>& grads,
                                     std::int64_t cap_bytes, std::int64_t elem_bytes, const graph::Attrs& attrs);

}  // namespace probelab::sim
