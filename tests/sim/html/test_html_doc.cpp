// The HTML building blocks: escaping, numbers, JSON inside a script element, generic tables.
#include <gtest/gtest.h>

#include "sim/html/html_doc.h"

namespace probelab::html {
namespace {

using nlohmann::json;

TEST(HtmlDoc, EscapesEveryMarkupCharacter) {
  EXPECT_EQ(escape("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  EXPECT_EQ(escape("plain op/name_1.x"), "plain op/name_1.x");
}

TEST(HtmlDoc, FormatsNumbersAndReportStrings) {
  EXPECT_EQ(num(json(1.0)), "1");
  EXPECT_EQ(num(json(0.000123456)), "0.0001235");
  EXPECT_EQ(num(json(18446744073709551615ull)), "18446744073709551615");
  EXPECT_EQ(num(json(-3)), "-3");
  EXPECT_EQ(num(json("nan")), "nan");
  EXPECT_EQ(num(json("<b>")), "&lt;b&gt;");
  EXPECT_EQ(num(json()), "-");
  EXPECT_EQ(num(0.0), "0");
  EXPECT_EQ(count(1234567), "1\u2009234\u2009567");
  EXPECT_EQ(count(12), "12");
}

TEST(HtmlDoc, ScriptJsonCannotCloseItsElement) {
  const json j = {{"op", "</script><script>alert(1)</script>"}, {"x", {1, 2.5, "<!--"}}};
  const std::string s = script_json(j);
  EXPECT_EQ(s.find('<'), std::string::npos);
  EXPECT_EQ(json::parse(s), j);  // \u003c is the same character to a JSON parser
}

TEST(HtmlDoc, TextShortensLongValuesAndKeepsThemInTheTitle) {
  const std::string long_text(300, 'x');
  const std::string t = text(json(long_text), 20);
  EXPECT_NE(t.find("title=\"" + long_text + "\""), std::string::npos);
  EXPECT_LT(t.size(), 2 * long_text.size());
  EXPECT_EQ(text(json({"a", "b"})), "a, b");
  EXPECT_EQ(text(json({{"k", 1}})), "k=1");
}

TEST(HtmlDoc, JsonTableShowsKeysItDoesNotKnow) {
  const json rows = {{{"op", "a"}, {"step", 1}}, {{"op", "b"}, {"new_field", "seen"}}};
  const std::string t = json_table(rows, {"op", "step"}, 10);
  EXPECT_NE(t.find("<th>op</th><th>step</th><th>new_field</th>"), std::string::npos);
  EXPECT_NE(t.find("seen"), std::string::npos);
  const std::string cut = json_table(rows, {"op"}, 1);
  EXPECT_NE(cut.find("1 more not shown"), std::string::npos);
  EXPECT_EQ(cut.find(">b<"), std::string::npos);
  EXPECT_NE(json_table(json::array(), {}, 5).find("none"), std::string::npos);
}

TEST(HtmlDoc, PageHasNavigationAndNoExternalReference) {
  Page p("t");
  p.section("one", "One", "<p>1</p>");
  p.section("two", "Two & more", "<p>2</p>");
  const std::string html = p.render("<h1>h</h1>", {}, "var x = 1;");
  EXPECT_NE(html.find("<a href=\"#one\">One</a><a href=\"#two\">Two &amp; more</a>"), std::string::npos);
  EXPECT_NE(html.find("<section id=\"two\">"), std::string::npos);
  EXPECT_NE(html.find("<script>\nvar x = 1;"), std::string::npos);
  EXPECT_EQ(html.find("http"), std::string::npos);
  EXPECT_EQ(html.find(" src="), std::string::npos);
}

}  // namespace
}  // namespace probelab::html
