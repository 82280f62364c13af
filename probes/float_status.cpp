#include "probes/float_status.h"

#include <span>

#include "chip_model/spec/op_args.h"

namespace probelab::probes {
namespace {

constexpr std::uint32_t kRecord = sizeof(spec::FloatStatusBuffer);

}  // namespace

FloatStatusClient::FloatStatusClient(Device& dev, FloatStatusOptions opt, std::function<std::uint32_t()> next_task_id)
    : dev_(dev), opt_(opt), next_id_(std::move(next_task_id)) {
  buf_ = dev_.alloc(2 * kRecord, 64);
  if (opt_.all_reduce) vote_ = std::make_unique<RankVote>(dev_, opt_.stream, next_id_);
}

void FloatStatusClient::submit(spec::TaskKind kind, std::uint32_t step, std::uint64_t args, std::uint32_t size) {
  spec::TaskDescriptor t;
  t.task_id = next_id_();
  t.kind = kind;
  t.flags = 0;
  t.args_addr = args;
  t.args_size = size;
  t.step = step;
  dev_.submit(opt_.stream, t);
}

void FloatStatusClient::reset(std::uint32_t step) {
  if (opt_.guard) submit(spec::TaskKind::FloatStatusGet, step, buf_, kRecord);
  submit(spec::TaskKind::FloatStatusReset, step, 0, 0);
  ++resets_issued_;
}

FloatStatusRead FloatStatusClient::get(std::uint32_t step) {
  submit(spec::TaskKind::FloatStatusGet, step, buf_ + kRecord, kRecord);
  dev_.synchronize(opt_.stream);
  spec::FloatStatusBuffer rec[2];
  dev_.dma_read(buf_, std::as_writable_bytes(std::span(rec)));
  FloatStatusRead r;
  r.local = rec[1];
  r.local_overflow = rec[1].overflow != 0;
  if (opt_.guard && resets_issued_ > 0) {
    // rec[0] was written right before the client's own reset: one reset is the client's.
    const std::uint32_t resets = rec[1].resets - rec[0].resets;
    r.foreign_resets = resets > 0 ? resets - 1 : 0;
    r.events = rec[1].events - rec[0].events;
    if (!r.local_overflow && r.events > 0) {
      r.local_overflow = true;
      r.recovered = true;
    }
  }
  r.found_inf = r.local_overflow;
  if (vote_) {
    r.reduced = true;
    r.ranks_overflowing = vote_->sum(r.local_overflow ? 1.0f : 0.0f, step);
    r.found_inf = r.ranks_overflowing > 0.0f;
  }
  return r;
}

}  // namespace probelab::probes
