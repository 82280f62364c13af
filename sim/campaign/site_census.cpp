#include "sim/campaign/site_census.h"

#include <fmt/format.h>

namespace probelab::sim {

void SiteCensus::note(const chip::FaultSite& s, const std::string& site) {
  const std::string op = g_ && s.op_id < g_->ops().size() ? g_->op(s.op_id).name : fmt::format("op#{}", s.op_id);
  sites_[op][site].insert({s.rank, s.step});
}

void SiteCensus::on_op_input(const chip::FaultSite& s, std::uint16_t i, const graph::TensorDesc&, std::span<std::byte>) {
  note(s, fmt::format("input:{}", i));
}
void SiteCensus::on_op_output(const chip::FaultSite& s, std::uint16_t i, const graph::TensorDesc&, std::uint64_t,
                              std::span<std::byte>) {
  note(s, fmt::format("output:{}", i));
}
void SiteCensus::on_gemm_accumulation(const chip::FaultSite& s, chip::AccumulationMode&) { note(s, "gemm"); }
void SiteCensus::on_fused_inner(const chip::FaultSite& s, std::uint32_t, const std::string&, std::span<float>) {
  note(s, "fused_inner");
}
void SiteCensus::on_vector_lanes(const chip::FaultSite& s, const graph::TensorDesc&, std::uint64_t, std::uint32_t,
                                 std::span<std::byte>) {
  note(s, "vector_lanes");
}
void SiteCensus::on_core_buffer(const chip::FaultSite& s, chip::CoreBuffer b, std::span<std::byte> bytes) {
  if (bytes.empty()) return;
  static const char* kNames[] = {"l1", "l0a", "l0b", "l0c", "ub"};
  note(s, fmt::format("buffer:{}", kNames[static_cast<int>(b)]));
}

const std::set<SiteCensus::Execution>& SiteCensus::reached(const std::string& op, const std::string& site) const {
  static const std::set<Execution> kNone;
  auto o = sites_.find(op);
  if (o == sites_.end()) return kNone;
  auto s = o->second.find(site);
  return s == o->second.end() ? kNone : s->second;
}

nlohmann::json SiteCensus::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [op, sites] : sites_)
    for (const auto& [site, execs] : sites) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& [r, s] : execs) list.push_back({r, s});
      j[op][site] = std::move(list);
    }
  return j;
}

SiteCensus SiteCensus::from_json(const nlohmann::json& j) {
  SiteCensus c;
  for (const auto& [op, sites] : j.items())
    for (const auto& [site, execs] : sites.items())
      for (const auto& e : execs) c.sites_[op][site].insert({e.at(0).get<std::uint32_t>(), e.at(1).get<std::uint32_t>()});
  return c;
}

std::string SiteCensus::site_of(const std::string& kind, const std::string& side, std::uint16_t slot,
                                const std::string& target) {
  if (kind == "nan" || kind == "inf" || kind == "value") return fmt::format("{}:{}", side, slot);
  if (kind == "bitflip") {
    if (target == "hbm" || target.empty()) return "";
    return "buffer:" + std::string(target == "accumulator" ? "l0c" : target);
  }
  if (kind == "fp16_accumulation") return "gemm";
  if (kind == "stuck_at") return "vector_lanes";
  return "";
}

}  // namespace probelab::sim
