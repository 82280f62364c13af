// Helpers shared by the chip-model tests: a host process, ring submission through registers,
// a small fake core executor, and running a simulation in a child process.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <systemc>

#include "chip_model/chip.h"
#include "chip_model/spec/registers.h"
#include "chip_model/spec/task.h"

namespace probelab::chip::testing {

inline sc_core::sc_time ns(double v) { return sc_core::sc_time(v, sc_core::SC_NS); }
inline std::uint64_t ps_of(const sc_core::sc_time& t) { return ChipClock::to_ps(t); }

/// Runs `body` as an SC_THREAD (spawned during elaboration).
inline void spawn(std::function<void()> body, const char* name = "host") {
  sc_core::sc_spawn(std::move(body), sc_core::sc_gen_unique_name(name));
}

template <class T>
void poke(Hbm& hbm, std::uint64_t addr, const T& v) {
  hbm.debug_write(addr, std::as_bytes(std::span(&v, 1)));
}
template <class T>
T peek(const Hbm& hbm, std::uint64_t addr) {
  T v{};
  hbm.debug_read(addr, std::as_writable_bytes(std::span(&v, 1)));
  return v;
}

/// A host driver reduced to what the tests need: zero-latency register access at the current
/// time, rings in HBM, submission by doorbell.
class TestHost {
 public:
  explicit TestHost(Chip& chip, std::uint64_t ring_base = 0x100000, std::uint32_t entries = 64)
      : chip_(chip), ring_base_(ring_base), entries_(entries) {}

  std::uint32_t rd(std::uint32_t off) { return chip_.read_reg(off, sc_core::sc_time_stamp()); }
  void wr(std::uint32_t off, std::uint32_t v) { chip_.write_reg(off, v, sc_core::sc_time_stamp()); }

  std::uint64_t ring(std::uint32_t s) const { return ring_base_ + std::uint64_t{s} * entries_ * 64; }
  void setup_stream(std::uint32_t s) {
    wr(spec::stream_reg(s, spec::kStreamRingLo), static_cast<std::uint32_t>(ring(s)));
    wr(spec::stream_reg(s, spec::kStreamRingHi), static_cast<std::uint32_t>(ring(s) >> 32));
    wr(spec::stream_reg(s, spec::kStreamRingEntries), entries_);
    tails_[s] = 0;
  }
  void submit(std::uint32_t s, const spec::TaskDescriptor& t) {
    poke(chip_.hbm(), ring(s) + std::uint64_t{tails_[s]} * 64, t);
    tails_[s] = (tails_[s] + 1) % entries_;
    wr(spec::stream_reg(s, spec::kStreamTail), tails_[s]);
  }
  std::uint32_t completed(std::uint32_t s) { return rd(spec::stream_reg(s, spec::kStreamCompleted)); }
  /// Waits until stream `s` is idle or halted.
  void wait_stream(std::uint32_t s) {
    while ((rd(spec::stream_reg(s, spec::kStreamStatus)) & (spec::kStreamIdle | spec::kStreamHalted)) == 0)
      sc_core::wait(chip_.progress_event());
  }

 private:
  Chip& chip_;
  std::uint64_t ring_base_;
  std::uint32_t entries_;
  std::uint32_t tails_[spec::kNumStreams] = {};
};

/// Arguments of the fake kernels below (in HBM at args_addr).
struct FakeKernelArgs {
  std::uint64_t in = 0, out = 0;
  std::uint32_t n = 0;        // FP32 elements
  std::uint32_t cycles = 0;   // compute cycles charged per core
};

/// Kernel 1: out[i] = in[i] + 1 (FP32), split evenly over the granted cores; results with a NaN
/// are reported to the detection circuit (kind NaN input, first element). Charges an HBM read,
/// `cycles` of compute and an HBM write; traces each core's span. Kernel 2: charges `cycles` only.
class FakeCores : public CoreExecutor {
 public:
  explicit FakeCores(const ChipServices& svc) : svc_(svc) {}
  void execute(TaskContext& ctx) override {
    FakeKernelArgs a;
    ctx.chip.hbm->read(ctx.task.args_addr, std::as_writable_bytes(std::span(&a, 1)), ctx.qk, HbmClient::Core);
    executed.push_back(ctx.task.task_id);
    cores_seen.push_back(std::vector<std::uint32_t>(ctx.cores.begin(), ctx.cores.end()));
    if (ctx.task.kernel == 2) {
      ctx.qk.inc(svc_.clock.cycles(a.cycles));
      return;
    }
    std::vector<float> v(a.n);
    ctx.chip.hbm->read(a.in, std::as_writable_bytes(std::span(v)), ctx.qk, HbmClient::Core);
    std::int64_t first_nan = -1;
    for (std::uint32_t i = 0; i < a.n; ++i) {
      if (v[i] != v[i] && first_nan < 0) first_nan = i;
      v[i] += 1.0f;
    }
    ctx.qk.inc(svc_.clock.cycles(a.cycles));
    if (first_nan >= 0) {
      DetectionEvent ev = ctx.detection_event(ctx.cores.front());
      ev.status = spec::kFsNanInput;
      auto& h = ev.kinds[spec::kExcNanInput];
      h.hit = true;
      h.count = 1;
      h.is_input = true;
      h.element = static_cast<std::uint64_t>(first_nan);
      h.cycle = ctx.cycle();
      ctx.chip.detection->report(ev);
    }
    ctx.chip.hbm->write(a.out, std::as_bytes(std::span(v)), ctx.qk, HbmClient::Core);
    if (svc_.trace->enabled())
      for (auto c : ctx.cores)
        svc_.trace->complete(svc_.rank, TaskContext::core_track(c, "vector"), "add1", "kernel",
                             ps_of(ctx.now()), 1000, {{"task", std::uint64_t{ctx.task.task_id}}});
  }
  std::vector<std::uint32_t> executed;
  std::vector<std::vector<std::uint32_t>> cores_seen;

 private:
  const ChipServices& svc_;
};

/// Owning handle to the FakeCores a Chip built, for inspection.
inline CoreFactory fake_core_factory(FakeCores** out) {
  return [out](const char*, const ChipServices& svc) {
    auto p = std::make_unique<FakeCores>(svc);
    if (out) *out = p.get();
    return p;
  };
}

inline spec::TaskDescriptor task(spec::TaskKind kind, std::uint32_t id, std::uint64_t args = 0,
                                 std::uint32_t args_size = 0) {
  spec::TaskDescriptor t;
  t.kind = kind;
  t.task_id = id;
  t.op_id = 100 + id;
  t.args_addr = args;
  t.args_size = args_size;
  return t;
}

/// Runs `fn` in a forked child (a fresh SystemC kernel); returns the child's exit status
/// (0 = fn returned normally, 3 = it threw).
inline int run_in_child(const std::function<void()>& fn) {
  const pid_t pid = fork();
  if (pid == 0) {
    try {
      fn();
    } catch (...) {
      _exit(3);
    }
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

}  // namespace probelab::chip::testing
