// Streams of a whole Chip with a fake core executor: order, events, breakpoints, capture tasks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "chip_model/spec/capture_math.h"
#include "chip_model/spec/irq.h"
#include "chip_model/spec/kernel_args.h"
#include "tests/chip_model/chip_test_util.h"
#include "graph/format.h"

namespace pc = probelab::chip;
namespace spec = probelab::spec;
namespace graph = probelab::graph;
using namespace probelab::chip::testing;

namespace {

constexpr std::uint64_t kArgs = 0x200000, kData = 0x400000, kOut = 0x800000;

pc::ChipConfig cfg() {
  auto c = pc::chip_preset("tiny");
  c.clock_mhz = 1000;
  c.irq_latency_ns = 500;
  return c;
}

struct Platform {
  FakeCores* cores = nullptr;
  pc::Chip chip;
  TestHost host{chip};
  std::vector<std::uint32_t> irqs;
  explicit Platform(pc::ChipConfig c = cfg()) : chip("chip", c, make_opts(&cores)) {
    chip.set_irq_callback([this](std::uint32_t p) { irqs.push_back(p); });
  }
  static pc::ChipOptions make_opts(FakeCores** out) {
    pc::ChipOptions o;
    o.make_cores = fake_core_factory(out);
    return o;
  }
  void kernel_args(std::uint64_t at, std::uint64_t in, std::uint64_t out, std::uint32_t n, std::uint32_t cycles) {
    FakeKernelArgs a{in, out, n, cycles};
    poke(chip.hbm(), at, a);
  }
  spec::TaskDescriptor kernel(std::uint32_t id, std::uint64_t args, std::uint32_t kernel_id = 1,
                              std::uint32_t core_mask = 0) {
    auto t = task(spec::TaskKind::Kernel, id, args, sizeof(FakeKernelArgs));
    t.kernel = kernel_id;
    t.core_mask = core_mask;
    return t;
  }
  std::vector<float> floats(std::uint64_t addr, std::size_t n) {
    std::vector<float> v(n);
    chip.hbm().debug_read(addr, std::as_writable_bytes(std::span(v)));
    return v;
  }
};

}  // namespace

TEST(StreamEngine, TasksRunInOrderAndCompletionIsCounted) {
  Platform p;
  std::vector<float> x{1, 2, 3, 4};
  p.chip.hbm().debug_write(kData, std::as_bytes(std::span(x)));
  p.kernel_args(kArgs, kData, kData, 4, 1000);  // in place: x += 1
  spawn([&] {
    p.host.setup_stream(0);
    for (std::uint32_t i = 1; i <= 5; ++i) {
      auto t = p.kernel(i, kArgs);
      if (i == 5) t.flags |= spec::kTaskFlagNotify;
      p.host.submit(0, t);
    }
    EXPECT_EQ(p.host.rd(spec::stream_reg(0, spec::kStreamStatus)) & spec::kStreamIdle, 0u);
    p.host.wait_stream(0);
    EXPECT_EQ(p.host.completed(0), 5u);
    EXPECT_EQ(p.host.rd(spec::stream_reg(0, spec::kStreamHead)), 5u);
    EXPECT_TRUE(p.chip.streams().all_idle());
    // 5 tasks x (1000 cycles of compute + HBM + dispatch): at least 5 us.
    EXPECT_GE(sc_core::sc_time_stamp(), ns(5000));
  });
  sc_core::sc_start();
  EXPECT_EQ(p.cores->executed, (std::vector<std::uint32_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(p.floats(kData, 4), (std::vector<float>{6, 7, 8, 9}));
  for (const auto& c : p.cores->cores_seen) EXPECT_EQ(c, (std::vector<std::uint32_t>{0, 1}));  // mask 0 = all
  ASSERT_EQ(p.irqs.size(), 1u);
  EXPECT_EQ(p.irqs[0], spec::kIrqStreamDone);
}

TEST(StreamEngine, EventWaitOrdersAcrossStreams) {
  Platform p;
  p.kernel_args(kArgs, kData, kData, 0, 20000);        // long kernel on core 0
  p.kernel_args(kArgs + 64, kData, kData, 0, 10);      // short kernel on core 1
  spawn([&] {
    p.host.setup_stream(0);
    p.host.setup_stream(1);
    // stream 1: wait(7), short kernel B (core 1); stream 0: long kernel A (core 0), record(7)
    auto wait7 = task(spec::TaskKind::EventWait, 10);
    wait7.event_id = 7;
    p.host.submit(1, wait7);
    p.host.submit(1, p.kernel(11, kArgs + 64, 2, 0b10));
    p.host.submit(0, p.kernel(20, kArgs, 2, 0b01));
    auto rec7 = task(spec::TaskKind::EventRecord, 21);
    rec7.event_id = 7;
    p.host.submit(0, rec7);
    p.host.wait_stream(0);
    p.host.wait_stream(1);
  });
  sc_core::sc_start();
  EXPECT_EQ(p.cores->executed, (std::vector<std::uint32_t>{20, 11}));
  EXPECT_EQ(p.chip.streams().event_count(7), 0u) << "the wait consumed the record";
  EXPECT_GE(sc_core::sc_time_stamp(), ns(20000));
}

TEST(StreamEngine, WithoutEventsStreamsRunConcurrently) {
  Platform p;
  p.kernel_args(kArgs, kData, kData, 0, 20000);
  p.kernel_args(kArgs + 64, kData, kData, 0, 10);
  std::uint64_t done1_ps = 0;
  spawn([&] {
    p.host.setup_stream(0);
    p.host.setup_stream(1);
    p.host.submit(0, p.kernel(20, kArgs, 2, 0b01));
    p.host.submit(1, p.kernel(11, kArgs + 64, 2, 0b10));
    p.host.wait_stream(1);
    done1_ps = ps_of(sc_core::sc_time_stamp());
    p.host.wait_stream(0);
  });
  sc_core::sc_start();
  EXPECT_LT(done1_ps, 5'000'000u);  // the short kernel did not wait for the 20 us one
  EXPECT_EQ(p.cores->executed.size(), 2u);
}

TEST(StreamEngine, BreakpointHaltsAtTaskBoundaryAndResumes) {
  Platform p;
  std::vector<float> x{1, std::numeric_limits<float>::quiet_NaN(), 3};
  p.chip.hbm().debug_write(kData, std::as_bytes(std::span(x)));
  p.kernel_args(kArgs, kData, kOut, 3, 100);
  // Breakpoint: halt if an exception was latched for the op of task 1 (op id 101).
  spec::BreakpointArgs bp;
  bp.halt_on_exception = 1;
  poke(p.chip.hbm(), kArgs + 256, bp);
  std::uint32_t halted_after = 0, status_when_halted = 0;
  spawn([&] {
    p.host.setup_stream(0);
    p.host.submit(0, p.kernel(1, kArgs));
    auto b = task(spec::TaskKind::Breakpoint, 2, kArgs + 256, sizeof bp);
    b.op_id = 101;
    p.host.submit(0, b);
    p.host.submit(0, p.kernel(3, kArgs));
    p.host.wait_stream(0);
    status_when_halted = p.host.rd(spec::stream_reg(0, spec::kStreamStatus));
    halted_after = p.host.rd(spec::stream_reg(0, spec::kStreamHaltTask));
    EXPECT_EQ(p.host.completed(0), 2u);
    EXPECT_EQ(p.cores->executed, (std::vector<std::uint32_t>{1}));
    sc_core::wait(ns(10000));  // stays halted
    EXPECT_EQ(p.cores->executed.size(), 1u);
    EXPECT_EQ(p.host.rd(spec::exc_latch_reg(spec::kExcNanInput, spec::kExcLatchOpId)), 101u);
    EXPECT_EQ(p.host.rd(spec::exc_latch_reg(spec::kExcNanInput, spec::kExcLatchElemLo)), 1u);
    p.host.wr(spec::stream_reg(0, spec::kStreamResume), 1);
    p.host.wait_stream(0);
    EXPECT_EQ(p.host.completed(0), 3u);
  });
  sc_core::sc_start();
  EXPECT_EQ(status_when_halted & spec::kStreamHalted, spec::kStreamHalted);
  EXPECT_EQ(halted_after, 2u);
  EXPECT_EQ(p.cores->executed, (std::vector<std::uint32_t>{1, 3}));
  std::uint32_t all = 0;
  for (auto l : p.irqs) all |= l;
  EXPECT_EQ(all & (spec::kIrqBreakpoint | spec::kIrqException), spec::kIrqBreakpoint | spec::kIrqException);
}

TEST(StreamEngine, BreakpointPredicateOnStatistics) {
  Platform p;
  std::vector<float> x{1, 2, std::numeric_limits<float>::infinity(), 70000};
  p.chip.hbm().debug_write(kData, std::as_bytes(std::span(x)));
  auto make_bp = [&](double threshold) {
    spec::BreakpointArgs bp;
    bp.tensor.addr = kData;
    bp.tensor.dtype = static_cast<std::uint8_t>(graph::DType::F32);
    bp.tensor.rank = 1;
    bp.tensor.dims[0] = 4;
    bp.num_clauses = 2;
    // finite_max_abs: the tensor also holds an Inf, which makes max_abs infinite
    bp.clauses[0] = {static_cast<std::uint8_t>(spec::StatField::FiniteMaxAbs), static_cast<std::uint8_t>(spec::CmpOp::Gt), {}, threshold};
    bp.clauses[1] = {static_cast<std::uint8_t>(spec::StatField::InfCount), static_cast<std::uint8_t>(spec::CmpOp::Ge), {}, 1};
    return bp;
  };
  poke(p.chip.hbm(), kArgs, make_bp(1e6));    // max_abs 70000 > 1e6 fails: no halt
  poke(p.chip.hbm(), kArgs + 256, make_bp(65504));  // holds: halt
  spawn([&] {
    p.host.setup_stream(3);
    p.host.submit(3, task(spec::TaskKind::Breakpoint, 1, kArgs, sizeof(spec::BreakpointArgs)));
    p.host.submit(3, task(spec::TaskKind::Breakpoint, 2, kArgs + 256, sizeof(spec::BreakpointArgs)));
    p.host.submit(3, task(spec::TaskKind::Barrier, 3));
    p.host.wait_stream(3);
    EXPECT_EQ(p.host.rd(spec::stream_reg(3, spec::kStreamHaltTask)), 2u);
    EXPECT_EQ(p.host.completed(3), 2u);
    p.host.wr(spec::stream_reg(3, spec::kStreamResume), 1);
    p.host.wait_stream(3);
    EXPECT_EQ(p.host.completed(3), 3u);
  });
  sc_core::sc_start();
}

TEST(StreamEngine, CaptureTasksConvertNc1hwc0AndWriteRecords) {
  Platform p;
  // Logical FP16 [1, 20, 2, 3] stored as NC1HWC0 (C1 = 2, channels 20..31 padding).
  const graph::Shape shape{1, 20, 2, 3};
  std::vector<float> vals(120);
  for (std::size_t i = 0; i < vals.size(); ++i) vals[i] = static_cast<float>(i) * 0.5f - 20.0f;
  vals[7] = std::numeric_limits<float>::quiet_NaN();
  const graph::Tensor logical = graph::Tensor::from_f32(shape, vals, graph::DType::F16);
  const graph::Tensor phys = graph::convert_format(logical, graph::Format::NC1HWC0);
  p.chip.hbm().debug_write(kData, phys.bytes());
  spec::CaptureArgs ca;
  ca.tensor.addr = kData;
  ca.tensor.dtype = static_cast<std::uint8_t>(graph::DType::F16);
  ca.tensor.format = static_cast<std::uint8_t>(graph::Format::NC1HWC0);
  ca.tensor.rank = 4;
  for (int i = 0; i < 4; ++i) ca.tensor.dims[i] = shape[i];
  ca.output_index = 1;
  for (std::uint16_t k = 1; k <= 3; ++k) {
    ca.payload = k;  // Statistics, FullTensor, Hash
    poke(p.chip.hbm(), kArgs + 256 * k, ca);
  }
  constexpr std::uint64_t kCapBuf = 0x1000000;
  spawn([&] {
    p.host.wr(spec::kRegCapBuf0Lo, static_cast<std::uint32_t>(kCapBuf));
    p.host.wr(spec::kRegCapBufSize, 65536);
    p.host.wr(spec::kRegCapCtrl, spec::kCapEnable);
    p.host.wr(spec::kRegStep, 4);
    p.host.setup_stream(2);
    for (std::uint32_t k = 1; k <= 3; ++k) {
      auto t = task(spec::TaskKind::Capture, k, kArgs + 256 * k, sizeof ca);
      t.step = 4;
      p.host.submit(2, t);
    }
    p.host.wait_stream(2);
    p.host.wr(spec::kRegCapFlush, 1);
  });
  sc_core::sc_start();
  ASSERT_EQ(p.chip.read_reg(spec::kRegCapReady, sc_core::sc_time_stamp()), 1u);
  const std::uint32_t bytes = p.chip.read_reg(spec::kRegCapReadyBytes0, sc_core::sc_time_stamp());
  std::vector<std::byte> buf(bytes);
  p.chip.hbm().debug_read(kCapBuf, buf);
  const auto logical_bytes = logical.bytes();
  std::uint32_t off = 0;
  for (std::uint16_t k = 1; k <= 3; ++k) {
    ASSERT_LT(off, bytes);
    spec::CaptureRecordHeader h;
    std::memcpy(&h, buf.data() + off, sizeof h);
    const auto payload = std::span(buf).subspan(off + sizeof h, h.payload_bytes);
    EXPECT_EQ(h.magic, spec::kCaptureMagic);
    EXPECT_EQ(h.seq, k - 1u);
    EXPECT_EQ(h.task_id, k);
    EXPECT_EQ(h.op_id, 100u + k);
    EXPECT_EQ(h.step, 4u);
    EXPECT_EQ(h.output_index, 1u);
    EXPECT_EQ(h.format, static_cast<std::uint8_t>(graph::Format::NCHW));
    EXPECT_EQ(h.rank_dims, 4u);
    EXPECT_EQ(h.dims[1], 20);
    EXPECT_EQ(h.checksum, pc::crc32(payload));
    EXPECT_GT(h.cycle, 0u);
    if (k == 1) {
      spec::CaptureStats s;
      ASSERT_EQ(payload.size(), sizeof s);
      std::memcpy(&s, payload.data(), sizeof s);
      const auto ref = spec::compute_stats(logical_bytes, ca.tensor.dtype, 120);
      EXPECT_EQ(s.nan_count, 1u);
      EXPECT_EQ(s.count, 120u);
      EXPECT_EQ(s.finite_mean, ref.finite_mean);
      EXPECT_TRUE(std::isnan(s.std));  // numpy semantics: the NaN makes the moments NaN
      EXPECT_EQ(s.finite_min, -20.0);
      EXPECT_EQ(s.finite_max, 39.5);
    } else if (k == 2) {
      ASSERT_EQ(payload.size(), logical_bytes.size());
      EXPECT_TRUE(std::equal(payload.begin(), payload.end(), logical_bytes.begin()));
    } else {
      std::uint64_t d;
      ASSERT_EQ(payload.size(), sizeof d);
      std::memcpy(&d, payload.data(), sizeof d);
      EXPECT_EQ(d, spec::xxh64(logical_bytes));
    }
    off += h.record_bytes;
  }
  EXPECT_EQ(off, bytes);
}

TEST(StreamEngine, KernelWithoutExecutorFailsWithAnError) {
  pc::Chip chip("chip", cfg());
  TestHost host(chip);
  spawn([&] {
    host.setup_stream(0);
    host.submit(0, task(spec::TaskKind::Kernel, 1));
  });
  try {
    sc_core::sc_start();  // the task's error stops the run; the chip holds it
    if (chip.error()) std::rethrow_exception(chip.error());
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("no core executor"), std::string::npos) << e.what();
  }
}
