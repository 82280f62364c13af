// `probelab campaign` as users run it: --help, bad input (exit code 2), the text summary, and the
// same summary.json from one process and from two MPI ranks (mpirun --oversubscribe -np 2).
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/campaign/campaign_fixture.h"

namespace probelab::sim {
namespace {

using test::TempDir;

test::CmdResult sh(const std::string& cmdline, const TempDir& dir) { return test::shell(cmdline, dir); }

std::string probelab(const std::string& args) { return std::string("'") + PROBELAB_BINARY + "' " + args; }

TEST(CampaignCli, HelpAndBadInput) {
  TempDir dir;
  test::CmdResult r = sh(probelab("campaign --help"), dir);
  EXPECT_EQ(r.code, 0) << r.err;
  for (const char* opt : {"--trials", "--jobs", "--seed", "--out", "--resume", "--fault"})
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt << "\n" << r.out;
  dir.write("tinynet.yaml", test::kTinyNet);
  dir.write("plain.yaml", "name: plain\nmodel: tinynet.yaml\nchip: tiny\n");
  r = sh(probelab("campaign plain.yaml --trials 3"), dir);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("campaign.faults"), std::string::npos) << r.err;
  r = sh(probelab("campaign plain.yaml --trials 3 --fault '{kind: nan, ops: [nothing*]}'"), dir);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("nothing*"), std::string::npos) << r.err;
  r = sh(probelab("campaign plain.yaml --trials 3 --fault '{kind: nan, colour: red}'"), dir);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("colour"), std::string::npos) << r.err;
}

TEST(CampaignCli, MpiRanksGiveTheSameSummaryAsOneProcess) {
  TempDir dir;
  test::write_campaign(dir);
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) GTEST_SKIP() << "mpirun is not installed";
  test::CmdResult one = sh(probelab("campaign camp.yaml --trials 6 --out one"), dir);
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_NE(one.out.find("coverage"), std::string::npos) << one.out;
  EXPECT_NE(one.err.find("6/6 trials"), std::string::npos) << one.err;
  test::CmdResult mpi = sh(test::mpirun_prefix(2) +
                      probelab("campaign camp.yaml --trials 6 --out mpi"),
                  dir);
  ASSERT_EQ(mpi.code, 0) << mpi.err << mpi.out;
  EXPECT_NE(mpi.err.find("2 MPI ranks"), std::string::npos) << mpi.err;
  const std::string a = test::slurp(dir.path() / "one" / "summary.json"), b = test::slurp(dir.path() / "mpi" / "summary.json");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  EXPECT_EQ(test::slurp(dir.path() / "one" / "trials.csv"), test::slurp(dir.path() / "mpi" / "trials.csv"));
  // Rank 1 ran the odd trials: both ranks contributed.
  EXPECT_EQ(nlohmann::json::parse(b)["trials_done"], 6);
}

}  // namespace
}  // namespace probelab::sim
