// A job hang as users meet it: ZeRO-1 with dynamic loss scaling whose found_inf is not
// all-reduced. The rank that overflows alone skips its update and the update's all-gathers, so at
// the next call number it runs the next step's reduce-scatter while its peers run an all-gather:
// real ranks hang there until the driver's timeout. The run reports it (status "hang", exit 1),
// names where every rank is blocked and why (the first step whose skip decisions differ), keeps
// what completed before (losses per rank), and a `hang` expectation can ask for it (exit 0).
// With found_inf all-reduced the same job finishes. The report does not depend on how the chips
// are spread over processes.
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/cli/cli_test_util.h"
#include "tests/sim/sim_test_util.h"

namespace probelab::sim {
namespace {

using nlohmann::json;
using test::TempDir;

std::string zero_job(const std::string& name, int ranks, int rank, int step, bool all_reduce,
                     const std::string& expectations = "") {
  return "name: " + name + "\nmodel: mlp_loss_scaled\nmode: training\nranks: " + std::to_string(ranks) +
         "\nsteps: 4\nseed: 52\ncluster: {exec_timeout_ms: 20}\ntraining:\n  loss: model\n  optimizer: {type: sgd, lr: 0.05}\n  sharding: zero1\n"
         "  loss_scaling: {scale_op: scaled_loss, initial: 1024, growth_interval: 1000, all_reduce: " +
         (all_reduce ? "true" : "false") + "}\ninjections:\n  - {kind: status_rank_overflow, op: fc1/matmul, step: " +
         std::to_string(step) + ", rank: " + std::to_string(rank) + "}\n" + expectations;
}

json report(const TempDir& dir, const std::string& out, const std::string& name) {
  return json::parse(test::slurp(dir.path() / out / name / "report.json"));
}

TEST(JobHang, ZeroOneWithAnUnsharedSkipDecisionHangsAndSaysWhy) {
  TempDir dir;
  dir.write("hang.yaml", zero_job("hang", 2, 1, 2, false));
  const test::CmdResult r = test::run("run hang.yaml --no-baseline --out o", dir);
  EXPECT_EQ(r.code, 1) << r.out << r.err;  // the simulated job failed, not the simulator
  EXPECT_NE(r.out.find("job hang at cycle"), std::string::npos) << r.out;
  const json rep = report(dir, "o", "hang");
  ASSERT_EQ(rep.at("status"), "hang");
  const json& h = rep.at("hang");
  ASSERT_EQ(h.at("blocked").size(), 2u) << h.dump(1);
  const json& r0 = h.at("blocked")[0];
  const json& r1 = h.at("blocked")[1];
  // r0 gathers its updated shards of step 2; r1 skipped them and reduce-scatters step 3's gradients.
  EXPECT_EQ(r0.at("rank"), 0);
  EXPECT_EQ(r0.at("step"), 2);
  EXPECT_NE(r0.at("op").get<std::string>().find("allgather"), std::string::npos) << r0.dump();
  EXPECT_EQ(r1.at("rank"), 1);
  EXPECT_EQ(r1.at("step"), 3);
  EXPECT_NE(r1.at("op").get<std::string>().find("reducescatter"), std::string::npos) << r1.dump();
  EXPECT_EQ(r0.at("seq"), r1.at("seq"));
  EXPECT_EQ(r0.at("waits_for"), 1);
  EXPECT_EQ(r1.at("waits_for"), 0);
  EXPECT_LT(r0.at("since_ps").get<std::uint64_t>(), h.at("time_ps").get<std::uint64_t>());
  EXPECT_NE(h.at("noticed_by").get<std::string>().find("synchronize timeout"), std::string::npos);
  ASSERT_EQ(h.at("explanation").size(), 2u) << h.dump(1);
  EXPECT_NE(h.at("explanation")[0].get<std::string>().find("went apart"), std::string::npos);
  EXPECT_NE(h.at("explanation")[1].get<std::string>().find("step 2: r1 skipped"), std::string::npos);
  EXPECT_NE(h.at("explanation")[1].get<std::string>().find("all_reduce: false"), std::string::npos);
  // What completed before: r0 finished steps 0-1, r1 steps 0-2.
  EXPECT_EQ(rep.at("losses")[0].size(), 2u);
  EXPECT_EQ(rep.at("losses")[1].size(), 3u);
  EXPECT_NE(test::slurp(dir.path() / "o/hang/summary.txt").find("job hang"), std::string::npos);
}

TEST(JobHang, AHangExpectationHoldsOnlyWhereTheJobHangs) {
  TempDir dir;
  dir.write("want.yaml", zero_job("want", 2, 1, 2, false, "expectations:\n  - hang: {rank: 1, step: 3, apart: true}\n"));
  dir.write("elsewhere.yaml", zero_job("elsewhere", 2, 1, 2, false, "expectations:\n  - hang: {rank: 0, step: 3}\n"));
  dir.write("finished.yaml", zero_job("finished", 2, 1, 2, true, "expectations:\n  - hang: true\n"));
  EXPECT_EQ(test::run("run want.yaml --no-baseline --out o", dir).code, 0);
  EXPECT_EQ(test::run("run elsewhere.yaml --no-baseline --out o", dir).code, 1);  // r0 is blocked at step 2
  const test::CmdResult f = test::run("run finished.yaml --no-baseline --out o", dir);
  EXPECT_EQ(f.code, 1) << f.out;
  const json rep = report(dir, "o", "finished");
  EXPECT_EQ(rep.at("status"), "ok");
  EXPECT_FALSE(rep.contains("hang"));
  EXPECT_EQ(rep.at("expectations")[0].at("actual"), "the job finished");
}

TEST(JobHang, BadHangExpectationsAreBadInput) {
  TempDir dir;
  dir.write("key.yaml", zero_job("key", 2, 1, 2, false, "expectations:\n  - hang: {ranks: 1}\n"));
  dir.write("rank.yaml", zero_job("rank", 2, 1, 2, false, "expectations:\n  - hang: {rank: 2}\n"));
  for (const char* f : {"key.yaml", "rank.yaml"}) {
    const test::CmdResult r = test::run(std::string("run ") + f + " --out o", dir);
    EXPECT_EQ(r.code, 2) << f << r.err;
    EXPECT_NE(r.err.find(f), std::string::npos) << r.err;
  }
}

// Every rank and step of a 4-rank job: the rank that skips is blocked at the next step's
// reduce-scatter while the others all-gather; after the last step's skip it has nothing left to
// run and returns, and the others wait for it (no rank is at another collective: only the
// loss-scaling decisions explain it).
TEST(JobHang, EveryRankAndStepOfTheSkipIsNamed) {
  TempDir dir;
  for (int rank = 0; rank < 4; ++rank)
    for (int step = 0; step < 4; ++step) {
      const std::string name = "r" + std::to_string(rank) + "s" + std::to_string(step);
      dir.write(name + ".yaml", zero_job(name, 4, rank, step, false));
      const test::CmdResult r = test::run("run " + name + ".yaml --no-baseline --no-trace --out o", dir);
      ASSERT_EQ(r.code, 1) << name << r.out << r.err;
      const json rep = report(dir, "o", name);
      ASSERT_EQ(rep.at("status"), "hang") << name;
      const json& h = rep.at("hang");
      const std::string why = h.at("explanation").dump();
      EXPECT_NE(why.find("step " + std::to_string(step) + ": r" + std::to_string(rank) + " skipped"), std::string::npos)
          << name << why;
      EXPECT_EQ(why.find("went apart") != std::string::npos, step < 3) << name << why;
      EXPECT_EQ(why.find("r" + std::to_string(rank) + "'s program returned at cycle") != std::string::npos, step == 3)
          << name << why;
      std::set<int> blocked;
      for (const auto& b : h.at("blocked")) {
        blocked.insert(b.at("rank").get<int>());
        const bool skipper = b.at("rank") == rank;
        EXPECT_EQ(b.at("step"), skipper ? step + 1 : step) << name << b.dump();
        EXPECT_NE(b.at("op").get<std::string>().find(skipper ? "reducescatter" : "allgather"), std::string::npos)
            << name << b.dump();
      }
      EXPECT_EQ(blocked.size(), step < 3 ? 4u : 3u) << name << h.dump();
      EXPECT_EQ(blocked.count(rank), step < 3 ? 1u : 0u) << name;
      EXPECT_EQ(h.at("waiting").size(), blocked.size()) << name;
    }
}

// A link that dies (link_down) on 16 ranks over two servers, hierarchical all-reduce: a link the
// algorithm sends on (an HCCS ring neighbour, a NIC to the partner server) hangs the job and the
// report names it and only it; a link it never uses (HCCS to a non-neighbour, or backwards on the
// ring), or one that dies after the job, leaves the run as it was.
TEST(JobHang, ADeadLinkHangsTheJobOnlyWhereItIsUsed) {
  TempDir dir;
  struct Case {
    int src, dst;
    std::uint64_t cycle;
    bool hangs;
  };
  const std::vector<Case> cases = {{2, 3, 100000, true},  {9, 10, 450000, true},   {3, 11, 800000, true},
                                   {12, 4, 300000, true}, {15, 8, 600000, true},   {2, 6, 100000, false},
                                   {3, 2, 100000, false}, {5, 13, 5000000, false}};
  for (const Case& c : cases) {
    const std::string name = fmt::format("d{}_{}_{}", c.src, c.dst, c.cycle);
    dir.write(name + ".yaml",
              "name: " + name +
                  "\nmodel: mlp_loss_scaled\nmode: training\nranks: 16\nsteps: 3\nseed: 8\ncluster: {exec_timeout_ms: 20}\n"
                  "training:\n  loss: model\n  optimizer: {type: sgd, lr: 5.0e-5}\n  allreduce: {algorithm: hierarchical}\n"
                  "injections:\n  - {kind: link_down, src: " + std::to_string(c.src) + ", dst: " + std::to_string(c.dst) +
                  ", cycle: " + std::to_string(c.cycle) + "}\n");
    const test::CmdResult r = test::run("run " + name + ".yaml --no-baseline --no-trace --out o", dir);
    EXPECT_EQ(r.code, c.hangs ? 1 : 0) << name << r.out << r.err;
    const json rep = report(dir, "o", name);
    EXPECT_EQ(rep.at("status"), c.hangs ? "hang" : "ok") << name;
    EXPECT_TRUE(rep.at("injections")[0].at("fired").get<bool>()) << name;
    if (!c.hangs) continue;
    const json& h = rep.at("hang");
    ASSERT_FALSE(h.at("lost").empty()) << name;
    const std::string link = h.at("lost")[0].at("link");
    EXPECT_TRUE(link.starts_with("r" + std::to_string(c.src) + " ")) << name << link;
    for (const auto& l : h.at("lost")) {
      EXPECT_EQ(l.at("link"), link) << name;
      EXPECT_EQ(l.at("src"), c.src) << name;
      EXPECT_GE(l.at("cycle").get<std::uint64_t>(), c.cycle) << name;
    }
    EXPECT_NE(h.at("explanation")[0].get<std::string>().find("link " + link + " is down"), std::string::npos)
        << name << h.at("explanation").dump();
  }
}

// 16 ranks on two servers, rank 11 alone overflows at step 1: one partition holds the rank that
// went apart, the other only ranks waiting for it; the reports are the same bytes.
TEST(JobHang, PartitionsReportTheSameHang) {
  TempDir dir;
  dir.write("h16.yaml", zero_job("h16", 16, 11, 1, false, "expectations:\n  - hang: {rank: 11, step: 2, apart: true}\n"));
  ASSERT_EQ(test::run("run h16.yaml --no-baseline --out one", dir).code, 0);
  ASSERT_EQ(test::run("run h16.yaml --no-baseline --partitions 2 --out two", dir).code, 0);
  for (const char* f : {"report.json", "summary.txt", "trace.json"})
    EXPECT_TRUE(test::slurp(dir.path() / "one/h16" / f) == test::slurp(dir.path() / "two/h16" / f)) << f;
  const json h = report(dir, "one", "h16").at("hang");
  EXPECT_EQ(h.at("blocked").size(), 16u);
  EXPECT_NE(h.at("summary").get<std::string>().find("r0-r10, r12-r15 at"), std::string::npos) << h.at("summary");
}

}  // namespace
}  // namespace probelab::sim
