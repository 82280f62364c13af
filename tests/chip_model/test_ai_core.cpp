// AI core inside a Chip: Kernel tasks from a stream ring, values in HBM, detection latch with the
// offending element and tile cycle, op records, trace tracks. One design per TEST.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include <map>
#include <sstream>

#include "numerics/gemm.h"
#include "chip_model/spec/irq.h"
#include "tests/chip_model/ai_core_test_util.h"
#include "tests/chip_model/kernel_test_util.h"

namespace pc = probelab::chip;
namespace pg = probelab::graph;
namespace ps = probelab::spec;
namespace num = probelab::num;
using namespace probelab::chip::testing;

namespace {

pc::ChipConfig cfg() {
  auto c = pc::chip_preset("tiny_coupled");
  c.clock_mhz = 1000;
  return c;
}

}  // namespace

TEST(AiCore, MatMulTaskComputesBitExactAndRecordsCycles) {
  pc::Trace trace(true);
  AiCoreChip p(cfg(), &trace);
  auto& chip = p.chip;
  auto& host = p.host;
  HbmPlacer hbm(chip.hbm(), 0x1000000);
  const std::int64_t M = 64, K = 96, N = 80;
  const pg::Tensor a = random_f16({M, K}, 1), b = random_f16({K, N}, 2);
  const auto out = hbm.out(pg::DType::F16, {M, N});
  const auto args = hbm.kernel(1, op_args("MatMul", {hbm.put(a), hbm.put(b)}, {out}));
  spawn([&] {
    host.setup_stream(0);
    host.submit(0, args);
    host.wait_stream(0);
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  ASSERT_NE(p.core, nullptr);
  const pc::AiCore* core = p.core;
  std::vector<std::uint16_t> expect(static_cast<std::size_t>(M * N));
  num::gemm(M, N, K, reinterpret_cast<const num::f16*>(a.data<std::uint16_t>().data()),
            reinterpret_cast<const num::f16*>(b.data<std::uint16_t>().data()), reinterpret_cast<num::f16*>(expect.data()));
  const pg::Tensor y = hbm.get(out);
  for (std::size_t i = 0; i < expect.size(); ++i) ASSERT_EQ(y.data<std::uint16_t>()[i], expect[i]) << i;

  ASSERT_EQ(core->records().size(), 1u);
  const pc::OpRecord& r = core->records()[0];
  EXPECT_EQ(r.op_type, "MatMul");
  EXPECT_EQ(r.task_id, 1u);
  EXPECT_EQ(r.flops, static_cast<std::uint64_t>(2 * M * N * K));
  EXPECT_EQ(r.cores, 2u);
  // Cube busy cycles: exactly the 16x16x16 steps of the tiles (M, N, K multiples of 16).
  EXPECT_EQ(r.cube_cycles, static_cast<std::uint64_t>((M / 16) * (N / 16) * (K / 16)));
  EXPECT_GT(r.cycles, r.cube_cycles / 2);
  EXPECT_EQ(r.hbm_write_bytes, static_cast<std::uint64_t>(M * N * 2));
  EXPECT_GE(r.hbm_read_bytes, static_cast<std::uint64_t>((M * K + K * N) * 2));
  const std::string json = trace.to_json_string();
  EXPECT_NE(json.find("core0.cube"), std::string::npos);
  EXPECT_NE(json.find("core1.mte"), std::string::npos);
}

TEST(AiCore, WithoutKeptRecordsTheSinkStillSeesEveryOpInCompletionOrder) {
  pc::AiCoreOptions opts;
  opts.keep_records = false;
  AiCoreChip p(cfg(), nullptr, opts);
  std::vector<pc::OpRecord> seen;
  p.core->set_record_sink([&seen](const pc::OpRecord& r) { seen.push_back(r); });
  std::vector<pc::StreamEngine::TaskRecord> tasks;
  p.chip.streams().set_task_sink([&tasks](const pc::StreamEngine::TaskRecord& t) { tasks.push_back(t); });
  HbmPlacer hbm(p.chip.hbm(), 0x1000000);
  const pg::Tensor a = random_f16({32, 48}, 1), b = random_f16({48, 16}, 2);
  const auto out1 = hbm.out(pg::DType::F16, {32, 16}), out2 = hbm.out(pg::DType::F16, {32, 16});
  const auto first = hbm.kernel(1, op_args("MatMul", {hbm.put(a), hbm.put(b)}, {out1}));
  const auto second = hbm.kernel(2, op_args("Relu", {out1}, {out2}));
  spawn([&] {
    p.host.setup_stream(0);
    p.host.submit(0, first);
    p.host.submit(0, second);
    p.host.wait_stream(0);
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  EXPECT_TRUE(p.core->records().empty());
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].op_type, "MatMul");
  EXPECT_EQ(seen[1].op_type, "Relu");
  EXPECT_LE(seen[0].end_cycle, seen[1].start_cycle);
  EXPECT_EQ(seen[0].cycles, seen[0].end_cycle - seen[0].start_cycle);
  // One task record per task, kernels among them, none kept by the engine.
  std::size_t kernels = 0;
  for (const auto& t : tasks) kernels += t.kind == ps::TaskKind::Kernel;
  EXPECT_EQ(kernels, 2u);
}

TEST(AiCore, NanInputLatchesElementAndRaisesInterrupt) {
  AiCoreChip p(cfg());
  auto& chip = p.chip;
  auto& host = p.host;
  HbmPlacer hbm(chip.hbm(), 0x1000000);
  pg::Tensor x = random_f16({4, 1000}, 3);
  set_bits(x, 2345, 0x7E00);
  set_bits(x, 3000, 0x7E00);
  const auto out = hbm.out(pg::DType::F16, {4, 1000});
  const auto args = hbm.kernel(7, op_args("Relu", {hbm.put(x)}, {out}));
  std::uint32_t irq_lines = 0;
  chip.set_irq_callback([&](std::uint32_t lines) { irq_lines |= lines; });
  std::uint64_t end_cycle = 0;
  spawn([&] {
    host.setup_stream(0);
    auto t = args;
    t.step = 3;
    host.submit(0, t);
    host.wait_stream(0);
    end_cycle = chip.cycle_now();
    sc_core::wait(sc_core::sc_time(10, sc_core::SC_US));
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  const pc::DetectionCircuit& det = chip.detection();
  ASSERT_TRUE(det.latched(ps::kExcNanInput));
  const auto& l = det.latch(ps::kExcNanInput);
  EXPECT_EQ(l.hit.element, 2345u);
  EXPECT_EQ(l.hit.slot, 0u);
  EXPECT_TRUE(l.hit.is_input);
  EXPECT_TRUE(std::isnan(std::bit_cast<float>(l.hit.value_bits)));
  EXPECT_EQ(l.task_id, 7u);
  EXPECT_EQ(l.op_id, 107u);
  EXPECT_LE(l.hit.cycle, end_cycle);
  EXPECT_FALSE(det.latched(ps::kExcInvalid));
  EXPECT_TRUE(det.float_status() & ps::kFsNanInput);
  EXPECT_FALSE(det.float_status() & ps::kFsInvalid);  // NaN outputs are propagated, not produced
  EXPECT_TRUE(irq_lines & ps::kIrqException);
  EXPECT_EQ(det.counter(ps::kExcNanInput), 2u);
  EXPECT_EQ(p.core->records().at(0).step, 3u);
}

TEST(AiCore, OverflowCycleIsTheCompletionOfTheOffendingTile) {
  auto c = cfg();
  c.fp_mode = "saturation";
  AiCoreChip p(c);
  auto& chip = p.chip;
  auto& host = p.host;
  HbmPlacer hbm(chip.hbm(), 0x1000000);
  // 512 x 512 output: several tiles per core; only the last row overflows.
  const std::int64_t M = 512, K = 32, N = 512;
  std::vector<float> av(static_cast<std::size_t>(M * K), 0.01f);
  for (std::int64_t k = 0; k < K; ++k) av[static_cast<std::size_t>((M - 1) * K + k)] = 100.0f;
  const pg::Tensor a = pg::Tensor::from_f32({M, K}, av, pg::DType::F16);
  const pg::Tensor b = pg::Tensor::from_f32({K, N}, std::vector<float>(static_cast<std::size_t>(K * N), 30.0f),
                                            pg::DType::F16);
  const auto out = hbm.out(pg::DType::F16, {M, N});
  const auto args = hbm.kernel(1, op_args("MatMul", {hbm.put(a), hbm.put(b)}, {out}));
  spawn([&] {
    host.setup_stream(0);
    host.submit(0, args);
    host.wait_stream(0);
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  const pc::DetectionCircuit& det = chip.detection();
  ASSERT_TRUE(det.latched(ps::kExcOverflow));
  const auto& l = det.latch(ps::kExcOverflow);
  EXPECT_EQ(l.hit.element, static_cast<std::uint64_t>((M - 1) * N));
  // FP32 accumulation: the result overflows only on its conversion to FP16 (value 96000 latched).
  EXPECT_EQ(l.hit.detail & (ps::kExcDetailConversion | ps::kExcDetailAccFp16), ps::kExcDetailConversion);
  EXPECT_FLOAT_EQ(std::bit_cast<float>(l.hit.value_bits), 96000.0f);
  const pc::OpRecord& r = p.core->records().at(0);
  // The last tile row finishes late in the op, well after its start.
  EXPECT_GT(l.hit.cycle, r.start_cycle + r.cycles / 2);
  EXPECT_LE(l.hit.cycle, r.end_cycle);
  // Saturation: 100 * 30 * 32 = 96000 delivered as 65504.
  EXPECT_EQ(hbm.get(out).data<std::uint16_t>()[static_cast<std::size_t>((M - 1) * N)], num::kF16Max.bits);
}

TEST(AiCore, BadArgsBlockFailsTheSimulationWithAClearError) {
  const int status = run_in_child([] {
    AiCoreChip p(cfg());
    std::vector<std::byte> junk(64, std::byte{0x11});
    p.chip.hbm().debug_write(0x2000000, junk);
    auto t = task(ps::TaskKind::Kernel, 1, 0x2000000, 64);
    spawn([&] {
      p.host.setup_stream(0);
      p.host.submit(0, t);
      p.host.wait_stream(0);
    });
    try {
      sc_core::sc_start();  // a task's error stops the run; the chip holds it
      if (p.chip.error()) std::rethrow_exception(p.chip.error());
    } catch (const std::exception& e) {
      if (std::string(e.what()).find("bad magic") != std::string::npos) throw;
      _exit(4);
    }
  });
  EXPECT_EQ(status, 3);  // threw, with the decoder's message
}

// The core keeps what it decoded per args block: the same block again runs the same op; a block
// rewritten in place (another op, or one flipped bit) is decoded again; a block that stops decoding
// still fails with the decoder's message.
TEST(AiCore, ArgsBlockRewrittenInPlaceIsDecodedAgain) {
  const int status = run_in_child([] {
    AiCoreChip p(cfg());
    HbmPlacer hbm(p.chip.hbm(), 0x1000000);
    const pg::Tensor x = random_f16({4, 64}, 11);
    const auto in = hbm.put(x);
    const auto out_relu = hbm.out(pg::DType::F16, {4, 64}), out_neg = hbm.out(pg::DType::F16, {4, 64});
    const std::uint64_t addr = hbm.alloc(4096);
    auto write = [&](const ps::OpArgs& a) {
      const auto bytes = ps::encode_op_args(a);
      p.chip.hbm().debug_write(addr, bytes);
      auto t = task(ps::TaskKind::Kernel, 1, addr, static_cast<std::uint32_t>(bytes.size()));
      t.kernel = ps::kKernelOpArgs;
      return t;
    };
    const ps::TaskDescriptor relu = write(op_args("Relu", {in}, {out_relu}));
    std::vector<std::string> order;
    spawn([&] {
      p.host.setup_stream(0);
      p.host.submit(0, relu);
      p.host.submit(0, relu);
      p.host.wait_stream(0);
      const ps::TaskDescriptor neg = write(op_args("Neg", {in}, {out_neg}));
      p.host.submit(0, neg);
      p.host.wait_stream(0);
      // One flipped bit in the op type's first letter (offset 16, after the 12-byte header and
      // the string's length): "Neg" -> "Oeg", decoded again, and refused.
      std::vector<std::byte> b(1);
      p.chip.hbm().debug_read(addr + 16, b);
      b[0] ^= std::byte{0x01};
      p.chip.hbm().debug_write(addr + 16, b);
      p.host.submit(0, neg);
      p.host.wait_stream(0);
    });
    try {
      sc_core::sc_start();  // a task's error stops the run; the chip holds it
      if (p.chip.error()) std::rethrow_exception(p.chip.error());
    } catch (const std::exception& e) {
      const std::string what = e.what();
      for (const auto& r : p.core->records()) order.push_back(r.op_type);
      const pg::Tensor relu_y = hbm.get(out_relu), neg_y = hbm.get(out_neg);
      for (std::int64_t i = 0; i < 4 * 64; ++i) {
        const std::uint16_t v = x.data<std::uint16_t>()[static_cast<std::size_t>(i)];
        const bool negative = (v & 0x8000) != 0 && (v & 0x7FFF) != 0;
        if (relu_y.data<std::uint16_t>()[static_cast<std::size_t>(i)] != (negative ? 0 : v)) _exit(5);
        if (neg_y.data<std::uint16_t>()[static_cast<std::size_t>(i)] != static_cast<std::uint16_t>(v ^ 0x8000)) _exit(6);
      }
      if (order != std::vector<std::string>{"Relu", "Relu", "Neg"}) _exit(7);
      if (what.find("Oeg") == std::string::npos) _exit(8);
      throw;
    }
    _exit(9);  // the flipped block ran
  });
  EXPECT_EQ(status, 3);  // the three ops ran as written, then the flipped block failed by name
}

// Args blocks at six addresses, submitted out of address order and again: every task runs the
// op its own block describes (the core's prepared ops are found by address, in whatever order
// they were first seen).
TEST(AiCore, ArgsBlocksAtManyAddressesRunTheirOwnOps) {
  const int status = run_in_child([] {
    AiCoreChip p(cfg());
    HbmPlacer hbm(p.chip.hbm(), 0x1000000);
    const pg::Tensor x = random_f16({4, 64}, 12);
    const auto in = hbm.put(x);
    std::vector<ps::TaskDescriptor> tasks;
    std::vector<ps::TensorRef> outs;
    for (std::uint32_t i = 0; i < 6; ++i) {
      outs.push_back(hbm.out(pg::DType::F16, {4, 64}));
      tasks.push_back(hbm.kernel(i + 1, op_args(i % 2 ? "Neg" : "Relu", {in}, {outs.back()})));
    }
    const std::vector<std::size_t> order = {4, 1, 5, 0, 3, 2, 2, 5, 0, 4, 1, 3};
    spawn([&] {
      p.host.setup_stream(0);
      for (std::size_t i : order) p.host.submit(0, tasks[i]);
      p.host.wait_stream(0);
    });
    sc_core::sc_start();
    if (p.chip.error()) _exit(4);
    const auto& recs = p.core->records();
    if (recs.size() != order.size()) _exit(5);
    for (std::size_t k = 0; k < order.size(); ++k)
      if (recs[k].op_type != (order[k] % 2 ? "Neg" : "Relu")) _exit(6);
    for (std::size_t i = 0; i < outs.size(); ++i) {
      const pg::Tensor y = hbm.get(outs[i]);
      for (std::int64_t e = 0; e < 4 * 64; ++e) {
        const std::uint16_t v = x.data<std::uint16_t>()[static_cast<std::size_t>(e)];
        const bool negative = (v & 0x8000) != 0 && (v & 0x7FFF) != 0;
        const std::uint16_t want = i % 2 ? static_cast<std::uint16_t>(v ^ 0x8000) : (negative ? 0 : v);
        if (y.data<std::uint16_t>()[static_cast<std::size_t>(e)] != want) _exit(7);
      }
    }
  });
  EXPECT_EQ(status, 0);
}

TEST(AiCore, ConcurrentOpsContendForHbmBandwidth) {
  auto c = cfg();
  c.mte_bytes_per_cycle = 256;  // one core alone can saturate the 200 GB/s HBM
  AiCoreChip p(c);
  HbmPlacer hbm(p.chip.hbm(), 0x1000000);
  // Skinny GEMMs: 4 MiB of weights each, bandwidth-bound.
  const pg::Tensor a = random_f16({16, 1024}, 5), b = random_f16({1024, 2048}, 6);
  const auto ra = hbm.put(a), rb = hbm.put(b), rb2 = hbm.put(b);
  auto on_core = [&](std::uint32_t id, const ps::TensorRef& w, std::uint32_t mask) {
    auto t = hbm.kernel(id, op_args("MatMul", {ra, w}, {hbm.out(pg::DType::F16, {16, 2048})}));
    t.core_mask = mask;
    return t;
  };
  const auto alone = on_core(1, rb, 1), first = on_core(2, rb, 1), second = on_core(3, rb2, 2);
  spawn([&] {
    p.host.setup_stream(0);
    p.host.setup_stream(1);
    p.host.submit(0, alone);
    p.host.wait_stream(0);
    p.host.submit(0, first);
    p.host.submit(1, second);
    p.host.wait_stream(0);
    p.host.wait_stream(1);
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  std::map<std::uint32_t, pc::OpRecord> rec;
  for (const auto& r : p.core->records()) rec[r.task_id] = r;
  ASSERT_EQ(rec.size(), 3u);
  EXPECT_EQ(rec[1].cores, 1u);
  const double t1 = static_cast<double>(rec[1].cycles);
  EXPECT_NEAR(t1, 4.0 * 1024 * 1024 / 200.0, 0.1 * t1);  // bytes / (200 B/cycle)
  EXPECT_GT(static_cast<double>(rec[2].cycles), 1.7 * t1);
  EXPECT_GT(static_cast<double>(rec[3].cycles), 1.7 * t1);
  EXPECT_LT(rec[3].start_cycle, rec[2].end_cycle);  // they really overlapped
}

TEST(AiCore, VerboseTraceHasOneSpanPerTileStep) {
  pc::Trace trace(true);
  pc::AiCoreOptions opts;
  opts.verbose_trace = true;
  AiCoreChip p(cfg(), &trace, opts);
  HbmPlacer hbm(p.chip.hbm(), 0x1000000);
  const pg::Tensor a = random_f16({256, 256}, 7), b = random_f16({256, 256}, 8);
  const auto t = hbm.kernel(1, op_args("MatMul", {hbm.put(a), hbm.put(b)}, {hbm.out(pg::DType::F16, {256, 256})}));
  spawn([&] {
    p.host.setup_stream(0);
    p.host.submit(0, t);
    p.host.wait_stream(0);
    sc_core::sc_stop();
  });
  sc_core::sc_start();
  const std::string json = trace.to_json_string();
  auto count = [&](const std::string& needle) {
    std::size_t n = 0;
    for (std::size_t pos = json.find(needle); pos != std::string::npos; pos = json.find(needle, pos + 1)) ++n;
    return n;
  };
  const pc::OpRecord& r = p.core->records().at(0);
  EXPECT_GE(count("\"compute\""), r.tiles);  // at least one compute span per tile
  EXPECT_EQ(count("\"store\""), r.tiles);    // exactly one store per tile
  EXPECT_GE(count("\"load\""), r.tiles);
}
