#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chip_model/trace.h"
#include "tests/support/perfetto_check.h"
#include "tests/support/trace_check.h"

using probelab::chip::Trace;
using nlohmann::json;

namespace {

json parse(const Trace& t) { return json::parse(t.to_json_string()); }

std::string perfetto_bytes(const Trace& t) {
  std::ostringstream s;
  t.write_perfetto(s);
  return s.str();
}

std::map<std::string, int> tids(const json& j, std::uint32_t pid = 0) {
  std::map<std::string, int> m;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == pid) m[e["args"]["name"]] = e["tid"];
  return m;
}

}  // namespace

TEST(Trace, DisabledRecordsNothing) {
  Trace t;
  t.complete(0, "hbm", "read", "hbm", 10, 5);
  t.instant(0, "irq", "raise", "irq", 3);
  t.counter(0, "fill", "bytes", 4, 1.0);
  t.rate(0, "bw", "GB/s", 0, 10, 100);
  t.flow("f", 0, "hbm", 12);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_TRUE(t.rates().empty());
  EXPECT_TRUE(t.flow_points().empty());
}

TEST(Trace, OutputIsIndependentOfInsertionOrder) {
  Trace a(true), b(true);
  a.set_process_name(0, "chip0");
  b.set_process_name(0, "chip0");
  a.complete(0, "core0.cube", "mm", "kernel", 2'000'000, 500'000, {{"tile", std::uint64_t{3}}});
  a.complete(0, "hbm.ch00", "read", "core", 1'500'000, 123);
  a.instant(1, "irq", "raise", "irq", 7);
  a.rate(0, "bw", "GB/s", 0, 250'000, 1000);
  a.rate(0, "bw", "GB/s", 50'000, 100'000, 77);
  b.instant(1, "irq", "raise", "irq", 7);
  b.rate(0, "bw", "GB/s", 50'000, 100'000, 77);
  b.complete(0, "hbm.ch00", "read", "core", 1'500'000, 123);
  b.rate(0, "bw", "GB/s", 0, 250'000, 1000);
  b.complete(0, "core0.cube", "mm", "kernel", 2'000'000, 500'000, {{"tile", std::uint64_t{3}}});
  EXPECT_EQ(a.to_json_string(), b.to_json_string());
  EXPECT_EQ(perfetto_bytes(a), perfetto_bytes(b));
}

TEST(Trace, ChromeTraceFormatInWholeNanoseconds) {
  Trace t(true);
  t.set_process_name(0, "chip0");
  t.complete(0, "core1.mte", "load", "kernel", 1'234'567, 1'000'001, {{"bytes", std::uint64_t{4096}}, {"who", std::string("x")}});
  t.counter(0, "capture buffer fill", "bytes", 5, 42.5);
  const auto j = parse(t);
  EXPECT_FALSE(j.contains("displayTimeUnit")) << "older Perfetto reads displayTimeUnit ns as the unit of ts";
  bool saw_x = false, saw_counter = false;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") {
      saw_x = true;
      EXPECT_EQ(e["name"], "load");
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1.235);  // 1'234'567 ps -> 1235 ns, in microseconds
      EXPECT_DOUBLE_EQ(e["ts"].get<double>() + e["dur"].get<double>(), 2.235);  // end 2'234'568 ps -> 2235 ns
      EXPECT_EQ(e["args"]["bytes"], 4096);
      EXPECT_EQ(e["args"]["who"], "x");
    }
    if (e["ph"] == "C") {
      saw_counter = true;
      EXPECT_EQ(e["name"], "capture buffer fill");
      EXPECT_EQ(e["args"]["bytes"], 42.5);
    }
  }
  EXPECT_TRUE(saw_x);
  EXPECT_TRUE(saw_counter);
  EXPECT_EQ(tids(j).count("core1.mte"), 1u);
}

TEST(Trace, BackToBackSlicesNeverOvershootInDoubles) {
  // The case that dropped slices before: 36.346563 + 0.032223 = 36.378786000000005 in doubles.
  // Random boundaries over a long run: every dur must make ts + dur exactly the next ts.
  Trace t(true);
  std::mt19937_64 rng(5);
  std::uint64_t at = 0;
  for (int i = 0; i < 20000; ++i) {
    const std::uint64_t d = 1 + rng() % 5'000'000;  // up to 5 us, in ps
    t.complete(0, "stream0", "task", "task", at, d);
    at += d;
    if (i % 97 == 0) at += rng() % 100'000'000'000'000;  // jump ahead (up to 100 s) now and then
  }
  const json j = parse(t);
  const auto c = probelab::test::check_json_trace(j);
  EXPECT_TRUE(c.ok()) << c.summary();
  EXPECT_EQ(c.slices, 20000u);
  // and exactly: the double end of each slice is the double start of the next one
  std::vector<std::pair<double, double>> v;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X") v.emplace_back(e["ts"].get<double>(), e["dur"].get<double>());
  int abutting = 0;
  for (std::size_t i = 1; i < v.size(); ++i) {
    const double end = v[i - 1].first + v[i - 1].second;
    EXPECT_LE(end, v[i].first) << i;
    if (std::llround(end * 1000) == std::llround(v[i].first * 1000)) {
      ++abutting;
      EXPECT_EQ(end, v[i].first) << i;
    }
  }
  EXPECT_GT(abutting, 15000);
}

TEST(Trace, ChildEndingWithItsParentNeverEndsAfterItInDoubles) {
  // The case that dropped a slice before: a host step 8.150 us + 23.492 us cannot end exactly at
  // the double of 31.642 (8.15 + 23.491999999999997 = 31.641999999999996), while the synchronize
  // inside it, 12.550 + 19.092, does. Random parents and children sharing their end nanosecond,
  // with siblings abutting: every child ends at or before its parent, every sibling after it.
  Trace t(true);
  std::mt19937_64 rng(11);
  t.complete(0, "main", "step", "host", 8'150'000, 23'492'000);
  t.complete(0, "main", "synchronize", "host", 12'550'000, 19'092'000);
  std::uint64_t at = 40'000'000;  // in ps, whole nanoseconds
  for (int i = 0; i < 5000; ++i) {
    const std::uint64_t len = 1'000 * (2 + rng() % 40'000);   // the parent
    const std::uint64_t child = 1'000 * (1 + rng() % (len / 1'000 - 1));  // starts inside, ends with it
    t.complete(0, "main", "step", "host", at, len);
    t.complete(0, "main", "synchronize", "host", at + child, len - child);
    at += len;  // the next step starts where this one ends
    if (i % 50 == 0) at += 1'000 * (rng() % 1'000'000'000);  // jump ahead now and then
  }
  const json j = parse(t);
  const auto c = probelab::test::check_json_trace(j);
  EXPECT_TRUE(c.ok()) << c.summary();
  EXPECT_EQ(c.slices, 10002u);
}

TEST(Trace, OverlappingSlicesGoToExtraLanesNotDropped) {
  Trace t(true);
  t.complete(0, "dma", "a", "x", 0, 10'000);
  t.complete(0, "dma", "b", "x", 5'000, 10'000);   // overlaps a without nesting
  t.complete(0, "dma", "c", "x", 6'000, 2'000);    // nests in a (lane 1)
  t.complete(0, "dma", "d", "x", 12'000, 10'000);  // overlaps b
  EXPECT_EQ(t.stats().lane_slices, 1u);
  const json j = parse(t);
  const auto m = tids(j);
  ASSERT_EQ(m.count("dma"), 1u);
  ASSERT_EQ(m.count("dma #2"), 1u);
  std::map<std::string, int> tid_of;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X") tid_of[e["name"]] = e["tid"];
  EXPECT_EQ(tid_of["a"], m.at("dma"));
  EXPECT_EQ(tid_of["c"], m.at("dma"));
  EXPECT_EQ(tid_of["b"], m.at("dma #2"));
  EXPECT_EQ(tid_of["d"], m.at("dma"));
  EXPECT_TRUE(probelab::test::check_json_trace(j).ok());
  const auto p = probelab::test::check_perfetto_trace(perfetto_bytes(t));
  EXPECT_TRUE(p.ok()) << p.summary();
  EXPECT_EQ(p.slices, 4u);
}

TEST(Trace, SubNanosecondSlicesStayOnTheirTrack) {
  // 1-cycle spans at 1.85 GHz (540 ps) round boundary by boundary: 0 or 1 ns, never overlapping.
  Trace t(true);
  for (std::uint64_t i = 0; i < 1000; ++i) t.complete(0, "core0.cube", "mm", "kernel", 1'000'000 + i * 540, 540);
  const auto c = probelab::test::check_json_trace(parse(t));
  EXPECT_TRUE(c.ok()) << c.summary();
  EXPECT_EQ(c.slices, 1000u);
  EXPECT_EQ(t.stats().lane_slices, 0u);
}

TEST(Trace, RateCountersAverageOverBinsAndAddUpExactly) {
  Trace t(true);
  t.set_rate_bin_ps(100'000);  // 100 ns
  t.rate(0, "hbm bandwidth", "GB/s", 50'000, 100'000, 1000);  // 1000 B over [50, 150) ns
  t.rate(0, "hbm bandwidth", "GB/s", 300'000, 0, 64);         // an instant transfer
  const auto& bins = t.rates().at({0, "hbm bandwidth"}).bins;
  std::uint64_t total = 0;
  for (const auto& [b, v] : bins) total += v;
  EXPECT_EQ(total, 1064u);
  EXPECT_EQ(bins.at(0), 500u);
  EXPECT_EQ(bins.at(1), 500u);
  EXPECT_EQ(bins.at(3), 64u);
  std::vector<std::pair<double, double>> samples;
  const json j = parse(t);
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "C") samples.emplace_back(e["ts"].get<double>(), e["args"]["GB/s"].get<double>());
  // 5 B/ns over [0, 200) ns, 0 until 300 ns, 0.64 B/ns for one bin, then 0
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples[0], std::make_pair(0.0, 5.0));
  EXPECT_EQ(samples[1], std::make_pair(0.2, 0.0));
  EXPECT_EQ(samples[2], std::make_pair(0.3, 0.64));
  EXPECT_EQ(samples[3], std::make_pair(0.4, 0.0));
}

TEST(Trace, FlowsBindTheEnclosingSliceInBothFormats) {
  Trace t(true);
  t.complete(0, "detect", "nan latched", "exception", 1'000'000, 5'000'000);
  t.complete(1000, "isr", "isr", "exception", 2'000'000, 1'000'000);
  t.complete(1000, "isr", "inner", "exception", 2'200'000, 100'000);
  t.complete(1000, "report", "anomalies[0]", "exception", 3'000'000, 1000);
  t.flow("a0", 1000, "report", 3'000'000);
  t.flow("a0", 0, "detect", 1'000'000);
  t.flow("a0", 1000, "isr", 2'100'000);  // inside "isr", outside "inner": binds "isr"
  t.flow("a1", 0, "nowhere", 1);         // no slice: counted, not written
  const auto st = t.stats();
  EXPECT_EQ(st.flows, 1u);
  EXPECT_EQ(st.unbound_flow_points, 1u);
  EXPECT_EQ(st.mixed_category_flows, 0u);
  const json j = parse(t);
  const auto m0 = tids(j, 0), m1 = tids(j, 1000);
  std::vector<std::tuple<std::string, int, double>> fl;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "s" || e["ph"] == "t" || e["ph"] == "f") fl.emplace_back(e["ph"], e["tid"], e["ts"].get<double>());
  ASSERT_EQ(fl.size(), 3u);
  EXPECT_EQ(fl[0], std::make_tuple(std::string("s"), m0.at("detect"), 1.0));
  EXPECT_EQ(fl[1], std::make_tuple(std::string("t"), m1.at("isr"), 2.0));
  EXPECT_EQ(fl[2], std::make_tuple(std::string("f"), m1.at("report"), 3.0));
  const auto c = probelab::test::check_json_trace(j);
  EXPECT_TRUE(c.ok()) << c.summary();
  const auto p = probelab::test::check_perfetto_trace(perfetto_bytes(t));
  EXPECT_TRUE(p.ok()) << p.summary();
  EXPECT_EQ(p.flows, 1u);
}

TEST(Trace, PerfettoTraceDescribesProcessesTracksAndCounters) {
  namespace pp = perfetto::protos;
  Trace t(true);
  t.set_process_name(0, "chip0");
  t.complete(0, "stream0", "kernel", "task", 1'000, 9'000, {{"op_id", std::uint64_t{4}}, {"x", -2.5}});
  t.complete(0, "stream0", "inner", "task", 2'000, 1'000);
  t.instant(0, "irq", "raise", "irq", 3'000);
  t.counter(0, "capture buffer fill", "bytes", 4'000, 128.0);
  pp::Trace tr;
  ASSERT_TRUE(tr.ParseFromString(perfetto_bytes(t)));
  std::map<std::string, std::uint64_t> uuid;
  std::vector<std::string> seq;
  for (const auto& p : tr.packet()) {
    EXPECT_EQ(p.trusted_packet_sequence_id(), 1u);
    if (p.has_track_descriptor()) {
      const auto& d = p.track_descriptor();
      uuid[d.has_process() ? "process " + d.process().process_name() : d.name()] = d.uuid();
    } else if (p.has_track_event()) {
      const auto& e = p.track_event();
      seq.push_back(std::to_string(p.timestamp()) + ":" + std::to_string(e.type()) + ":" + e.name());
      if (e.name() == "kernel") {
        ASSERT_EQ(e.debug_annotations_size(), 2);
        EXPECT_EQ(e.debug_annotations(0).name(), "op_id");
        EXPECT_EQ(e.debug_annotations(0).uint_value(), 4u);
        EXPECT_EQ(e.debug_annotations(1).double_value(), -2.5);
        EXPECT_EQ(e.categories(0), "task");
      }
      if (e.type() == pp::TrackEvent::TYPE_COUNTER) {
        EXPECT_EQ(e.track_uuid(), uuid.at("capture buffer fill bytes"));
        EXPECT_EQ(e.double_counter_value(), 128.0);
      }
    }
  }
  EXPECT_EQ(uuid.count("process chip0"), 1u);
  EXPECT_EQ(uuid.count("stream0"), 1u);
  EXPECT_EQ(uuid.count("irq"), 1u);
  // tracks by name: "irq" before "stream0", so its instant comes first at 3 ns
  const std::vector<std::string> want = {"1:1:kernel", "2:1:inner", "3:3:raise", "3:2:", "4:4:", "10:2:"};
  EXPECT_EQ(seq, want);
}

TEST(Trace, TrackOrderControlsTids) {
  Trace t(true);
  t.complete(0, "b", "x", "", 0, 1);
  t.complete(0, "a", "x", "", 0, 1);
  t.set_track_order(0, "b", 0);
  const auto m = tids(parse(t));
  EXPECT_LT(m.at("b"), m.at("a"));
}

TEST(Trace, ParsesFormatNames) {
  EXPECT_EQ(Trace::parse_format("json"), Trace::Format::Json);
  EXPECT_EQ(Trace::parse_format("perfetto"), Trace::Format::Perfetto);
  EXPECT_THROW(Trace::parse_format("protobuf"), std::invalid_argument);
  EXPECT_STREQ(Trace::file_name(Trace::Format::Perfetto), "trace.pftrace");
}

namespace {

// Records the same timeline on two chips: into `one` (everything) or into per-chip traces.
void record_chip(Trace& t, std::uint32_t pid) {
  t.set_process_name(pid, "chip" + std::to_string(pid));
  t.set_track_order(pid, "collective", -1);
  t.complete(pid, "collective", "AllReduce ring", "collective", 1000 + pid, 5000, {{"comm", std::uint64_t{1}}, {"seq", std::uint64_t{0}}});
  t.complete(pid, "link->r1", "xfer", "link", 20'000, 15'000, {{"bytes", std::uint64_t{4096}}, {"ratio", 0.5}, {"tag", std::string("a")}});
  t.complete(pid, "link->r1", "xfer", "link", 25'000, 15'000, {{"delta", std::int64_t{-3}}});  // overlaps: an extra lane
  t.instant(pid, "irq", "latch", "exception", 3000);
  t.counter(pid, "capture buffer fill", "bytes", 2000, 64.0 + pid);
  t.rate(pid, "link tx bandwidth", "GB/s", 2000, 250'000, 4096);
  t.rate(0, "shared bandwidth", "GB/s", 1000 * pid, 90'000, 1000 + pid);  // one counter fed by both
  t.flow("collective 1:0", pid, "collective", 1500 + pid);
}

}  // namespace

// A distributed run records each chip in its own process; the partitions' traces, serialized and
// appended in partition order, give the one-process bytes (slices, lanes, counters, rates, flows).
TEST(Trace, PartitionTracesMergeIntoTheOneProcessBytes) {
  Trace one(true), a(true), b(true);
  record_chip(one, 0);
  record_chip(one, 1);
  record_chip(a, 0);
  record_chip(b, 1);
  const std::string expect_json = one.to_json_string(), expect_pf = perfetto_bytes(one);
  ASSERT_EQ(one.stats().flows, 1u);
  ASSERT_GT(one.stats().lane_slices, 0u);

  Trace merged(true);
  merged.append_serialized(a.serialize());
  merged.append_serialized(b.serialize());
  EXPECT_EQ(merged.to_json_string(), expect_json);
  EXPECT_EQ(perfetto_bytes(merged), expect_pf);

  Trace moved(true);  // the one-process path: no encoding
  moved.append(std::move(a));
  moved.append(std::move(b));
  EXPECT_EQ(moved.to_json_string(), expect_json);
  EXPECT_EQ(a.size(), 0u);

  // The merge is not vacuous: leaving out one partition's flow points or rates changes the file.
  Trace c(true), d(true);
  record_chip(c, 0);
  record_chip(d, 1);
  std::vector<std::uint8_t> bytes = d.serialize();
  Trace lossy(true);
  lossy.append_serialized(c.serialize());
  d.clear();
  d.set_process_name(1, "chip1");
  lossy.append_serialized(d.serialize());
  EXPECT_NE(lossy.to_json_string(), expect_json);

  Trace bad(true);
  bytes.resize(bytes.size() - 3);
  EXPECT_THROW(bad.append_serialized(bytes), std::runtime_error);
  Trace other_bin(true);
  other_bin.set_rate_bin_ps(1000);
  EXPECT_THROW(other_bin.append_serialized(c.serialize()), std::runtime_error);
}

// A counter's value prints as the JSON library prints the same double, for doubles of every
// form: random bit patterns (subnormals, huge, negative), integers, short decimals, not finite.
TEST(Trace, CounterValuesPrintAsTheLibraryDoes) {
  std::mt19937_64 gen(20261206);
  std::vector<double> values = {0.0, -0.0, 1.0, -1.0, 0.1, 1e21, 1e22, 1e-7, 123456789.0, 4.9e-324, 1.7976931348623157e308,
                                std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()};
  for (int i = 0; i < 3000; ++i) {
    const std::uint64_t bits = gen();
    double d = 0;
    std::memcpy(&d, &bits, sizeof d);
    values.push_back(i % 3 == 0 ? d : i % 3 == 1 ? static_cast<double>(static_cast<std::int64_t>(bits >> 11)) - 4e15
                                                 : static_cast<double>(bits % 100000) / 1000.0);
  }
  Trace t(true);
  for (std::size_t i = 0; i < values.size(); ++i) t.counter(0, "level", "v", (i + 1) * 1000, values[i]);
  const json all = json::parse(t.to_json_string(), nullptr, true, true);
  std::istringstream lines(t.to_json_string());
  std::string line;
  std::size_t checked = 0;
  while (std::getline(lines, line)) {
    const std::size_t at = line.find("{\"args\":{\"v\":");
    if (at == std::string::npos) continue;
    const std::size_t end = line.find('}', at);
    const std::string text = line.substr(at + 13, end - at - 13);
    const json v = json::parse(text);
    EXPECT_EQ(text, v.dump()) << text;
    ++checked;
  }
  // Consecutive equal values are one sample; every other one was checked.
  EXPECT_GT(checked, values.size() * 9 / 10);
  EXPECT_TRUE(all.contains("traceEvents"));
}

// Every event line is what the JSON library writes for the same object (keys sorted, strings
// escaped, a repeated argument keeping its last value, numbers as it prints them), followed by
// "ts" (and "dur") as exact decimals: strings that need escaping, UTF-8, doubles of every form.
TEST(Trace, EventTextIsTheLibrarysDumpOfTheSameObject) {
  Trace t(true);
  t.set_process_name(0, "chip \"0\"");
  t.complete(0, "cube\tpipe", "mat\"mul\\1\n", "kernel", 1'234'567, 89'000,
             {{"zeta", std::int64_t{-5}}, {"alpha", std::uint64_t{18'446'744'073'709'551'615u}}, {"mid", 0.1},
              {"alpha", std::string("last wins")}, {"ctl", std::string("a\x01z\x7f")}, {"utf", std::string("\xc3\xa9t\xc3\xa9")}});
  t.complete(0, "cube\tpipe", "inner", "", 1'240'000, 1'000, {{"d", 1e-7}, {"e", -0.0}, {"f", 1e21}, {"g", 123456789.0}});
  t.instant(0, "irq", "raise \xe2\x86\x92", "irq", 3'000, {{"n", std::numeric_limits<double>::quiet_NaN()}});
  t.complete(0, "irq", "isr", "irq", 2'500, 1'000);
  t.counter(0, "fill", "bytes", 4'000, 2.5e-5);
  t.flow("k", 0, "cube\tpipe", 1'240'500);
  t.flow("k", 0, "irq", 3'000);
  std::istringstream lines(t.to_json_string());
  std::string line;
  int events = 0, metadata = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("{\"traceEvents\":[", 0) == 0) line.erase(0, 16);
    if (line.size() >= 3 && line.compare(line.size() - 3, 3, "]}\n") == 0) line.resize(line.size() - 3);
    if (line.size() >= 2 && line.compare(line.size() - 2, 2, "]}") == 0) line.resize(line.size() - 2);
    if (!line.empty() && line.back() == ',') line.pop_back();
    if (line.empty()) continue;
    const std::size_t ts = line.find(",\"ts\":");
    if (ts == std::string::npos) {  // metadata events: the whole line
      EXPECT_EQ(line, json::parse(line).dump()) << line;
      ++metadata;
      continue;
    }
    json j = json::parse(line);
    j.erase("ts");
    j.erase("dur");
    EXPECT_EQ(line.substr(0, ts) + "}", j.dump()) << line;
    ++events;
  }
  EXPECT_EQ(events, 3 + 1 + 1 + 2);  // three slices, the instant, the counter, two flow steps
  EXPECT_EQ(metadata, 1 + 2 * 2);    // the process name; name and sort index of the two tracks
  const json all = parse(t);
  for (const auto& e : all["traceEvents"])
    if (e["name"] == "mat\"mul\\1\n") {
      EXPECT_EQ(e["args"]["alpha"], "last wins");
      EXPECT_EQ(e["args"]["utf"], "\xc3\xa9t\xc3\xa9");
      EXPECT_EQ(e["ts"].get<double>(), 1.235);  // ns-rounded microseconds
    }
}
