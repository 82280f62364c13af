// Parameters of the cluster a multi-chip job runs on, with documented defaults and sources (as the
// chip parameters have, chip_model/chip_config.h). No SystemC here.
//
// A server holds `chips_per_server` chips in an HCCS full mesh (the chip parameters
// link_bandwidth_gbps, link_latency_ns and link_count describe one HCCS link). Every chip has one
// RoCE NIC into a switch layer: one switch (`switch: single`), or a two-level fat tree
// (`switch: fat_tree`) of leaf switches serving `servers_per_leaf` servers each and `spines`
// spine switches, the leaf uplinks carrying 1/`oversubscription` of the leaf's NIC bandwidth.
// Rank r runs on server r / chips_per_server, chip r % chips_per_server.
//
// Scenario form: `cluster: {switch: fat_tree, oversubscription: 2}` (every key optional);
// `probelab list chips` prints the table. Unknown keys, wrong types and values out of range throw
// ConfigError naming the key.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chip_model/chip_config.h"

namespace probelab::chip {

/// A job that does not fit the cluster or cannot be split over the processes asked for: where
/// ("ranks", "partition", "cluster.partition"), what was expected and what the job has
/// ("16 entries (one process index per rank)", "17 entries").
class ClusterFitError : public ConfigError {
 public:
  ClusterFitError(std::string where, std::string expected, std::string got);
  const std::string& where() const { return where_; }
  const std::string& expected() const { return expected_; }
  const std::string& got() const { return got_; }

 private:
  std::string where_, expected_, got_;
};

struct ClusterConfig {
  std::uint32_t chips_per_server = 8;
  std::uint32_t servers = 0;                // 0: as many as the ranks need
  double nic_bandwidth_gbps = 25.0;         // per direction
  std::uint32_t nic_latency_ns = 1000;      // sender NIC, cable, receiver NIC
  std::uint32_t switch_latency_ns = 600;    // one switch, port to port
  std::string switch_kind = "single";       // "single" | "fat_tree" (key `switch`)
  std::uint32_t servers_per_leaf = 4;       // fat tree
  std::uint32_t spines = 8;                 // fat tree
  double oversubscription = 1.0;            // fat tree: leaf downlink / uplink bandwidth
  std::uint32_t exec_timeout_ms = 1000;     // a host gives up waiting for its stream (a hung job) after this

  bool fat_tree() const { return switch_kind == "fat_tree"; }
  /// Servers a job of `ranks` chips occupies: `servers` when set, else ceil(ranks / chips_per_server).
  std::uint32_t servers_for(std::uint32_t ranks) const;
  /// Throws ClusterFitError when `ranks` chips do not fit: more than one server's worth but not
  /// a whole number of servers, or more chips than `servers` servers hold.
  void check_fits(std::uint32_t ranks) const;
};

/// The parameter table (name, type, unit, doc, public source, range), in documentation order.
const std::vector<ParamInfo>& cluster_params();
std::string get_cluster_param(const ClusterConfig& cfg, std::string_view key);
/// Throws ConfigError naming the key (prefixed with `where`) for an unknown key or a bad value.
void set_cluster_param(ClusterConfig& cfg, std::string_view key, std::string_view value, std::string_view where = {});
/// One row per parameter, as describe_chip_params().
std::string describe_cluster_params(const ClusterConfig& defaults = ClusterConfig{});

}  // namespace probelab::chip
