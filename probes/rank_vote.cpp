#include "probes/rank_vote.h"

#include <span>
#include <vector>

#include "chip_model/spec/collective_args.h"
#include "chip_model/spec/op_args.h"
#include "graph/dtype.h"

namespace probelab::probes {
namespace {

constexpr std::uint32_t kBlock = 64;
constexpr std::uint32_t kFloats = kBlock / sizeof(float);

}  // namespace

RankVote::RankVote(Device& dev, std::uint32_t stream, std::function<std::uint32_t()> next_task_id)
    : dev_(dev), stream_(stream), next_id_(std::move(next_task_id)) {
  flag_ = dev_.alloc(2 * kBlock, 64);
  spec::CollectiveArgs a;
  const std::vector<std::int64_t> shape{kFloats};
  const auto f32 = static_cast<std::uint8_t>(graph::DType::F32);
  a.input = spec::make_tensor_ref(flag_, f32, 0, shape);
  a.output = spec::make_tensor_ref(flag_ + kBlock, f32, 0, shape);
  a.count = kFloats;
  a.op = static_cast<std::uint8_t>(spec::CollectiveOp::AllReduce);
  a.reduction = static_cast<std::uint8_t>(spec::ReduceOp::Sum);
  a.algorithm = static_cast<std::uint8_t>(spec::CollectiveAlgo::Ring);
  a.acc_dtype = f32;
  a.comm_kind = static_cast<std::uint8_t>(spec::CommKindCode::World);
  args_size_ = sizeof a;
  args_ = dev_.alloc(args_size_, 64);
  dev_.dma_write(args_, std::as_bytes(std::span(&a, 1)));
}

float RankVote::sum(float mine, std::uint32_t step) {
  float flags[kFloats] = {};
  flags[0] = mine;
  dev_.dma_write(flag_, std::as_bytes(std::span(flags)));
  spec::TaskDescriptor t;
  t.task_id = next_id_();
  t.kind = spec::TaskKind::Collective;
  t.flags = 0;
  t.args_addr = args_;
  t.args_size = args_size_;
  t.step = step;
  dev_.submit(stream_, t);
  dev_.synchronize(stream_);
  float sums[kFloats] = {};
  dev_.dma_read(flag_ + kBlock, std::as_writable_bytes(std::span(sums)));
  return sums[0];
}

}  // namespace probelab::probes
