// Scans noted with stored tensors (chip_model/scan_memo.h): found only for the same range and
// layout, forgotten by any write over them, in the memo and through the HBM that owns it.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "chip_model/hbm.h"
#include "chip_model/scan_memo.h"
#include "tests/chip_model/chip_test_util.h"
#include "tests/chip_model/kernel_test_util.h"

namespace pc = probelab::chip;
namespace pg = probelab::graph;
namespace pn = probelab::num;

namespace {

pn::ScanReport report(std::int64_t nans, std::int64_t first) {
  pn::ScanReport r;
  r.nan_count = nans;
  r.first_nan = first;
  return r;
}

const pg::TensorDesc kF16{pg::DType::F16, {4, 64}, pg::Format::ND};

}  // namespace

TEST(ScanMemo, FoundOnlyForTheSameRangeAndLayout) {
  pc::ScanMemo m;
  m.note(0x1000, 512, kF16, report(3, 7));
  ASSERT_TRUE(m.find(0x1000, 512, kF16).has_value());
  EXPECT_EQ(m.find(0x1000, 512, kF16)->nan_count, 3);
  EXPECT_EQ(m.find(0x1000, 512, kF16)->first_nan, 7);
  EXPECT_FALSE(m.find(0x1000, 256, kF16));                                             // a part of it
  EXPECT_FALSE(m.find(0x1002, 512, kF16));                                             // shifted
  EXPECT_FALSE(m.find(0x1000, 512, pg::TensorDesc{pg::DType::F16, {8, 32}, pg::Format::ND}));  // another shape
  EXPECT_FALSE(m.find(0x1000, 512, pg::TensorDesc{pg::DType::BF16, {4, 64}, pg::Format::ND}));  // another dtype
}

TEST(ScanMemo, AnyWriteOverlappingARangeForgetsItsScan) {
  // Three tensors side by side; writes that touch the first byte, the last byte, the middle,
  // and that cover several; and writes next to a range that leave it alone.
  struct Case {
    std::uint64_t addr, len;
    std::vector<bool> kept;  // of the ranges at 0x1000, 0x1200, 0x1400 (512 bytes each)
  };
  const std::vector<Case> cases = {
      {0x1000, 1, {false, true, true}},    {0x11FF, 1, {false, true, true}},  {0x1300, 16, {true, false, true}},
      {0x11FF, 2, {false, false, true}},   {0x0F00, 0x800, {false, false, false}},
      {0x0F00, 0x100, {true, true, true}}, {0x1600, 64, {true, true, true}},   {0x1400, 0, {true, true, true}},
  };
  for (const Case& c : cases) {
    pc::ScanMemo m;
    for (std::uint64_t a : {0x1000u, 0x1200u, 0x1400u}) m.note(a, 512, kF16, report(1, 0));
    m.forget(c.addr, c.len);
    const std::uint64_t starts[] = {0x1000, 0x1200, 0x1400};
    for (std::size_t i = 0; i < 3; ++i)
      EXPECT_EQ(m.find(starts[i], 512, kF16).has_value(), c.kept[i]) << "write " << c.addr << "+" << c.len << " range " << i;
  }
  // Noting a range replaces what overlapped it.
  pc::ScanMemo m;
  m.note(0x1000, 512, kF16, report(1, 0));
  m.note(0x1100, 512, kF16, report(2, 5));
  EXPECT_FALSE(m.find(0x1000, 512, kF16));
  EXPECT_EQ(m.find(0x1100, 512, kF16)->nan_count, 2);
  EXPECT_EQ(m.size(), 1u);
}

TEST(ScanMemo, AgreesWithAListOfRangesOverRandomNotesAndWrites) {
  // 20,000 random notes (a third of them of a range noted before, as a tensor stored again at
  // the next step), writes and lookups, ranges of 1..600 bytes, three layouts: the memo answers
  // every lookup as a plain list of the noted ranges would. Over a 4 KB window the ranges
  // overlap; over 256 KB most stay apart, so hundreds of forgotten scans pile up and are dropped.
  struct Noted {
    std::uint64_t addr, len;
    pg::TensorDesc desc;
    std::int64_t nans;
  };
  const std::vector<pg::TensorDesc> layouts = {kF16, pg::TensorDesc{pg::DType::F32, {2, 3, 4, 5}, pg::Format::NCHW},
                                               pg::TensorDesc{pg::DType::BF16, {7}, pg::Format::ND}};
  auto overlaps = [](const Noted& r, std::uint64_t a, std::uint64_t len) { return r.addr < a + len && a < r.addr + r.len; };
  for (const std::uint64_t window : {std::uint64_t{4096}, std::uint64_t{256} << 10}) {
    std::mt19937_64 rng(11);
    auto pick = [&](std::uint64_t n) { return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng); };
    pc::ScanMemo m;
    std::vector<Noted> ref, history;
    for (int i = 0; i < 20000; ++i) {
      std::uint64_t a = 0x1000 + pick(window), len = 1 + pick(600);
      const pg::TensorDesc& d = layouts[pick(layouts.size())];
      switch (pick(4)) {
        case 0:  // note again a range noted before
          if (!history.empty()) {
            const Noted& h = history[pick(history.size())];
            a = h.addr, len = h.len;
          }
          [[fallthrough]];
        case 1: {  // note
          const auto n = static_cast<std::int64_t>(i);
          m.note(a, len, d, report(n, 0));
          std::erase_if(ref, [&](const Noted& r) { return overlaps(r, a, len); });
          ref.push_back({a, len, d, n});
          history.push_back(ref.back());
          break;
        }
        case 2:  // write
          m.forget(a, len);
          std::erase_if(ref, [&](const Noted& r) { return overlaps(r, a, len); });
          break;
        default: {  // lookup: of a noted range (its layout or another) or of a random one
          const bool known = !ref.empty() && pick(4) != 0;
          const Noted q = known ? ref[pick(ref.size())] : Noted{a, len, d, 0};
          const pg::TensorDesc& qd = known && pick(3) == 0 ? d : q.desc;
          const auto want = std::find_if(ref.begin(), ref.end(), [&](const Noted& r) {
            return r.addr == q.addr && r.len == q.len && r.desc == qd;
          });
          const auto got = m.find(q.addr, q.len, qd);
          ASSERT_EQ(got.has_value(), want != ref.end()) << "lookup " << i << ", window " << window;
          if (got) {
            ASSERT_EQ(got->nan_count, want->nans) << "lookup " << i << ", window " << window;
          }
        }
      }
      ASSERT_EQ(m.size(), ref.size()) << "after operation " << i << ", window " << window;
    }
  }
}

// A runtime that stores at ever new addresses leaves forgotten scans behind: once they outnumber
// the remembered ones they are dropped, and every remembered scan is still found where it was.
TEST(ScanMemo, ForgottenScansAreDroppedWithoutLosingTheOthers) {
  pc::ScanMemo m;
  for (std::uint64_t i = 0; i < 1000; ++i) m.note(0x10000 + i * 1024, 512, kF16, report(static_cast<std::int64_t>(i), 0));
  for (std::uint64_t i = 0; i < 1000; ++i)
    if (i % 10 != 7) m.forget(0x10000 + i * 1024 + 100, 1);  // a byte inside each of 900 of them
  EXPECT_EQ(m.size(), 100u);
  for (std::uint64_t i = 0; i < 1000; ++i) {
    const auto got = m.find(0x10000 + i * 1024, 512, kF16);
    ASSERT_EQ(got.has_value(), i % 10 == 7) << "range " << i;
    if (got) {
      EXPECT_EQ(got->nan_count, static_cast<std::int64_t>(i));
    }
  }
  // Noted again (in place or anew) and overlapped across several ranges.
  m.note(0x10000, 512, kF16, report(5000, 0));
  m.note(0x10000 + 7 * 1024 - 100, 3 * 1024, kF16, report(5001, 0));  // covers ranges 7, 8 and 9
  EXPECT_FALSE(m.find(0x10000 + 7 * 1024, 512, kF16));
  EXPECT_EQ(m.find(0x10000, 512, kF16)->nan_count, 5000);
  EXPECT_EQ(m.find(0x10000 + 7 * 1024 - 100, 3 * 1024, kF16)->nan_count, 5001);
  EXPECT_EQ(m.find(0x10000 + 17 * 1024, 512, kF16)->nan_count, 17);
  EXPECT_EQ(m.size(), 101u);
}

TEST(ScanMemo, ALayoutOfMoreThanEightDimensionsIsScannedAgain) {
  pc::ScanMemo m;
  const pg::TensorDesc nine{pg::DType::F16, {1, 1, 1, 1, 1, 1, 1, 2, 128}, pg::Format::ND};
  m.note(0x1000, 512, kF16, report(1, 0));
  m.note(0x1000, 512, nine, report(2, 0));  // forgets what it overlaps, remembers nothing
  EXPECT_FALSE(m.find(0x1000, 512, nine));
  EXPECT_FALSE(m.find(0x1000, 512, kF16));
  EXPECT_EQ(m.size(), 0u);
  const pg::TensorDesc eight{pg::DType::F16, {1, 1, 1, 1, 1, 1, 2, 128}, pg::Format::ND};
  m.note(0x1000, 512, eight, report(3, 0));
  ASSERT_TRUE(m.find(0x1000, 512, eight));
  EXPECT_EQ(m.find(0x1000, 512, eight)->nan_count, 3);
}

TEST(ScanMemo, TheHbmForgetsAScanOnEveryWritePath) {
  // A flipped bit written by an injector, a DMA, or a debug access makes the next reader scan.
  pc::Hbm hbm("hbm", pc::chip_preset("tiny"));
  std::vector<std::byte> bytes(512, std::byte{0});
  hbm.debug_write(0x4000, bytes);
  hbm.scans().note(0x4000, 512, kF16, report(0, -1));
  ASSERT_TRUE(hbm.scans().find(0x4000, 512, kF16));
  std::vector<std::byte> one(1, std::byte{0x7E});
  hbm.debug_write(0x4000 + 301, one);
  EXPECT_FALSE(hbm.scans().find(0x4000, 512, kF16));

  hbm.scans().note(0x4000, 512, kF16, report(0, -1));
  tlm::tlm_generic_payload t;
  t.set_command(tlm::TLM_WRITE_COMMAND);
  t.set_address(0x4000 + 511);
  t.set_data_ptr(reinterpret_cast<unsigned char*>(one.data()));
  t.set_data_length(1);
  EXPECT_EQ(hbm.socket.get_base_export()->transport_dbg(t), 1u);
  EXPECT_FALSE(hbm.scans().find(0x4000, 512, kF16));

  hbm.scans().note(0x4000, 512, kF16, report(0, -1));
  sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
  t.set_address(0x4000);
  t.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  hbm.socket.get_base_export()->b_transport(t, delay);
  EXPECT_FALSE(hbm.scans().find(0x4000, 512, kF16));
  // A read leaves it.
  hbm.scans().note(0x4000, 512, kF16, report(0, -1));
  hbm.debug_read(0x4000, bytes);
  EXPECT_TRUE(hbm.scans().find(0x4000, 512, kF16));
}

namespace {

// A kernel memory with a scan memo that forgets on every write, as Hbm's.
class MemoStore final : public pc::kernels::KernelMemory {
 public:
  pc::testing::MemStore bytes;
  pc::ScanMemo memo;
  void read(std::uint64_t addr, std::span<std::byte> dst) override { bytes.read(addr, dst); }
  void write(std::uint64_t addr, std::span<const std::byte> src) override {
    memo.forget(addr, src.size());
    bytes.write(addr, src);
  }
  std::optional<pn::ScanReport> scanned(std::uint64_t addr, std::uint64_t len, const pg::TensorDesc& stored) const override {
    return memo.find(addr, len, stored);
  }
  void note_scanned(std::uint64_t addr, std::uint64_t len, const pg::TensorDesc& stored, const pn::ScanReport& scan) override {
    memo.note(addr, len, stored, scan);
  }
};

pc::kernels::OpRunner run(MemoStore& mem, const probelab::spec::OpArgs& args) {
  pc::kernels::OpRunner r(probelab::spec::decode_op_args(probelab::spec::encode_op_args(args)), pn::Mode{});
  r.load(mem, nullptr, pc::FaultSite{});
  r.compute(nullptr, pc::FaultSite{});
  r.finish(nullptr, pc::FaultSite{}, 64);
  r.store(mem);
  return r;
}

}  // namespace

TEST(ScanMemo, AnInputScannedAsHbmHoldsItIsNotedForItsNextRead) {
  // A weight (of a size worth noting) written by a DMA, no scan noted, with two NaNs: the first op
  // that reads it scans it and notes the scan; the next read takes the note and latches the same; a write over it makes
  // the reader scan again.
  MemoStore mem;
  pc::testing::Placer place(mem.bytes);
  pg::Tensor a = pc::testing::random_f16({8, 256}, 1), b = pc::testing::random_f16({256, 64}, 2);  // b: 32 KiB
  pc::testing::set_bits(b, 37, 0x7E00);
  pc::testing::set_bits(b, 90, 0x7E00);
  const auto ra = place.put(a), rb = place.put(b);
  const auto args = pc::testing::op_args("MatMul", {ra, rb}, {place.out(pg::DType::F16, {8, 64})});
  const pg::TensorDesc b_desc{pg::DType::F16, {256, 64}, pg::Format::ND};
  ASSERT_FALSE(mem.memo.find(rb.addr, b.nbytes(), b_desc));
  for (int read = 0; read < 2; ++read) {
    const auto r = run(mem, args);
    const auto noted = mem.memo.find(rb.addr, b.nbytes(), b_desc);
    ASSERT_TRUE(noted) << read;
    EXPECT_EQ(noted->nan_count, 2) << read;
    EXPECT_EQ(noted->first_nan, 37) << read;
    EXPECT_EQ(r.detection().nan_input, 1) << read;
    EXPECT_EQ(r.detection().inputs.first_elem(), 37) << read;
  }
  pc::testing::set_bits(b, 37, 0x3C00);
  pc::testing::set_bits(b, 90, 0x3C00);
  mem.write(rb.addr, b.bytes());
  EXPECT_FALSE(mem.memo.find(rb.addr, b.nbytes(), b_desc));
  EXPECT_EQ(run(mem, args).detection().nan_input, -1);
}
