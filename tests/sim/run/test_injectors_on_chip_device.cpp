// The hardware-fault injectors on the simulated chip (accumulator/UB bit flips, a stuck vector
// lane, a dropped or delayed interrupt, a corrupted capture record), the same bits for the same
// seed, and descriptors that never fire. Every simulation runs in a forked child (sim::Runner).
#include <cmath>
#include <regex>

#include <gtest/gtest.h>

#include "tests/sim/run/injector_chip_util.h"
#include "sim/scenario/prepared_run.h"

namespace probelab::sim {
namespace {

using test::TempDir;
using nlohmann::json;

const char* kModel = R"yaml(name: tinynet
seed: 5
inputs:
  - {name: x, shape: [8, 8]}
ops:
  - {name: fc1, type: MatMul, inputs: [x], weights: {weight: [8, 16]}}
  - {name: fc1_bias, type: Add, weights: {b: {shape: [16], init: "uniform(-1, 1)"}}}
  - {name: relu, type: Relu}
  - {name: fc2, type: MatMul, weights: {weight: [16, 4]}}
outputs: [fc2]
)yaml";

std::string scenario(const std::string& name, const std::string& probes, const std::string& injections,
                     int steps = 1) {
  return "name: " + name + "\nmodel: tinynet.yaml\nchip: tiny\nseed: 3\nsteps: " + std::to_string(steps) + "\n" +
         probes + (injections.empty() ? "" : "injections:\n" + injections);
}

const std::string kFull = "probes: {mode: full, data_mode: [input, output], watch_points: [\"*\"], compare: {enabled: true}}\n";
const std::string kStats = "probes: {mode: statistics, watch_points: [\"*\"]}\n";

/// Raw element bits of the full dump of `op`'s output 0 at `step` (rank 0).
std::vector<std::uint16_t> dumped_bits(const ScenarioOutcome& o, const std::string& op, std::uint32_t step) {
  const json manifest = test::dump_manifest(o);
  for (const auto& e : manifest.at("entries")) {
    if (e.at("op") != op || e.at("edge") != "out0" || e.at("step") != step || !e.contains("file")) continue;
    EXPECT_EQ(e.at("encoding"), "raw");
    EXPECT_EQ(e.at("compression"), "none");
    const graph::Tensor t = graph::read_npy((o.out_dir / "dump" / "rank0" / e.at("file").get<std::string>()).string());
    EXPECT_EQ(t.dtype(), graph::DType::F16);
    const auto d = t.data<std::uint16_t>();
    return {d.begin(), d.end()};
  }
  ADD_FAILURE() << "no full dump of " << op << " step " << step;
  return {};
}

TEST(InjectorsOnChipDevice, AccumulatorAndUnifiedBufferFlipsHitOneOpOncePerExecution) {
  TempDir dir;
  dir.write("tinynet.yaml", kModel);
  dir.write("clean.yaml", scenario("clean", kFull, "", 2));
  dir.write("l0c.yaml", scenario("l0c", kFull, "  - {kind: bitflip, target: l0c, op: fc1, step: all, bits: [28]}\n", 2));
  dir.write("ub.yaml", scenario("ub", kFull, "  - {kind: bitflip, target: ub, op: fc1_bias, step: all, bits: [14]}\n", 2));
  const auto runs = test::run_scenarios(dir, {"clean.yaml", "l0c.yaml", "ub.yaml"});
  const auto& clean = runs.at("clean");
  ASSERT_EQ(clean.report.at("status"), "ok") << clean.report.dump(2);
  for (const auto& c : clean.report.at("comparisons")) EXPECT_TRUE(c.at("passed").get<bool>()) << c.dump(2);

  struct Case {
    const char* name;
    const char* op;
    const char* location;
    std::uint64_t bit;
  };
  for (const Case& k : {Case{"l0c", "fc1", "l0c byte 0 bits [28]", 1ull << 28},
                        Case{"ub", "fc1_bias", "ub byte 0 bits [14]", 1ull << 14}}) {
    SCOPED_TRACE(k.name);
    const auto& o = runs.at(k.name);
    ASSERT_EQ(o.report.at("status"), "ok") << o.report.dump(2);
    const json& inj = test::injection(o);
    // Once per op execution: one application at each of the two steps, at the named op only.
    ASSERT_EQ(inj.at("applications"), 2u) << inj.dump(2);
    for (std::uint32_t step = 0; step < 2; ++step) {
      const json& p = inj.at("proof").at(step);
      EXPECT_EQ(p.at("op"), k.op);
      EXPECT_EQ(p.at("step"), step);
      EXPECT_EQ(p.at("location"), k.location);
      EXPECT_EQ(test::bits_of(p.at("before")) ^ test::bits_of(p.at("after")), k.bit) << p.dump();
      // The reference replay of that op (from its captured inputs) fails; every other op passes.
      for (const auto& c : o.report.at("comparisons")) {
        if (c.at("step") != step) continue;
        EXPECT_EQ(c.at("passed").get<bool>(), c.at("op") != k.op) << c.dump(2);
      }
      // Against the fault-free run: element 0 of the op's output changed, nothing else did.
      const auto got = dumped_bits(o, k.op, step);
      const auto want = dumped_bits(clean, k.op, step);
      ASSERT_EQ(got.size(), want.size());
      ASSERT_FALSE(got.empty());
      EXPECT_NE(got[0], want[0]);
      for (std::size_t i = 1; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "element " << i;
    }
  }
  // The L0C flip acts on the FP32 accumulator: element 0's bits before the flip are the clean
  // FP32 result, which the clean run delivered rounded to FP16.
  const json& p0 = test::injection(runs.at("l0c")).at("proof").at(0);
  const float acc = std::bit_cast<float>(static_cast<std::uint32_t>(test::bits_of(p0.at("before"))));
  const auto clean_fc1 = graph::read_npy((clean.out_dir / "dump/rank0/step0/fc1.out0.npy").string()).to_f64();
  EXPECT_NEAR(clean_fc1.at(0), acc, std::abs(acc) * 0x1p-11 + 0x1p-24);
}

TEST(InjectorsOnChipDevice, StuckAtForcesOneBitOnEveryElementOfOneLane) {
  TempDir dir;
  dir.write("tinynet.yaml", kModel);
  dir.write("clean.yaml", scenario("clean", kFull, ""));
  dir.write("stuck.yaml", scenario("stuck", kFull, "  - {kind: stuck_at, op: fc1_bias, lane: 3, bit: 14, value: 1}\n"));
  const auto runs = test::run_scenarios(dir, {"clean.yaml", "stuck.yaml"});
  const auto& o = runs.at("stuck");
  ASSERT_EQ(o.report.at("status"), "ok") << o.report.dump(2);
  const json& inj = test::injection(o);
  ASSERT_EQ(inj.at("applications"), 1u) << inj.dump(2);
  const json& p = inj.at("proof").at(0);
  EXPECT_EQ(p.at("op"), "fc1_bias");
  std::smatch m;
  const std::string loc = p.at("location");
  ASSERT_TRUE(std::regex_match(loc, m, std::regex(R"(lane 3 of (\d+) bit 14 stuck at 1: (\d+) element\(s\) changed, first element (\d+))")))
      << loc;
  const std::size_t lanes = std::stoul(m[1]), changed = std::stoul(m[2]), first = std::stoul(m[3]);
  ASSERT_GT(lanes, 3u);

  const auto got = dumped_bits(o, "fc1_bias", 0);
  const auto want = dumped_bits(runs.at("clean"), "fc1_bias", 0);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_GT(got.size(), first);
  std::size_t expect_changed = 0, expect_first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (i % lanes == 3) {
      EXPECT_EQ(got[i], want[i] | 0x4000) << "element " << i;
      if (!(want[i] & 0x4000) && expect_changed++ == 0) expect_first = i;
    } else {
      EXPECT_EQ(got[i], want[i]) << "element " << i;
    }
  }
  EXPECT_EQ(changed, expect_changed);
  EXPECT_GT(changed, 0u);
  EXPECT_EQ(first, expect_first);
  EXPECT_EQ(test::bits_of(p.at("before")), want[first]);
  EXPECT_EQ(test::bits_of(p.at("after")), want[first] | 0x4000u);
}

// The exception latch of a NaN at fc1, reported through a normal, a dropped and a delayed interrupt
// (only the invalid kind latches here: one latch, one interrupt).
TEST(InjectorsOnChipDevice, DroppedOrDelayedExceptionInterruptMakesTheAnomalyArriveLater) {
  TempDir dir;
  dir.write("tinynet.yaml", kModel);
  const std::string nan = "  - {kind: nan, op: fc1, element: 0}\n";
  const std::string stats = "probes: {mode: statistics, watch_points: [\"*\"], exceptions: {kinds: [invalid]}}\n";
  dir.write("base.yaml", scenario("irq_base", stats, nan));
  dir.write("drop.yaml", scenario("irq_drop", stats, nan + "  - {kind: interrupt, line: exception, action: drop}\n"));
  dir.write("delay.yaml", scenario("irq_delay", stats,
                                   nan + "  - {kind: interrupt, line: exception, action: delay, delay_ps: 1000000}\n"));
  const auto runs = test::run_scenarios(dir, {"base.yaml", "drop.yaml", "delay.yaml"});
  for (const auto& [name, o] : runs) {
    ASSERT_EQ(o.report.at("status"), "ok") << name << o.report.dump(2);
    EXPECT_TRUE(test::injection(o, 0).at("fired").get<bool>()) << name;
  }
  const auto& base = runs.at("irq_base").report.at("anomalies");
  ASSERT_EQ(base.size(), 1u) << base.dump(2);
  EXPECT_EQ(base[0].at("op"), "fc1");
  EXPECT_EQ(base[0].at("element"), 0);
  EXPECT_EQ(base[0].at("role"), "source");
  const auto base_latency = base[0].at("latency_cycles").get<std::int64_t>();

  // Delayed by 1 us: the same anomaly, later by exactly the delay in device cycles.
  const auto& delay = runs.at("irq_delay");
  const json& lj = test::injection(delay, 1);
  ASSERT_EQ(lj.at("applications"), 1u) << lj.dump(2);
  EXPECT_EQ(lj.at("proof").at(0).at("after"), "delayed by 1000000 ps");
  EXPECT_EQ(lj.at("proof").at(0).at("location"), "irq line 0x1 occurrence 0");
  const auto& late = delay.report.at("anomalies");
  ASSERT_EQ(late.size(), 1u) << late.dump(2);
  for (const char* key : {"op", "kind", "element", "cycle", "step"}) EXPECT_EQ(late[0].at(key), base[0].at(key)) << key;
  const double mhz = std::stod(delay.report.at("chip").at("params").at("clock_mhz").get<std::string>());
  const auto delay_cycles = static_cast<std::int64_t>(1000000.0 * mhz / 1e6);
  // the delay, plus at most two driver calls (100 ns each) of a host whose other threads are
  // in a different state when the late interrupt arrives
  const std::int64_t extra = late[0].at("latency_cycles").get<std::int64_t>() - base_latency;
  EXPECT_GE(extra, delay_cycles) << late[0].dump();
  EXPECT_LE(extra, delay_cycles + 360) << late[0].dump();

  // Dropped: the message is lost but the raw line stays pending, so the host services the latch
  // with the next interrupt it gets: the same anomaly, later, and nothing crashes.
  const auto& drop = runs.at("irq_drop");
  const json& dj = test::injection(drop, 1);
  ASSERT_EQ(dj.at("applications"), 1u) << dj.dump(2);
  EXPECT_EQ(dj.at("proof").at(0).at("after"), "dropped");
  const auto& lost = drop.report.at("anomalies");
  ASSERT_EQ(lost.size(), 1u) << lost.dump(2);
  for (const char* key : {"op", "kind", "element", "cycle", "step"}) EXPECT_EQ(lost[0].at(key), base[0].at(key)) << key;
  EXPECT_GT(lost[0].at("latency_cycles").get<std::int64_t>(), base_latency) << lost[0].dump();
}

TEST(InjectorsOnChipDevice, CorruptCaptureRecordIsCountedAndDropsOnlyThatRecord) {
  TempDir dir;
  dir.write("tinynet.yaml", kModel);
  dir.write("clean.yaml", scenario("cap_clean", kStats, ""));
  dir.write("corrupt.yaml", scenario("cap_corrupt", kStats, "  - {kind: capture_corrupt, record: 1, bit: 3}\n"));
  const auto runs = test::run_scenarios(dir, {"clean.yaml", "corrupt.yaml"});
  const auto& clean = runs.at("cap_clean");
  const auto& o = runs.at("cap_corrupt");
  ASSERT_EQ(clean.report.at("status"), "ok");
  ASSERT_EQ(o.report.at("status"), "ok") << o.report.dump(2);
  const json& inj = test::injection(o);
  ASSERT_EQ(inj.at("applications"), 1u) << inj.dump(2);
  const json& p = inj.at("proof").at(0);
  EXPECT_EQ(test::bits_of(p.at("before")) ^ test::bits_of(p.at("after")), 0x8u);
  EXPECT_NE(p.at("location").get<std::string>().find("capture record 1 "), std::string::npos) << p.dump();

  const json& cap = o.report.at("capture");
  EXPECT_EQ(cap.at("corrupt"), 1u) << cap.dump(2);
  EXPECT_EQ(clean.report.at("capture").at("corrupt"), 0u);
  EXPECT_EQ(cap.at("records"), clean.report.at("capture").at("records"));
  EXPECT_EQ(cap.at("records").get<std::uint64_t>(),
            cap.at("drained").get<std::uint64_t>() + cap.at("corrupt").get<std::uint64_t>() +
                cap.at("dropped").get<std::uint64_t>());
  EXPECT_EQ(test::dump_manifest(o).at("entries").size() + 1, test::dump_manifest(clean).at("entries").size());
}

// Seeded draws (a random element, a random finite value) and bit flips replay bit for bit.
TEST(InjectorsOnChipDevice, SameSeedGivesTheSameReportBytes) {
  TempDir dir;
  dir.write("tinynet.yaml", kModel);
  dir.write("det.yaml", scenario("det", kStats,
                                 "  - {kind: value, op: fc1, element: random, value: random_finite}\n"
                                 "  - {kind: bitflip, target: l0c, op: fc2, bits: [3, 17]}\n"
                                 "  - {kind: stuck_at, op: relu, lane: 1, bit: 9}\n",
                                 2));
  const auto a = test::run_scenarios(dir, {"det.yaml"}, "a").at("det");
  const auto b = test::run_scenarios(dir, {"det.yaml"}, "b").at("det");
  const auto c = test::run_scenarios(dir, {"det.yaml"}, "c", 77).at("det");
  ASSERT_EQ(a.report.at("status"), "ok") << a.report.dump(2);
  for (const auto& inj : a.report.at("injections")) EXPECT_TRUE(inj.at("fired").get<bool>()) << inj.dump(2);
  const std::string ra = test::slurp(a.out_dir / "report.json");
  ASSERT_FALSE(ra.empty());
  EXPECT_EQ(ra, test::slurp(b.out_dir / "report.json"));
  EXPECT_EQ(test::slurp(a.out_dir / "dump/rank0/dump.json"), test::slurp(b.out_dir / "dump/rank0/dump.json"));
  // Another seed draws another element and value.
  ASSERT_EQ(c.report.at("status"), "ok");
  EXPECT_NE(a.report.at("injections")[0].at("proof"), c.report.at("injections")[0].at("proof"));
}

TEST(InjectorsOnChipDevice, DescriptorsThatNeverFireAreReportedAsSuch) {
  TempDir dir;
  dir.write("tinynet.yaml", kModel);
  dir.write("never.yaml",
            scenario("never", kStats,
                     "  - {kind: bitflip, target: hbm, tensor: fc1/weight, element: 2, bits: [14], cycle: 1000000000000}\n"
                     "  - {kind: fp16_accumulation, op: relu}\n"
                     "  - {kind: interrupt, line: breakpoint, action: drop}\n"
                     "  - {kind: nan, op: fc2, element: 1}\n"));
  const auto runs = test::run_scenarios(dir, {"never.yaml"});
  const auto& o = runs.at("never");
  ASSERT_EQ(o.report.at("status"), "ok") << o.report.dump(2);
  const json& inj = o.report.at("injections");
  ASSERT_EQ(inj.size(), 4u);
  for (std::size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(inj[i].dump(2));
    EXPECT_FALSE(inj[i].at("fired").get<bool>());
    EXPECT_EQ(inj[i].at("applications"), 0u);
    EXPECT_TRUE(inj[i].at("proof").empty());
    EXPECT_EQ(inj[i].at("note"), "never fired: its site was not reached in this run");
  }
  EXPECT_EQ(inj[0].at("descriptor").at("cycle"), 1000000000000u);
  // The control: a descriptor in the same run that does fire.
  EXPECT_TRUE(inj[3].at("fired").get<bool>());
  EXPECT_FALSE(inj[3].contains("note"));

  // A step the run never reaches is bad input, rejected before anything runs.
  dir.write("beyond.yaml", scenario("beyond", kStats, "  - {kind: nan, op: fc1, step: 5}\n", 2));
  LoadOptions lo;
  lo.source_root = test::source_root();
  try {
    prepare_run(load_scenario(dir.path() / "beyond.yaml", lo));
    ADD_FAILURE() << "a step beyond the run was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("injections[0].step"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace probelab::sim
