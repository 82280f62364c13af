// `mpirun -np K probelab run` as users run it: the chips of one job partitioned over K processes
// give report.json and trace.json byte-identical to one process (a 16-rank job on two servers
// over 2 processes, a 24-rank hierarchical job on three servers over 3), and jobs that cannot be
// partitioned are bad input (exit 2, the key named). Also -np 4 on a fat tree with the tree
// algorithm, and full captures (the capture DMA engine beside the streams) over 2 and 4 processes.
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/sim_test_util.h"

namespace probelab::sim {
namespace {

using test::TempDir;

std::string probelab(const std::string& args) { return std::string("'") + PROBELAB_BINARY + "' " + args; }
std::string mpirun(int np, const std::string& args) {
  return test::mpirun_prefix(np) + probelab(args);
}

bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

std::string job(int ranks, const std::string& allreduce, const std::string& extra = "") {
  return "name: job\nmodel: mlp_loss_scaled\nmode: training\nranks: " + std::to_string(ranks) +
         "\nsteps: 2\nseed: 4\ncluster: {chips_per_server: 8" + extra +
         "}\ntraining:\n  loss: model\n  optimizer: {type: sgd, lr: 5.0e-5}\n  allreduce: " + allreduce +
         "\nprobes:\n  mode: statistics\n  watch_points: [\"*/updated\"]\n"
         "  consistency: {enabled: true, reference_rank: 0, mode: statistics}\n";
}

void expect_same_outputs(const TempDir& dir, const std::string& a, const std::string& b) {
  for (const char* f : {"report.json", "trace.json", "summary.txt", "report.html", "perf_ops.csv"}) {
    const std::string x = test::slurp(dir.path() / a / "job" / f), y = test::slurp(dir.path() / b / "job" / f);
    ASSERT_FALSE(x.empty()) << f;
    EXPECT_TRUE(x == y) << f << " differs between " << a << " and " << b;
  }
}

// job.yaml in one process and under mpirun -np `np`: both pass, with the same bytes.
void expect_same_as_one_process(const TempDir& dir, int np) {
  const test::CmdResult one = test::shell(probelab("run job.yaml --out one"), dir);
  ASSERT_EQ(one.code, 0) << one.err << one.out;
  const std::string out = "np" + std::to_string(np);
  const test::CmdResult k = test::shell(mpirun(np, "run job.yaml --out " + out), dir);
  ASSERT_EQ(k.code, 0) << k.err << k.out;
  expect_same_outputs(dir, "one", out);
}

TEST(DistributedRun, TwoProcessesGiveTheOneProcessBytes) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun is not installed";
  TempDir dir;
  dir.write("job.yaml", job(16, "{algorithm: ring, accumulation: fp16}"));
  expect_same_as_one_process(dir, 2);
}

TEST(DistributedRun, ANanCrossingRanksAndStepsGetsTheOneProcessDiagnosis) {
  // The provenance needs every rank's evidence (latches, capture observations, suppressed kinds):
  // a NaN made on rank 9 (server 1) at step 0 reaches server 0 through the all-reduce and every
  // weight through the update; over 2 processes the diagnosis still names rank 9's op at step 0.
  if (!have_mpirun()) GTEST_SKIP() << "mpirun is not installed";
  TempDir dir;
  std::string y = job(16, "{algorithm: ring}");
  y.replace(y.find("  watch_points: [\"*/updated\"]\n"), std::string("  watch_points: [\"*/updated\"]\n").size(),
            "  watch_points: [\"*\"]\n  exceptions: {kinds: [overflow, invalid, nan_input, inf_input]}\n");
  y += "injections:\n  - {kind: nan, op: fc2/gelu, element: 3, step: 0, rank: 9}\n";
  dir.write("job.yaml", y);
  ASSERT_NO_FATAL_FAILURE(expect_same_as_one_process(dir, 2));
  const auto r = nlohmann::json::parse(test::slurp(dir.path() / "np2" / "job" / "report.json"));
  ASSERT_FALSE(r["diagnosis"].empty());
  EXPECT_EQ(r["diagnosis"][0]["op"], "fc2/gelu") << r["diagnosis"].dump();
  EXPECT_EQ(r["diagnosis"][0]["rank"], 9);
  EXPECT_EQ(r["diagnosis"][0]["step"], 0);
  EXPECT_EQ(r["diagnosis"][0]["cause"], "nan_source");
  for (const auto& c : r["diagnosis"]) {
    if (c["op"] != "fc2/gelu") {
      EXPECT_NE(c["cause"], "nan_source") << c.dump();
    }
  }
}

TEST(DistributedRun, ADivergenceOnARemoteRankIsMeasuredAsInOneProcess) {
  // Rank 21 (server 2 of 4, the second process) adds one gradient bucket's four inter-server
  // contributions in reverse order at step 1: the statistics the consistency check compares cross processes,
  // and every field of them must (the check once saw only their minima over MPI and measured a
  // smaller divergence, missing the all-gather's).
  if (!have_mpirun()) GTEST_SKIP() << "mpirun is not installed";
  TempDir dir;
  std::string y = job(32, "{algorithm: hierarchical, inter_algorithm: direct, accumulation: fp16, order: group, bucket_mb: 0.002}");
  y.replace(y.find("  watch_points: [\"*/updated\"]\n"), std::string("  watch_points: [\"*/updated\"]\n").size(),
            "  watch_points: [\"*/gradient/reduced\"]\n");
  y += "injections:\n  - {kind: collective_order, op: gradient_bucket1/allreduce/inter, rank: 21, step: 1, order: reverse}\n";
  dir.write("job.yaml", y);
  ASSERT_NO_FATAL_FAILURE(expect_same_as_one_process(dir, 2));
  const test::CmdResult parts = test::shell(probelab("run job.yaml --out parts --partitions 2"), dir);
  ASSERT_EQ(parts.code, 0) << parts.err << parts.out;
  expect_same_outputs(dir, "one", "parts");
  const auto r = nlohmann::json::parse(test::slurp(dir.path() / "np2" / "job" / "report.json"));
  const auto& c = r["consistency"];
  EXPECT_FALSE(c["consistent"].get<bool>()) << c.dump();
  EXPECT_EQ(c["first_divergence"]["op"], "gradient_bucket1/allreduce/inter") << c["first_divergence"].dump();
  EXPECT_EQ(c["first_divergence"]["ranks"], nlohmann::json::array({21}));
  bool gathered = false;  // the all-gather spreads rank 21's block over its server
  for (const auto& d : c["divergences"]) gathered = gathered || d["op"] == "gradient_bucket1/allreduce/intra_ag";
  EXPECT_TRUE(gathered) << c["divergences"].dump();
}

TEST(DistributedRun, ThreeProcessesOfAHierarchicalJobGiveTheOneProcessBytes) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun is not installed";
  TempDir dir;
  dir.write("job.yaml", job(24, "{algorithm: hierarchical, inter_algorithm: direct, accumulation: fp16, order: group}"));
  expect_same_as_one_process(dir, 3);
}

// A job hang (sim/run/hang_report.h) over three processes: rank 10's NIC dies in step 0 of a
// hierarchical all-reduce over three servers; every partition reports its ranks' part, and the
// merged report names the same blocked ranks, lost messages and times as one process does.
TEST(DistributedRun, AHangOnADeadLinkIsTheOneProcessHangUnderThreeProcesses) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun is not installed";
  TempDir dir;
  dir.write("job.yaml", job(24, "{algorithm: hierarchical}", ", exec_timeout_ms: 20") +
                            "injections:\n  - {kind: link_down, src: 10, dst: 18, cycle: 150000}\n"
                            "expectations:\n  - hang: {link: \"r10 nic*\", step: 0}\n");
  expect_same_as_one_process(dir, 3);
  const auto r = nlohmann::json::parse(test::slurp(dir.path() / "np3/job/report.json"));
  EXPECT_EQ(r.at("status"), "hang");
  EXPECT_EQ(r.at("hang").at("blocked").size(), 24u);
}

TEST(DistributedRun, FourProcessesOfATreeJobOnAFatTreeGiveTheOneProcessBytes) {
  // Messages cross partitions over leaf uplinks and spine downlinks (two servers per leaf), and
  // every partition's network processes its queue ahead of its time within each window.
  if (!have_mpirun()) GTEST_SKIP() << "mpirun is not installed";
  TempDir dir;
  dir.write("job.yaml", job(32, "{algorithm: tree, accumulation: fp16}",
                            ", switch: fat_tree, servers_per_leaf: 2, spines: 2, oversubscription: 2"));
  expect_same_as_one_process(dir, 4);
}

TEST(DistributedRun, ALongJobOfOneChipServersGivesTheOneProcessBytesAtEveryStep) {
  // 300 steps of 4 one-chip servers over 2 processes (--partitions, no mpirun needed): every
  // message crosses a partition, and a collective's chunks land in a chip's HBM between that
  // chip's own transfers. The network processes each event at the start of its lookahead cell
  // and windows end on cell boundaries, so a landing is modelled at the same point of the chip's
  // HBM traffic whichever process holds the other chips (before, a window cut the cell short in
  // the partitioned run and one transfer queued behind another at step 277: the cycles differed).
  TempDir dir;
  dir.write("job.yaml", R"(name: job
model: mlp_loss_scaled
mode: training
ranks: 4
cluster: {chips_per_server: 1}
steps: 300
seed: 21
training:
  loss: model
  optimizer: {type: sgd, lr: 5.0e-5}
  allreduce: {algorithm: ring, accumulation: fp32}
probes:
  mode: statistics
  watch_points: ["*/gradient/reduced", "*/updated"]
  consistency: {enabled: true, reference_rank: 0, mode: statistics, tolerance: 1.0e-3}
)");
  const test::CmdResult one = test::shell(probelab("run job.yaml --no-trace --no-baseline --out one"), dir);
  ASSERT_EQ(one.code, 0) << one.err << one.out;
  const test::CmdResult two = test::shell(probelab("run job.yaml --no-trace --no-baseline --partitions 2 --out two"), dir);
  ASSERT_EQ(two.code, 0) << two.err << two.out;
  for (const std::string f : {"report.json", "summary.txt", "report.html", "dump/rank1/dump.json", "dump/rank2/dump.json"}) {
    const std::string x = test::slurp(dir.path() / "one" / "job" / f), y2 = test::slurp(dir.path() / "two" / "job" / f);
    ASSERT_FALSE(x.empty()) << f;
    EXPECT_TRUE(x == y2) << f << " differs between one process and two";
  }
}

TEST(DistributedRun, FullCapturesGiveTheOneProcessBytesOverTwoAndFourProcesses) {
  // Full captures of every tensor on 4 one-chip servers (--partitions, no mpirun needed): each
  // kernel's output dump goes to its chip's capture DMA engine, which resumes at the instants its
  // stream does (a job's issue time is the stream's time) and meets it at the HBM model and the
  // capture unit, both served in call order. The kernel resumes processes woken at one instant in
  // an order shaped by every event it holds, so one process and a partition served them in
  // different orders (records swapped or a few cycles late, ranks up to 9 cycles off).
  for (const char* capture : {"{ping_pong: true}", "{buffer_bytes: 4096, ping_pong: false, overrun: stall}"}) {
    TempDir dir;
    dir.write("job.yaml", std::string("name: job\nmodel: mlp\nmode: training\nranks: 4\nsteps: 2\nseed: 8\n"
                                      "cluster: {chips_per_server: 1}\ntraining:\n  allreduce: {algorithm: ring}\n"
                                      "probes:\n  mode: full\n  watch_points: [\"*\"]\n  capture: ") +
                              capture + "\n");
    const test::CmdResult one = test::shell(probelab("run job.yaml --out one"), dir);
    ASSERT_EQ(one.code, 0) << one.err << one.out;
    for (const char* k : {"2", "4"}) {
      const std::string out = std::string("p") + k;
      const test::CmdResult r = test::shell(probelab("run job.yaml --partitions " + std::string(k) + " --out " + out), dir);
      ASSERT_EQ(r.code, 0) << r.err << r.out;
      SCOPED_TRACE(std::string(capture) + " over " + k + " processes");
      expect_same_outputs(dir, "one", out);
    }
  }
}

TEST(DistributedRun, AValueJumpOnTheOtherServerIsDataCorruptionAsInOneProcess) {
  // The bundled value-jump scenario on two one-chip servers over 2 processes: rank 1's update
  // writes 40000, rank 1's MatMul overflows on it a step later. The diagnosis needs the captured
  // magnitudes of the update's edges from the other process (they did not cross the codec once,
  // and the 2-process run named the MatMul's overflow instead of the update's data corruption).
  TempDir dir;
  const std::string scenario = (test::source_root() / "scenarios/diagnosis/value_jump_weight_update.yaml").string();
  const std::string set = " --set cluster.chips_per_server=1 --no-trace ";
  const test::CmdResult one = test::shell(probelab("run '" + scenario + "'" + set + "--out one"), dir);
  ASSERT_EQ(one.code, 0) << one.err << one.out;
  const test::CmdResult two = test::shell(probelab("run '" + scenario + "'" + set + "--partitions 2 --out two"), dir);
  ASSERT_EQ(two.code, 0) << two.err << two.out;
  for (const char* f : {"report.json", "summary.txt", "report.html"}) {
    const std::string x = test::slurp(dir.path() / "one" / "value_jump_weight_update" / f);
    const std::string y = test::slurp(dir.path() / "two" / "value_jump_weight_update" / f);
    ASSERT_FALSE(x.empty()) << f;
    EXPECT_TRUE(x == y) << f << " differs between one process and two";
  }
  const auto r = nlohmann::json::parse(test::slurp(dir.path() / "two" / "value_jump_weight_update" / "report.json"));
  ASSERT_FALSE(r["diagnosis"].empty());
  EXPECT_EQ(r["diagnosis"][0]["cause"], "data_corruption") << r["diagnosis"][0].dump();
  EXPECT_EQ(r["diagnosis"][0]["op"], "fc2/matmul/weight/update");
}

// The 300-step, 12-rank job killed by --timeout 1: over 2 processes (--partitions, and mpirun when
// installed) it ends as in one process, exit 3 naming the signal, and leaves no scratch directory
// (the coordinator once died of SIGPIPE writing a window grant to a killed partition: exit 141,
// no message, <out>/.slow.partial-<pid>/ left behind).
TEST(DistributedRun, ATimeoutEndsAsInOneProcess) {
  TempDir dir;
  dir.write("slow.yaml", R"(name: slow
model: mlp_loss_scaled
mode: training
ranks: 12
steps: 300
seed: 5
cluster: {chips_per_server: 4}
training:
  loss: model
  optimizer: {type: sgd, lr: 5.0e-5}
  allreduce: {algorithm: hierarchical, inter_algorithm: direct, accumulation: fp16, order: group}
probes:
  mode: statistics
  watch_points: ["*/gradient/reduced"]
  consistency: {enabled: true, reference_rank: 0, mode: statistics}
)");
  std::vector<std::pair<std::string, std::string>> runs = {
      {"one", probelab("run slow.yaml --no-baseline --timeout 1 --out one")},
      {"parts", probelab("run slow.yaml --no-baseline --timeout 1 --partitions 2 --out parts")}};
  if (have_mpirun()) runs.emplace_back("np2", mpirun(2, "run slow.yaml --no-baseline --timeout 1 --out np2"));
  for (const auto& [out, cmd] : runs) {
    const test::CmdResult r = test::shell(cmd, dir);
    EXPECT_EQ(r.code, 3) << out << "\n" << r.err << r.out;
    EXPECT_NE(r.out.find("ended without a result (killed by signal 14 (Alarm clock))"), std::string::npos)
        << out << "\n" << r.out;
    for (const auto& e : std::filesystem::directory_iterator(dir.path() / out))
      EXPECT_EQ(e.path().filename(), "slow") << out << ": left " << e.path();
    const auto report = nlohmann::json::parse(test::slurp(dir.path() / out / "slow" / "report.json"));
    EXPECT_NE(report.dump().find("killed by signal 14"), std::string::npos) << out;
  }
}

TEST(DistributedRun, MoreProcessesThanChipsIsOneMessageAndExitTwo) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun is not installed";
  TempDir dir;
  dir.write("job.yaml", job(2, "{algorithm: ring}"));
  const test::CmdResult r = test::shell(mpirun(3, "run job.yaml --out o"), dir);
  EXPECT_EQ(r.code, 2) << r.err << r.out;
  const std::string msg = "key 'ranks': expected at least 3 chips for 3 processes (one process per chip at most), got 2 "
                          "rank(s) on 1 server(s) of 8 chips";
  const auto first = r.err.find(msg);
  ASSERT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(msg, first + 1), std::string::npos) << "printed by more than one process:\n" << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "o" / "job"));
}

TEST(DistributedRun, JobsThatCannotBePartitionedAreBadInput) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun is not installed";
  TempDir dir;
  // One server of eight chips cannot be shared by two processes without splitting it.
  dir.write("job.yaml", job(8, "{algorithm: ring}"));
  test::CmdResult r = test::shell(mpirun(2, "run job.yaml --out o"), dir);
  EXPECT_EQ(r.code, 2) << r.err << r.out;
  EXPECT_NE(r.err.find("ranks"), std::string::npos) << r.err;
  // An explicit partition map that splits server 0.
  std::string split = ", partition: [0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]";
  dir.write("split.yaml", job(16, "{algorithm: ring}", split));
  r = test::shell(probelab("run split.yaml --out s"), dir);
  EXPECT_EQ(r.code, 2) << r.err << r.out;
  EXPECT_NE(r.err.find("cluster.partition"), std::string::npos) << r.err;
  // Ranks that do not fill whole servers.
  dir.write("odd.yaml", job(12, "{algorithm: hierarchical}"));
  r = test::shell(probelab("run odd.yaml --out odd"), dir);
  EXPECT_EQ(r.code, 2) << r.err << r.out;
}

}  // namespace
}  // namespace probelab::sim
