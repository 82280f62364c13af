#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chip_model/trace.h"

using probelab::chip::Trace;

TEST(Trace, DisabledRecordsNothing) {
  Trace t;
  t.complete(0, "hbm", "read", "hbm", 10, 5);
  t.instant(0, "irq", "raise", "irq", 3);
  t.counter(0, "fill", 4, 1.0);
  EXPECT_EQ(t.size(), 0u);
}

TEST(Trace, OutputIsIndependentOfInsertionOrder) {
  Trace a(true), b(true);
  a.set_process_name(0, "chip0");
  b.set_process_name(0, "chip0");
  a.complete(0, "core0.cube", "mm", "kernel", 2'000'000, 500'000, {{"tile", std::uint64_t{3}}});
  a.complete(0, "hbm", "read", "core", 1'500'000, 123);
  a.instant(1, "irq", "raise", "irq", 7);
  b.instant(1, "irq", "raise", "irq", 7);
  b.complete(0, "hbm", "read", "core", 1'500'000, 123);
  b.complete(0, "core0.cube", "mm", "kernel", 2'000'000, 500'000, {{"tile", std::uint64_t{3}}});
  EXPECT_EQ(a.to_json_string(), b.to_json_string());
}

TEST(Trace, ChromeTraceFormat) {
  Trace t(true);
  t.set_process_name(0, "chip0");
  t.complete(0, "core1.mte", "load", "kernel", 1'234'567, 1'000'001, {{"bytes", std::uint64_t{4096}}, {"who", std::string("x")}});
  t.counter(0, "capture_fill", 5, 42.5);
  const auto j = nlohmann::json::parse(t.to_json_string());
  ASSERT_TRUE(j.contains("traceEvents"));
  bool saw_x = false, saw_thread_name = false, saw_counter = false;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") {
      saw_x = true;
      EXPECT_EQ(e["name"], "load");
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1.234567);  // microseconds
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 1.000001);
      EXPECT_EQ(e["args"]["bytes"], 4096);
      EXPECT_EQ(e["args"]["who"], "x");
      EXPECT_EQ(e["pid"], 0);
    }
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "core1.mte") saw_thread_name = true;
    if (e["ph"] == "C") {
      saw_counter = true;
      EXPECT_EQ(e["args"]["value"], 42.5);
    }
  }
  EXPECT_TRUE(saw_x);
  EXPECT_TRUE(saw_thread_name);
  EXPECT_TRUE(saw_counter);
}

TEST(Trace, TrackOrderControlsTids) {
  Trace t(true);
  t.complete(0, "b", "x", "", 0, 1);
  t.complete(0, "a", "x", "", 0, 1);
  t.set_track_order(0, "b", 0);
  const auto j = nlohmann::json::parse(t.to_json_string());
  int tid_a = -1, tid_b = -1;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") (e["args"]["name"] == "a" ? tid_a : tid_b) = e["tid"];
  EXPECT_LT(tid_b, tid_a);
}
