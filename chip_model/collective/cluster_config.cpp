#include "chip_model/collective/cluster_config.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

namespace probelab::chip {
namespace {

struct Row {
  ParamInfo info;
  std::function<std::string(const ClusterConfig&)> get;
  std::function<void(ClusterConfig&, double, const std::string&)> set;
};

template <class T>
Row number(std::string name, T ClusterConfig::*m, std::string unit, double lo, double hi, std::string doc,
           std::string source) {
  const ParamType type = std::is_floating_point_v<T> ? ParamType::Double : ParamType::UInt;
  return {{std::move(name), type, std::move(unit), std::move(doc), std::move(source), lo, hi, {}},
          [m](const ClusterConfig& c) { return fmt::format("{}", c.*m); },
          [m](ClusterConfig& c, double v, const std::string&) { c.*m = static_cast<T>(v); }};
}

const std::vector<Row>& rows() {
  static const std::vector<Row> table = [] {
    std::vector<Row> r;
    const std::string a2 = "Huawei Atlas 800T A2 training server: 8 Ascend 910B NPUs in an HCCS full mesh";
    r.push_back(number("chips_per_server", &ClusterConfig::chips_per_server, "", 1, 64,
                       "Chips per server, connected by HCCS links (a full mesh when link_count >= chips_per_server - 1)",
                       a2));
    r.push_back(number("servers", &ClusterConfig::servers, "", 0, 65536,
                       "Servers of the cluster (0: as many as the job's ranks need)", "-"));
    r.push_back(number("nic_bandwidth_gbps", &ClusterConfig::nic_bandwidth_gbps, "GB/s", 0.001, 1e6,
                       "RoCE NIC of one chip, per direction (also the switch port speed)",
                       a2 + ", one 200GE RoCE v2 port per NPU (25 GB/s); the 2019 Atlas 900 used 100GE per Ascend 910"));
    r.push_back(number("nic_latency_ns", &ClusterConfig::nic_latency_ns, "ns", 1, 1e9,
                       "Sender NIC, cable and receiver NIC of one RoCE transfer (switches not included)",
                       "estimate: RDMA write one-way latency of 1.5-3 us end to end is typical for RoCE v2"));
    r.push_back(number("switch_latency_ns", &ClusterConfig::switch_latency_ns, "ns", 1, 1e9,
                       "One switch traversal, port to port",
                       "estimate: 25.6-51.2 Tb/s Ethernet switch ASICs quote 0.4-1 us port to port"));
    Row sw{{"switch", ParamType::String, "", "Switch layer: one switch, or a two-level leaf/spine fat tree",
            "the common RoCE cluster fabrics (Atlas 900 used CloudEngine switches)", 0, 0, {"single", "fat_tree"}},
           [](const ClusterConfig& c) { return c.switch_kind; },
           [](ClusterConfig& c, double, const std::string& s) { c.switch_kind = s; }};
    r.push_back(std::move(sw));
    r.push_back(number("servers_per_leaf", &ClusterConfig::servers_per_leaf, "", 1, 65536,
                       "Fat tree: servers (of chips_per_server NICs) under one leaf switch",
                       "estimate: a 64-port 200GE leaf with 32 ports down to 4 servers and 32 up"));
    r.push_back(number("spines", &ClusterConfig::spines, "", 1, 4096,
                       "Fat tree: spine switches; every leaf has one uplink to each, traffic to chip d takes "
                       "spine d mod spines",
                       "estimate"));
    r.push_back(number("oversubscription", &ClusterConfig::oversubscription, "", 1.0, 1024.0,
                       "Fat tree: a leaf's NIC bandwidth over its uplink bandwidth (1: non-blocking)",
                       "configuration; 1:1 to 3:1 are common in training clusters"));
    r.push_back(number("exec_timeout_ms", &ClusterConfig::exec_timeout_ms, "ms", 1, 2147483647.0,
                       "How long a host waits in synchronize with no task of the stream completing before it "
                       "gives up: a job whose ranks wait for each other for ever (collectives that never match) "
                       "ends there as a hang (report.json hang)",
                       "HCCL_EXEC_TIMEOUT (CANN environment variables): 1836 s by default on Atlas A2; 1 s here, so "
                       "that a hung job ends after little simulated time"));
    return r;
  }();
  return table;
}

const Row* find(std::string_view key) {
  for (const auto& r : rows())
    if (r.info.name == key) return &r;
  return nullptr;
}

std::string prefix(std::string_view where) { return where.empty() ? std::string() : std::string(where) + ": "; }

}  // namespace

std::uint32_t ClusterConfig::servers_for(std::uint32_t ranks) const {
  if (servers) return servers;
  return std::max<std::uint32_t>(1, (ranks + chips_per_server - 1) / chips_per_server);
}

ClusterFitError::ClusterFitError(std::string where, std::string expected, std::string got)
    : ConfigError(fmt::format("{}: expected {}, got {}", where, expected, got)), where_(std::move(where)),
      expected_(std::move(expected)), got_(std::move(got)) {}

void ClusterConfig::check_fits(std::uint32_t ranks) const {
  if (ranks > chips_per_server && ranks % chips_per_server != 0)
    throw ClusterFitError("ranks",
                          fmt::format("1..{} chips of one server or whole servers (a multiple of {}: "
                                      "cluster.chips_per_server)",
                                      chips_per_server, chips_per_server),
                          fmt::format("{} ranks", ranks));
  if (servers && static_cast<std::uint64_t>(servers) * chips_per_server < ranks)
    throw ClusterFitError("ranks",
                          fmt::format("at most {} chips ({} servers of {} chips: cluster.servers)",
                                      std::uint64_t{servers} * chips_per_server, servers, chips_per_server),
                          fmt::format("{} ranks", ranks));
}

const std::vector<ParamInfo>& cluster_params() {
  static const std::vector<ParamInfo> infos = [] {
    std::vector<ParamInfo> v;
    for (const auto& r : rows()) v.push_back(r.info);
    return v;
  }();
  return infos;
}

std::string get_cluster_param(const ClusterConfig& cfg, std::string_view key) {
  const Row* r = find(key);
  if (!r) throw ConfigError(fmt::format("unknown cluster parameter '{}'", key));
  return r->get(cfg);
}

void set_cluster_param(ClusterConfig& cfg, std::string_view key, std::string_view value, std::string_view where) {
  const Row* r = find(key);
  if (!r) {
    std::vector<std::string> names;
    for (const auto& x : rows()) names.push_back(x.info.name);
    throw ConfigError(fmt::format("{}unknown cluster parameter '{}' (valid: {})", prefix(where), key,
                                  fmt::join(names, ", ")));
  }
  const ParamInfo& info = r->info;
  if (info.type == ParamType::String) {
    const std::string s(value);
    if (std::find(info.choices.begin(), info.choices.end(), s) == info.choices.end())
      throw ConfigError(fmt::format("{}cluster parameter '{}': bad value '{}' (expected one of {})", prefix(where),
                                    info.name, value, fmt::join(info.choices, ", ")));
    r->set(cfg, 0, s);
    return;
  }
  double v = 0;
  try {
    v = parse_param_number(info, value, where);
  } catch (const ConfigError&) {
    throw ConfigError(fmt::format("{}cluster parameter '{}': bad value '{}' (expected {} in [{}, {}])", prefix(where),
                                  info.name, value, info.type == ParamType::Double ? "a number" : "an integer",
                                  info.min, info.max));
  }
  r->set(cfg, v, {});
}

std::string describe_cluster_params(const ClusterConfig& defaults) {
  std::string out;
  for (const auto& r : rows()) {
    const auto& i = r.info;
    std::string doc = i.doc;
    if (!i.choices.empty()) doc += fmt::format(" ({})", fmt::join(i.choices, " | "));
    out += fmt::format("{:<24} {:>14} {:<12} {}\n{:<24} {:>14} {:<12} [{}]\n", i.name, r.get(defaults), i.unit, doc,
                       "", "", "", i.source);
  }
  return out;
}

}  // namespace probelab::chip
