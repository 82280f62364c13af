// Building blocks of the HTML pages: escaping, number formatting, tables, sections and the page
// shell (inline CSS and script, nothing fetched). Every function is a pure function of its
// arguments, so a page rendered twice from the same JSON has the same bytes.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace probelab::html {

/// Escapes &, <, >, " and ' for text and attribute values.
std::string escape(std::string_view s);

/// A number for display: integers as written, others with `sig` significant digits; "inf",
/// "-inf", "nan" for the non-finite; "-" for null or a missing value. Strings are escaped as they
/// are (report.json writes non-finite numbers as "inf"/"nan" strings).
std::string num(const nlohmann::json& v, int sig = 4);
std::string num(double v, int sig = 4);
/// Integer with thin thousands separators ("1 234 567").
std::string count(std::uint64_t v);
/// Any JSON value as short display text (scalars plain, arrays joined with ", ", objects as
/// key=value), escaped; `max` characters at most (the full text in a title attribute).
std::string text(const nlohmann::json& v, std::size_t max = 160);

/// JSON for a <script type="application/json"> element: '<' written as \u003c so that no
/// "</script>" or "<!--" can end the element early.
std::string script_json(const nlohmann::json& j);

/// A table: header cells are text (escaped here); row cells are HTML (escape what is text).
class Table {
 public:
  explicit Table(std::vector<std::string> header, std::string css_class = {});
  void row(std::vector<std::string> cells, std::string row_class = {});
  std::size_t rows() const { return rows_; }
  std::string render() const;

 private:
  std::string head_, body_, class_;
  std::size_t rows_ = 0;
};

/// A table of JSON objects: the `first` columns (those any row has), then every other key seen,
/// sorted, so fields a newer report adds still show. At most `max_rows` rows (a note says how
/// many were left out). `cell` renders one value (default: text()); `row_class` names a CSS
/// class per row (default none).
using CellFn = std::string (*)(const std::string& key, const nlohmann::json& value);
using RowClassFn = std::string (*)(const nlohmann::json& row);
std::string json_table(const nlohmann::json& rows, const std::vector<std::string>& first, std::size_t max_rows,
                       CellFn cell = nullptr, RowClassFn row_class = nullptr,
                       const std::vector<std::string>& hidden = {});

/// A definition grid of label -> HTML value.
std::string kv_grid(const std::vector<std::pair<std::string, std::string>>& items);
/// <span class="badge CLS">TEXT</span>
std::string badge(std::string_view text, std::string_view cls);
/// A paragraph in the muted style (HTML content).
std::string note(std::string_view html_content);

/// A page: sections in order, with a navigation bar linking each one.
class Page {
 public:
  explicit Page(std::string title) : title_(std::move(title)) {}
  /// Adds <section id=ID><h2>HEADING</h2>BODY</section>; `body` is HTML.
  void section(std::string_view id, std::string_view heading, std::string_view body);
  /// The whole document: `header` (HTML) above the navigation, `data` scripts and `script`
  /// (JavaScript) at the end of the body.
  std::string render(std::string_view header, std::string_view data = {}, std::string_view script = {}) const;

 private:
  std::string title_, nav_, body_;
};

/// The page style (CSS) shared by every page.
std::string_view page_style();

}  // namespace probelab::html
