// The trace of a job past a thousand ranks keeps every chip, host and switch in a process of its
// own (chips r, hosts Trace::kHostPid + r, switches Trace::kSwitchPid + s): with hosts at 1000 and
// switches at 2000, chip 1000's tracks went into host 0's process and host 1000's into a switch's.
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chip_model/trace.h"
#include "tests/sim/sim_test_util.h"

namespace probelab::sim {
namespace {

using nlohmann::json;
using test::TempDir;

TEST(TraceProcesses, AThousandAndEightRanksKeepTheirChipsHostsAndSwitchesApart) {
  TempDir dir;
  dir.write("big.yaml",
            "name: big\nmodel: mlp\nchip: tiny\nmode: inference\nranks: 1008\ncluster: {chips_per_server: 8}\n"
            "steps: 1\nseed: 3\n");
  const test::CmdResult r =
      test::probelab("run big.yaml --out out --no-baseline", dir);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const json t = json::parse(test::slurp(dir.path() / "out/big/trace.json"));
  const json& events = t.is_object() ? t["traceEvents"] : t;
  std::map<std::uint64_t, std::set<std::string>> names;   // pid -> process names given
  std::map<std::uint64_t, std::set<std::string>> tracks;  // pid -> thread (track) names
  for (const json& e : events) {
    if (e.value("ph", "") != "M") continue;
    if (e["name"] == "process_name") names[e["pid"]].insert(e["args"]["name"].get<std::string>());
    if (e["name"] == "thread_name") tracks[e["pid"]].insert(e["args"]["name"].get<std::string>());
  }
  for (const auto& [pid, n] : names) EXPECT_EQ(n.size(), 1u) << "pid " << pid << " named twice";
  const std::uint64_t host = chip::Trace::kHostPid;
  EXPECT_EQ(names[1000], std::set<std::string>{"chip1000"});
  EXPECT_EQ(names[1007], std::set<std::string>{"chip1007"});
  EXPECT_EQ(names[host], std::set<std::string>{"host0"});
  EXPECT_EQ(names[host + 1000], std::set<std::string>{"host1000"});
  EXPECT_EQ(names[chip::Trace::kSwitchPid], std::set<std::string>{"switch"});
  // A chip's process holds no host track, a host's no chip track.
  EXPECT_FALSE(tracks[1000].count("main"));
  EXPECT_TRUE(tracks[host].count("main"));
  EXPECT_TRUE(tracks[1000].count("stream0"));
  EXPECT_FALSE(tracks[host].count("stream0"));
}

}  // namespace
}  // namespace probelab::sim
