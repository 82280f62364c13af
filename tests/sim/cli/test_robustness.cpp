// What a run leaves behind when it is killed or interrupted, what it writes, and what it reports:
// workers die with the run (kill -9 and SIGTERM, also of a campaign), previous complete results stay until new ones
// are complete, scratch directories of dead runs are removed, fetched outputs whose names collide
// are all kept, losses of capture records and watch points that select nothing are reported, and
// a simulation that fails for another reason than its input exits with 3.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/cli/cli_test_util.h"

namespace probelab::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::TempDir;

// A scenario slow enough to be caught while it runs (several seconds on a loaded 2-core machine).
std::string slow_scenario(const std::string& name) {
  return "name: " + name +
         "\nmodel: transformer_block\nchip: tiny\nmode: training\nsteps: 400\nseed: 1\n"
         "probes: {mode: full, watch_points: ['*']}\n";
}

// Starts probelab in `dir` as a child of this test, stdout/stderr into files; returns its pid.
pid_t spawn(const TempDir& dir, std::vector<std::string> args) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::chdir(dir.path().c_str()) != 0) ::_exit(127);
    const std::string out = (dir.path() / "spawn.out").string(), err = (dir.path() / "spawn.err").string();
    std::FILE* o = std::freopen(out.c_str(), "w", stdout);
    std::FILE* e = std::freopen(err.c_str(), "w", stderr);
    (void)o;
    (void)e;
    ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
    ::setenv("PROBELAB_SOURCE_DIR", test::source_root().c_str(), 1);
    std::vector<char*> argv;
    std::string bin = PROBELAB_BINARY;
    argv.push_back(bin.data());
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

// Children of `pid` (from /proc).
std::set<pid_t> children_of(pid_t pid) {
  std::set<pid_t> out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  pid_t c;
  while (in >> c) out.insert(c);
  return out;
}

bool alive(pid_t pid) {
  // A zombie (dead, not reaped by its parent) counts as dead.
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  const auto rp = line.rfind(')');
  return rp != std::string::npos && rp + 2 < line.size() && line[rp + 2] != 'Z';
}

template <class F>
bool wait_for(F&& cond, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Kills a running `probelab run` with `sig` once its workers run; returns them.
std::set<pid_t> kill_mid_run(const TempDir& dir, const std::vector<std::string>& args, int sig, int& status) {
  const pid_t pid = spawn(dir, args);
  std::set<pid_t> workers;
  EXPECT_TRUE(wait_for(
      [&] {
        workers = children_of(pid);
        return !workers.empty();
      },
      60))
      << "no worker started";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let them write
  ::kill(pid, sig);
  ::waitpid(pid, &status, 0);
  return workers;
}

TEST(Robustness, KillNineEndsTheWorkersAndKeepsThePreviousResults) {
  TempDir dir;
  dir.write("slow.yaml", slow_scenario("slow"));
  // A complete earlier result of the same scenario (fewer steps: quick).
  ASSERT_EQ(test::run("run slow.yaml --out out --set steps=2 --no-baseline", dir).code, 0);
  const std::string before = test::slurp(dir.path() / "out/slow/report.json");
  ASSERT_FALSE(before.empty());
  int status = 0;
  const auto workers = kill_mid_run(dir, {"run", "slow.yaml", "--out", "out", "--jobs", "2"}, SIGKILL, status);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ASSERT_FALSE(workers.empty());
  for (pid_t w : workers) EXPECT_TRUE(wait_for([&] { return !alive(w); }, 10)) << "worker " << w << " outlived the run";
  // The previous results are untouched: the killed run only wrote its own scratch directory.
  EXPECT_EQ(test::slurp(dir.path() / "out/slow/report.json"), before);
  std::vector<std::string> names = entries(dir.path() / "out");
  ASSERT_EQ(names.size(), 2u) << ::testing::PrintToString(names);
  EXPECT_EQ(names[1], "slow");
  EXPECT_EQ(names[0].rfind(".slow.partial-", 0), 0u) << names[0];
  // The next run removes that scratch directory and replaces the results only when complete.
  ASSERT_EQ(test::run("run slow.yaml --out out --set steps=3 --no-baseline", dir).code, 0);
  EXPECT_EQ(entries(dir.path() / "out"), std::vector<std::string>{"slow"});
  const json rep = json::parse(test::slurp(dir.path() / "out/slow/report.json"));
  EXPECT_EQ(rep["scenario"]["steps"], 3);
}

TEST(Robustness, SigtermEndsTheWorkersAndRemovesTheScratch) {
  TempDir dir;
  dir.write("slow.yaml", slow_scenario("slow"));
  for (int sig : {SIGTERM, SIGINT}) {
    int status = 0;
    const auto workers = kill_mid_run(dir, {"run", "slow.yaml", "--out", "out"}, sig, status);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "status " << status;
    for (pid_t w : workers) EXPECT_TRUE(wait_for([&] { return !alive(w); }, 10)) << "worker " << w << " outlived the run";
    EXPECT_TRUE(entries(dir.path() / "out").empty()) << ::testing::PrintToString(entries(dir.path() / "out"));
  }
}

TEST(Robustness, SigtermEndsACampaignAndRemovesItsScratch) {
  TempDir dir;
  // Statistics only and fewer steps: the golden run comes first and must not take the budget.
  dir.write("slow.yaml",
            "name: slow\nmodel: transformer_block\nchip: tiny\nmode: training\nsteps: 60\nseed: 1\n"
            "probes: {mode: statistics, watch_points: ['*']}\n"
            "campaign: {trials: 6, golden_runs: 1, faults: [{kind: nan}]}\n");
  auto scratch = [&] {
    std::vector<std::string> found;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir.path() / "c", ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      if (it->path().filename().string().rfind("work.", 0) == 0) found.push_back(it->path().string());
    return found;
  };
  const pid_t pid = spawn(dir, {"campaign", "slow.yaml", "--out", "c", "--jobs", "1"});
  ASSERT_TRUE(wait_for([&] { return !scratch().empty(); }, 120)) << "no trial started";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::set<pid_t> workers = children_of(pid);
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "status " << status;
  for (pid_t w : workers) EXPECT_TRUE(wait_for([&] { return !alive(w); }, 10)) << "worker " << w << " outlived the run";
  EXPECT_TRUE(scratch().empty()) << ::testing::PrintToString(scratch());
  EXPECT_TRUE(fs::exists(dir.path() / "c" / "campaign.json"));  // what --resume needs stays
}

// A model with a 64x128 FP16 output (16 KiB, larger than a 4 KiB capture buffer) and another.
const char* const kBigAndSmall = R"(name: m
inputs:
  - {name: x, shape: [64, 128]}
ops:
  - {name: big, type: Relu, inputs: [x]}
  - {name: small, type: Sigmoid, inputs: [x]}
outputs: [big, small]
)";

TEST(Robustness, OutputsWhoseNamesCollideAreAllKept) {
  TempDir dir;
  dir.write("m.yaml", R"(name: m
inputs:
  - {name: x, shape: [2, 4]}
ops:
  - {name: a/b, type: Relu, inputs: [x]}
  - {name: a.b, type: Sigmoid, inputs: [x]}
outputs: [a/b, a.b]
)");
  dir.write("s.yaml", "name: s\nmodel: m.yaml\nchip: tiny\n");
  ASSERT_EQ(test::run("run s.yaml", dir).code, 0);
  const fs::path d = dir.path() / "out/s/outputs/rank0";
  const json index = json::parse(test::slurp(d / "outputs.json"));
  ASSERT_EQ(index.size(), 2u) << index.dump();
  EXPECT_EQ(index["a.b"], "a.b.npy");
  EXPECT_EQ(index["a/b"], "a.b#2.npy");
  EXPECT_TRUE(fs::exists(d / "a.b.npy"));
  EXPECT_TRUE(fs::exists(d / "a.b#2.npy"));
  EXPECT_NE(test::slurp(d / "a.b.npy"), test::slurp(d / "a.b#2.npy"));  // Relu vs Sigmoid of the same input
}

// A 300-character output and op name (an exporter's generated name): the run passes (it stopped
// with exit 3 on a file name too long), its outputs and dumps under shortened names, with a
// checkpoint taken and read back by `probelab replay`.
TEST(Robustness, LongTensorNamesGetShortFileNames) {
  TempDir dir;
  const std::string op(300, 'o');
  dir.write("m.yaml", "name: m\ninputs:\n  - {name: x, shape: [2, 4]}\nops:\n  - {name: " + op +
                          ", type: Relu, inputs: [x]}\noutputs: [" + op + "]\n");
  dir.write("s.yaml", "name: s\nmodel: m.yaml\nchip: tiny\nsteps: 2\ncheckpoints: {every: 1}\n"
                      "probes: {mode: full, watch_points: [\"*\"]}\n");
  const test::CmdResult r = test::run("run s.yaml", dir);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const fs::path d = dir.path() / "out/s/outputs/rank0";
  const json index = json::parse(test::slurp(d / "outputs.json"));
  ASSERT_EQ(index.size(), 1u) << index.dump();
  const std::string file = index[op].get<std::string>();
  EXPECT_LT(file.size(), 160u);
  EXPECT_TRUE(fs::exists(d / file));
  const json dump = json::parse(test::slurp(dir.path() / "out/s/dump/rank0/dump.json"));
  ASSERT_FALSE(dump["entries"].empty());
  for (const auto& e : dump["entries"]) EXPECT_TRUE(fs::exists(dir.path() / "out/s/dump/rank0" / e["file"].get<std::string>()));
  const test::CmdResult rp = test::run("replay out/s --from-step 1 --out again", dir);
  EXPECT_EQ(rp.code, 0) << rp.err << rp.out;
}

TEST(Robustness, CaptureLossesAndEmptyWatchPointsAreReported) {
  TempDir dir;
  dir.write("tinynet.yaml", test::kTinyNet);
  // A full capture of a 64x128 FP16 tensor (16 KiB) cannot fit a 4 KiB buffer.
  dir.write("m.yaml", kBigAndSmall);
  dir.write("oversize.yaml",
            "name: oversize\nmodel: m.yaml\nchip: tiny\nsteps: 2\n"
            "probes:\n  mode: full\n  watch_points: ['big', {name: ghost, match: ['no_such_op*']}]\n"
            "  capture: {buffer_bytes: 4096, overrun: stall}\n");
  test::CmdResult r = test::run("run oversize.yaml", dir);
  EXPECT_EQ(r.code, 0) << r.err;
  json rep = json::parse(test::slurp(dir.path() / "out/oversize/report.json"));
  EXPECT_EQ(rep["capture"]["oversize"], 2) << rep["capture"].dump();
  const std::string warnings = rep["warnings"].dump();
  EXPECT_NE(warnings.find("2 capture record(s) of up to"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("larger than the 4096-byte capture buffer"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("watch point 'ghost' selects no op or tensor"), std::string::npos) << warnings;
  EXPECT_NE(r.out.find("oversize: 2 warning(s)"), std::string::npos) << r.out;
  EXPECT_NE(test::slurp(dir.path() / "out/oversize/summary.txt").find("watch point 'ghost'"), std::string::npos);

  // Every record header corrupted: none is usable, and every one is counted.
  dir.write("corrupt.yaml", "name: corrupt\nmodel: tinynet.yaml\nchip: tiny\nsteps: 2\n"
                            "probes: {mode: statistics, watch_points: ['*']}\n"
                            "injections:\n  - {kind: capture_corrupt, record: all, byte: 0, bit: 3}\n");
  r = test::run("run corrupt.yaml", dir);
  EXPECT_EQ(r.code, 0) << r.err;
  rep = json::parse(test::slurp(dir.path() / "out/corrupt/report.json"));
  const json& c = rep["capture"];
  EXPECT_GT(c["records"].get<int>(), 4) << c.dump();
  EXPECT_EQ(c["drained"], 0) << c.dump();
  EXPECT_EQ(c["corrupt"], c["records"]) << c.dump();
  EXPECT_EQ(c["unaccounted"], 0) << c.dump();
  EXPECT_GT(c["lost_in_corrupt_regions"].get<int>(), 0) << c.dump();
  EXPECT_NE(rep["warnings"].dump().find("capture record(s) were corrupt and not used"), std::string::npos)
      << rep["warnings"].dump();
}

TEST(Robustness, AWarningEveryRankGivesIsReportedOnce) {
  TempDir dir;
  dir.write("m.yaml", kBigAndSmall);
  // Every rank's probe runtime finds the ghost watch point empty; only rank 2 captures `big` in
  // full, which does not fit the buffer.
  dir.write("w.yaml", "name: w\nmodel: m.yaml\nchip: tiny\nranks: 4\nsteps: 2\n"
                      "probes:\n  mode: statistics\n  watch_points: ['small', {name: ghost, match: ['no_such_op*']},\n"
                      "    {name: big_full, match: [big], ranks: [2], mode: full}]\n"
                      "  capture: {buffer_bytes: 4096, overrun: stall}\n");
  const test::CmdResult r = test::run("run w.yaml --no-trace", dir);
  EXPECT_EQ(r.code, 0) << r.err;
  const json rep = json::parse(test::slurp(dir.path() / "out/w/report.json"));
  std::size_t ghost = 0, oversize = 0;
  for (const auto& w : rep["warnings"]) {
    const std::string m = w.get<std::string>();
    if (m.find("watch point 'ghost' selects no op or tensor") != std::string::npos) {
      ++ghost;
      EXPECT_EQ(m, "watch point 'ghost' selects no op or tensor");  // every rank: no rank list
    }
    if (m.find("larger than the 4096-byte capture buffer") != std::string::npos) {
      ++oversize;
      EXPECT_TRUE(m.ends_with(" (rank 2)")) << m;
    }
  }
  EXPECT_EQ(ghost, 1u) << rep["warnings"].dump();
  EXPECT_EQ(oversize, 1u) << rep["warnings"].dump();
}

TEST(Robustness, AFailingSimulationExitsWithThree) {
  TempDir dir;
  dir.write("slow.yaml", slow_scenario("slow"));
  const test::CmdResult r = test::run("run slow.yaml --timeout 1 --no-baseline", dir);
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("simulation error"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace probelab::sim
