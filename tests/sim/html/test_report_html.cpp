// report.html from report.json: every section, deterministic bytes, escaping of names taken from
// models, failed runs, fields the renderer does not know, and a page that stays small for 64 ranks.
#include <chrono>
#include <iostream>

#include <gtest/gtest.h>

#include "sim/html/report_html.h"
#include "tests/sim/html/html_test_util.h"

namespace probelab::html {
namespace {

using nlohmann::json;

bool has(const std::string& html, const std::string& what) { return html.find(what) != std::string::npos; }

TEST(ReportHtml, EverySectionInOrderAndTheSameBytesTwice) {
  const json r = test::small_report();
  const std::string a = report_html(r), b = report_html(r);
  EXPECT_EQ(a, b);
  std::size_t last = 0;
  for (const auto& id : report_sections()) {
    const std::size_t at = a.find("<section id=\"" + id + "\">");
    ASSERT_NE(at, std::string::npos) << id;
    EXPECT_GT(at, last) << id;
    last = at;
  }
  EXPECT_TRUE(has(a, "FAILED"));
  EXPECT_TRUE(has(a, "nan_count &gt; 0"));
  EXPECT_TRUE(has(a, "clamp it"));
  EXPECT_TRUE(has(a, "<svg class=\"propagation\""));
  EXPECT_TRUE(has(a, "data-heatmap=\"divergence-map-data\""));
  EXPECT_TRUE(has(a, "data-heatmap=\"comparison-map-data\""));
  EXPECT_TRUE(has(a, "Failing comparisons (1)"));
  EXPECT_TRUE(has(a, "11.1 %"));  // capture overhead
  EXPECT_TRUE(has(a, "fc1/grad/allreduce"));
  EXPECT_TRUE(has(a, "0x7e00"));  // injection proof
}

TEST(ReportHtml, NamesFromModelsAreEscaped) {
  json r = test::small_report();
  const std::string evil = "<img src=x onerror=alert(1)>";
  r["anomalies"][0]["op"] = evil;
  r["diagnosis"][0]["op"] = evil;
  r["comparisons"][0]["op"] = evil;
  r["scenario"]["description"] = "</script><script>alert(2)</script>";
  const std::string html = report_html(r);
  EXPECT_FALSE(has(html, evil));
  EXPECT_FALSE(has(html, "<script>alert(2)"));
  EXPECT_TRUE(has(html, "&lt;img src=x onerror=alert(1)&gt;"));
}

TEST(ReportHtml, SelfContained) {
  const std::string html = report_html(test::small_report());
  EXPECT_FALSE(has(html, " src="));
  EXPECT_FALSE(has(html, "https://"));
  EXPECT_FALSE(has(html, "stylesheet"));
  // The only URL is the SVG namespace, which names and fetches nothing.
  std::size_t urls = 0;
  for (std::size_t at = html.find("http://"); at != std::string::npos; at = html.find("http://", at + 1)) {
    EXPECT_EQ(html.compare(at, 26, "http://www.w3.org/2000/svg"), 0);
    ++urls;
  }
  EXPECT_GT(urls, 0u);
}

TEST(ReportHtml, AFailedRunStillRendersEverySection) {
  json r = {{"schema", "probelab.report/1"}, {"status", "error"}, {"error", "the simulation process ended"},
            {"bad_input", true}, {"passed", false}, {"scenario", {{"name", "broken"}}}};
  const std::string html = report_html(r);
  for (const auto& id : report_sections()) EXPECT_TRUE(has(html, "<section id=\"" + id + "\">")) << id;
  EXPECT_TRUE(has(html, "class=\"error\""));
  EXPECT_TRUE(has(html, "the simulation process ended"));
  EXPECT_NO_THROW(report_html(json::object()));
  EXPECT_NO_THROW(report_html(json::array()));
}

TEST(ReportHtml, FieldsANewerReportAddsAreShown) {
  json r = test::small_report();
  r["anomalies"][1]["carrier_ranks"] = {1, 2, 3};
  r["anomalies"][1]["role"] = "carrier";
  r["diagnosis"][0]["latch"] = "per-kind";
  const std::string html = report_html(r);
  EXPECT_TRUE(has(html, "<th>carrier_ranks</th>"));
  EXPECT_TRUE(has(html, "1, 2, 3"));
  EXPECT_TRUE(has(html, "<dt>latch</dt><dd>per-kind</dd>"));
  EXPECT_TRUE(has(html, "<g class=\"node carrier\">"));
}

TEST(ReportHtml, SixtyFourRanksStaySmall) {
  // 64 ranks x 120 ops x 3 steps: 23 040 comparisons, 360 divergent edges.
  const json r = test::large_report(64, 120, 3);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string html = report_html(r);
  std::cerr << "rendered in " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
  const std::size_t json_bytes = r.dump().size();
  EXPECT_LT(html.size(), 700u * 1024) << html.size();
  EXPECT_LT(html.size(), json_bytes / 4) << html.size() << " vs report " << json_bytes;
  EXPECT_TRUE(has(html, "rank 63"));
  EXPECT_TRUE(has(html, "Cycles per step"));
  EXPECT_TRUE(has(html, "slowest rank"));  // 64 columns would not fit: fastest/slowest instead
}

}  // namespace
}  // namespace probelab::html
