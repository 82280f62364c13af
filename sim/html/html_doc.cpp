#include "sim/html/html_doc.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

namespace probelab::html {

using nlohmann::json;

std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v, int sig) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return "0";
  return fmt::format("{:.{}g}", v, sig);
}

std::string num(const json& v, int sig) {
  if (v.is_number_unsigned()) return std::to_string(v.get<std::uint64_t>());
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  if (v.is_number_float()) return num(v.get<double>(), sig);
  if (v.is_string()) return escape(v.get<std::string>());
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return "-";
}

std::string count(std::uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += "\u2009";
    out += digits[i];
  }
  return out;
}

namespace {

std::string plain(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "-";
  if (v.is_number() || v.is_boolean()) return num(v, 6);
  std::string out;
  if (v.is_array()) {
    for (const auto& e : v) out += (out.empty() ? "" : ", ") + plain(e);
    return out;
  }
  for (const auto& [k, e] : v.items()) out += (out.empty() ? "" : ", ") + k + "=" + plain(e);
  return out;
}

}  // namespace

std::string text(const json& v, std::size_t max) {
  const std::string s = plain(v);
  if (s.size() <= max) return escape(s);
  std::size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
  return fmt::format("<span title=\"{}\">{}\u2026</span>", escape(s), escape(s.substr(0, cut)));
}

std::string script_json(const json& j) {
  const std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '<')
      out += "\\u003c";
    else
      out += c;
  }
  return out;
}

Table::Table(std::vector<std::string> header, std::string css_class) : class_(std::move(css_class)) {
  for (const auto& h : header) head_ += "<th>" + escape(h) + "</th>";
}

void Table::row(std::vector<std::string> cells, std::string row_class) {
  body_ += row_class.empty() ? "<tr>" : "<tr class=\"" + escape(row_class) + "\">";
  for (const auto& c : cells) body_ += "<td>" + c + "</td>";
  body_ += "</tr>\n";
  ++rows_;
}

std::string Table::render() const {
  return fmt::format("<div class=\"scroll\"><table{}><thead><tr>{}</tr></thead><tbody>\n{}</tbody></table></div>\n",
                     class_.empty() ? "" : " class=\"" + escape(class_) + "\"", head_, body_);
}

std::string json_table(const json& rows, const std::vector<std::string>& first, std::size_t max_rows, CellFn cell,
                       RowClassFn row_class, const std::vector<std::string>& hidden) {
  if (!rows.is_array() || rows.empty()) return note("none");
  auto listed = [&](const std::string& k, const std::vector<std::string>& v) {
    return std::find(v.begin(), v.end(), k) != v.end();
  };
  std::vector<std::string> cols;
  for (const auto& k : first)
    for (const auto& r : rows)
      if (r.is_object() && r.contains(k)) {
        cols.push_back(k);
        break;
      }
  std::set<std::string> more;
  for (const auto& r : rows)
    if (r.is_object())
      for (const auto& [k, v] : r.items())
        if (!listed(k, first) && !listed(k, hidden)) more.insert(k);
  cols.insert(cols.end(), more.begin(), more.end());
  Table t(cols, "records");
  std::size_t n = 0;
  for (const auto& r : rows) {
    if (n++ == max_rows) break;
    std::vector<std::string> cells;
    for (const auto& k : cols) {
      static const json null;
      const json& v = r.is_object() && r.contains(k) ? r[k] : null;
      cells.push_back(cell ? cell(k, v) : text(v));
    }
    t.row(std::move(cells), row_class ? row_class(r) : std::string());
  }
  std::string out = t.render();
  if (rows.size() > max_rows)
    out += note(fmt::format("{} more not shown (report.json has all {})", rows.size() - max_rows, rows.size()));
  return out;
}

std::string kv_grid(const std::vector<std::pair<std::string, std::string>>& items) {
  std::string out = "<dl class=\"kv\">";
  for (const auto& [k, v] : items) out += "<dt>" + escape(k) + "</dt><dd>" + v + "</dd>";
  return out + "</dl>\n";
}

std::string badge(std::string_view text, std::string_view cls) {
  return fmt::format("<span class=\"badge {}\">{}</span>", escape(cls), escape(text));
}

std::string note(std::string_view html_content) { return fmt::format("<p class=\"note\">{}</p>\n", html_content); }

void Page::section(std::string_view id, std::string_view heading, std::string_view body) {
  nav_ += fmt::format("<a href=\"#{}\">{}</a>", escape(id), escape(heading));
  body_ += fmt::format("<section id=\"{}\"><h2>{}</h2>\n{}</section>\n", escape(id), escape(heading), body);
}

std::string Page::render(std::string_view header, std::string_view data, std::string_view script) const {
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += "<link rel=\"icon\" href=\"data:,\">\n";
  out += "<title>" + escape(title_) + "</title>\n<style>\n";
  out += page_style();
  out += "</style>\n</head>\n<body>\n<header>\n";
  out += header;
  out += "</header>\n<nav>" + nav_ + "</nav>\n<main>\n" + body_ + "</main>\n";
  out += data;
  if (!script.empty()) {
    out += "<script>\n";
    out += script;
    out += "</script>\n";
  }
  out += "</body>\n</html>\n";
  return out;
}

}  // namespace probelab::html
