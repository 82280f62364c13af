// The Chip's host-facing surface: bus address map, global registers, fault hooks, determinism.
#include <gtest/gtest.h>

#include <tlm_utils/simple_initiator_socket.h>

#include <fstream>
#include <sstream>

#include "chip_model/spec/irq.h"
#include "chip_model/spec/kernel_args.h"
#include "tests/chip_model/chip_test_util.h"

namespace pc = probelab::chip;
namespace spec = probelab::spec;
using namespace probelab::chip::testing;

namespace {

pc::ChipConfig cfg() {
  auto c = pc::chip_preset("tiny");
  c.clock_mhz = 1000;
  c.mmio_latency_ns = 40;
  return c;
}

struct Bus : sc_core::sc_module {
  tlm_utils::simple_initiator_socket<Bus> socket{"socket"};
  explicit Bus(sc_core::sc_module_name n) : sc_module(n) {}
  tlm::tlm_response_status access(tlm::tlm_command cmd, std::uint64_t addr, void* data, unsigned len,
                                  sc_core::sc_time& delay) {
    tlm::tlm_generic_payload tr;
    tr.set_command(cmd);
    tr.set_address(addr);
    tr.set_data_ptr(static_cast<unsigned char*>(data));
    tr.set_data_length(len);
    tr.set_streaming_width(len);
    socket->b_transport(tr, delay);
    return tr.get_response_status();
  }
  std::uint32_t rd(std::uint32_t off, sc_core::sc_time& delay) {
    std::uint32_t v = 0xDEADBEEF;
    EXPECT_EQ(access(tlm::TLM_READ_COMMAND, off, &v, 4, delay), tlm::TLM_OK_RESPONSE) << off;
    return v;
  }
  void wr(std::uint32_t off, std::uint32_t v, sc_core::sc_time& delay) {
    EXPECT_EQ(access(tlm::TLM_WRITE_COMMAND, off, &v, 4, delay), tlm::TLM_OK_RESPONSE) << off;
  }
};

}  // namespace

TEST(Chip, BusAddressMapAndGlobalRegisters) {
  pc::ChipOptions opts;
  opts.rank = 5;
  pc::Chip chip("chip", cfg(), opts);
  Bus bus("bus");
  bus.socket.bind(chip.host_socket);
  spawn([&] {
    sc_core::wait(ns(1000));
    sc_core::sc_time d = sc_core::SC_ZERO_TIME;
    EXPECT_EQ(bus.rd(spec::kRegChipId, d), 5u);
    EXPECT_EQ(ps_of(d), 40'000u);  // mmio_latency_ns per access
    EXPECT_EQ(bus.rd(spec::kRegVersion, d), 0x00010000u);
    EXPECT_EQ(bus.rd(spec::kRegNumCores, d), 2u);
    EXPECT_EQ(bus.rd(spec::kRegClockMhz, d), 1000u);
    EXPECT_EQ(bus.rd(spec::kRegFpMode, d), 0u);  // inf_nan
    bus.wr(spec::kRegFpMode, spec::kFpModeSaturation, d);
    EXPECT_EQ(bus.rd(spec::kRegFpMode, d), spec::kFpModeSaturation);
    EXPECT_EQ(chip.services().modes->fp_mode, spec::kFpModeSaturation);
    bus.wr(spec::kRegStep, 12, d);
    EXPECT_EQ(bus.rd(spec::kRegStep, d), 12u);
    // Cycle counter at the access time: 1000 ns + 9 accesses x 40 ns + this one = 1400 cycles.
    EXPECT_EQ(bus.rd(spec::kRegCycleLo, d), 1400u);
    EXPECT_EQ(bus.rd(spec::kRegCycleHi, d), 0u);
    // Registers of the units are reachable through the same window.
    bus.wr(spec::kRegIrqMask, spec::kIrqCollective, d);
    EXPECT_EQ(bus.rd(spec::kRegIrqMask, d), spec::kIrqCollective);
    EXPECT_EQ(bus.rd(spec::kRegExcEnable, d), 0x1Fu);
    bus.wr(spec::stream_reg(3, spec::kStreamRingEntries), 16, d);
    EXPECT_EQ(bus.rd(spec::stream_reg(3, spec::kStreamRingEntries), d), 16u);
    // HBM window: DMA-sized accesses through the bandwidth model.
    std::vector<std::uint8_t> block(4096, 0x5A), back(4096);
    sc_core::sc_time dd = sc_core::SC_ZERO_TIME;
    EXPECT_EQ(bus.access(tlm::TLM_WRITE_COMMAND, pc::Chip::kHbmBusBase + 0x3000, block.data(), 4096, dd),
              tlm::TLM_OK_RESPONSE);
    EXPECT_GT(dd, ns(120));  // at least the HBM latency
    EXPECT_EQ(bus.access(tlm::TLM_READ_COMMAND, pc::Chip::kHbmBusBase + 0x3000, back.data(), 4096, dd),
              tlm::TLM_OK_RESPONSE);
    EXPECT_EQ(back, block);
    // Errors: unaligned/short MMIO, unmapped gap between BAR0 and HBM, beyond HBM.
    std::uint16_t half = 0;
    EXPECT_EQ(bus.access(tlm::TLM_READ_COMMAND, 0x10, &half, 2, d), tlm::TLM_GENERIC_ERROR_RESPONSE);
    std::uint32_t w = 0;
    EXPECT_EQ(bus.access(tlm::TLM_READ_COMMAND, 0x2, &w, 4, d), tlm::TLM_GENERIC_ERROR_RESPONSE);
    EXPECT_EQ(bus.access(tlm::TLM_READ_COMMAND, spec::kMmioSize, &w, 4, d), tlm::TLM_ADDRESS_ERROR_RESPONSE);
    EXPECT_EQ(bus.access(tlm::TLM_READ_COMMAND, pc::Chip::kHbmBusBase + chip.hbm().size(), &w, 4, d),
              tlm::TLM_ADDRESS_ERROR_RESPONSE);
  });
  sc_core::sc_start();
}

namespace {

class FlipAndCorrupt : public pc::FaultHooks {
 public:
  std::uint32_t sites() const override { return pc::kFaultHbmWord | pc::kFaultRegisterRead; }
  std::vector<pc::HbmFaultPoint> hbm_fault_schedule(std::uint32_t rank) override {
    return rank == 3 ? std::vector<pc::HbmFaultPoint>{{2000, 0x5008}, {500, 0x5000}} : std::vector<pc::HbmFaultPoint>{};
  }
  void on_hbm_word(const pc::FaultSite& site, std::uint64_t addr, std::uint64_t& word) override {
    applied.push_back({site.cycle, addr, word});
    word ^= 1ull << 62;
  }
  void on_register_read(const pc::FaultSite&, std::uint32_t offset, std::uint32_t& v) override {
    if (offset == spec::kRegNumCores) v = 99;
  }
  struct Applied {
    std::uint64_t cycle, addr, before;
  };
  std::vector<Applied> applied;
};

}  // namespace

TEST(Chip, HbmWordFaultsApplyAtTheirCycleThroughTheHook) {
  FlipAndCorrupt hooks;
  pc::ChipOptions opts;
  opts.rank = 3;
  opts.faults = &hooks;
  pc::Chip chip("chip", cfg(), opts);
  poke(chip.hbm(), 0x5000, std::uint64_t{0x1111});
  poke(chip.hbm(), 0x5008, std::uint64_t{0x2222});
  std::uint64_t at1000 = 0;
  spawn([&] {
    sc_core::wait(ns(1000));
    at1000 = peek<std::uint64_t>(chip.hbm(), 0x5008);
    EXPECT_EQ(chip.read_reg(spec::kRegNumCores, sc_core::sc_time_stamp()), 99u);
  });
  sc_core::sc_start();
  ASSERT_EQ(hooks.applied.size(), 2u);
  EXPECT_EQ(hooks.applied[0].cycle, 500u);  // sorted by cycle
  EXPECT_EQ(hooks.applied[0].addr, 0x5000u);
  EXPECT_EQ(hooks.applied[0].before, 0x1111u);
  EXPECT_EQ(hooks.applied[1].cycle, 2000u);
  EXPECT_EQ(at1000, 0x2222u) << "not yet flipped at cycle 1000";
  EXPECT_EQ(peek<std::uint64_t>(chip.hbm(), 0x5000), 0x1111u | (1ull << 62));
  EXPECT_EQ(peek<std::uint64_t>(chip.hbm(), 0x5008), 0x2222u | (1ull << 62));
}

namespace {

// A small workload with kernels on two streams, an event, a capture task and an exception;
// returns the trace JSON.
std::string traced_run() {
  pc::Trace trace(true);
  FakeCores* cores = nullptr;
  pc::ChipOptions opts;
  opts.trace = &trace;
  opts.make_cores = fake_core_factory(&cores);
  pc::Chip chip("chip", cfg(), opts);
  TestHost host(chip);
  std::vector<float> x(1000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  x[333] = std::numeric_limits<float>::quiet_NaN();
  chip.hbm().debug_write(0x400000, std::as_bytes(std::span(x)));
  poke(chip.hbm(), 0x200000, FakeKernelArgs{0x400000, 0x500000, 1000, 3000});
  spec::CaptureArgs ca;
  ca.tensor.addr = 0x500000;
  ca.tensor.dtype = 0;  // F32
  ca.tensor.rank = 1;
  ca.tensor.dims[0] = 1000;
  poke(chip.hbm(), 0x200100, ca);
  spawn([&] {
    host.wr(spec::kRegCapBuf0Lo, 0x1000000);
    host.wr(spec::kRegCapBuf1Lo, 0x1100000);
    host.wr(spec::kRegCapBufSize, 65536);
    host.wr(spec::kRegCapCtrl, spec::kCapEnable | spec::kCapPingPong);
    host.setup_stream(0);
    host.setup_stream(1);
    auto k = task(spec::TaskKind::Kernel, 1, 0x200000, sizeof(FakeKernelArgs));
    k.kernel = 1;
    k.core_mask = 1;
    host.submit(0, k);
    auto rec = task(spec::TaskKind::EventRecord, 2);
    rec.event_id = 1;
    host.submit(0, rec);
    auto w = task(spec::TaskKind::EventWait, 3);
    w.event_id = 1;
    host.submit(1, w);
    host.submit(1, task(spec::TaskKind::Capture, 4, 0x200100, sizeof ca));
    auto k2 = k;
    k2.task_id = 5;
    k2.core_mask = 2;
    k2.flags |= spec::kTaskFlagNotify;
    host.submit(1, k2);
    host.wait_stream(0);
    host.wait_stream(1);
    host.wr(spec::kRegCapFlush, 1);
  });
  sc_core::sc_start();
  return trace.to_json_string();
}

}  // namespace

TEST(Chip, SameRunTwiceGivesIdenticalTraceBytes) {
  const std::string dir = ::testing::TempDir();
  for (int i = 0; i < 2; ++i) {
    const int status = run_in_child([&] {
      std::ofstream(dir + "/chip_trace_" + std::to_string(i) + ".json", std::ios::binary) << traced_run();
    });
    ASSERT_EQ(status, 0);
  }
  auto slurp = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  };
  const std::string a = slurp(dir + "/chip_trace_0.json"), b = slurp(dir + "/chip_trace_1.json");
  EXPECT_GT(a.size(), 1000u);
  EXPECT_EQ(a, b);
  for (const char* track : {"\"stream0\"", "\"stream1\"", "\"hbm.ch", "\"capture\"", "\"irq\"", "\"core0.vector\"",
                            "\"core1.vector\"", "\"detect "})
    EXPECT_NE(a.find(track), std::string::npos) << track;
}
