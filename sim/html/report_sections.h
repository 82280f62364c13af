// The sections of report.html (sim/html/report_html.h), one function each: the HTML body of the
// section from the whole report. Internal to sim/html.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace probelab::html::sections {

std::string summary(const nlohmann::json& r);
std::string expectations(const nlohmann::json& r);
std::string anomalies(const nlohmann::json& r);
std::string diagnosis(const nlohmann::json& r);
std::string propagation(const nlohmann::json& r);
std::string divergence(const nlohmann::json& r);
std::string comparison(const nlohmann::json& r);
std::string capture(const nlohmann::json& r);
std::string cycles(const nlohmann::json& r);
std::string injections(const nlohmann::json& r);
std::string details(const nlohmann::json& r);

/// r[key] when present, else null (a report from a failed run may lack sections).
const nlohmann::json& field(const nlohmann::json& r, const char* key);

}  // namespace probelab::html::sections
