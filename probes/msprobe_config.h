// msprobe's config.json as a probe config: recognised by its keys and translated, key by key, to
// probelab's own config (probe_config.h), with every key's mapping kept for the report.
//
//   msprobe                          probelab
//   task: statistics | tensor        mode: statistics | full (every op unless scope/list narrow)
//   task: overflow_check | nan_check exceptions {overflow, invalid, nan_input}; statistics of
//                                    every op; overflow_check also dumps a tensor with Inf/NaN
//                                    (full_dump) and stops after overflow_nums anomalies
//   dump_path                        output.dir (its last component: dumps stay in the run's
//                                    output directory)
//   step, rank ([] = all)            steps, ranks
//   level L0 | L1 | L2 | mix         the ops of the executed graph (modules = their scope)
//   <task>.scope [first, last]       range: [first, last] in execution order
//   <task>.list                      match globs / types (msprobe names: Module.a.b.Cls.forward.0
//                                    -> ops under a/b; Tensor.add.0.forward -> type Add)
//   <task>.data_mode                 direction (forward/backward) and data_mode (input/output)
//   <task>.summary_mode              statistics -> statistics; md5 | xor -> hash
//   <task>.file_format npy           output.compression: none (plain .npy)
//   statistics.tensor_list           a second watch point in full mode
//   statistics.device                capture.in_kernel_statistics (device: true, host: false)
//   async_dump                       capture.drain: buffer_full (no host wait between steps)
//   dump_enable: false               enabled: false
// A key left out reads as msprobe's default (task statistics, level L1, every step and rank,
// empty list and scope: every op), listed in the mapping as "<key> (absent: ...)"; without
// dump_path the dumps go to output.dir's default.
// Keys with no equivalent (e.g. bench_path, risk_level CORE, check_mode aicore) are accepted and
// listed as warnings naming what to use instead; a task with no equivalent (structure,
// acc_check, free_benchmark, grad_probe, exception_dump) or a bad value is a ConfigError naming
// the key and line.
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "probes/probe_config.h"

namespace probelab::probes {

/// msprobe's config.json rather than probelab's config: it has a key only msprobe has
/// (dump_path, level, async_dump, dump_enable, extra_info, precision, risk_level,
/// is_deterministic, enable_dataloader, acl_config), a task section (statistics, tensor,
/// overflow_check, ... as a mapping), or a task probelab has no mode for; or it has only keys
/// both formats have (task, step, rank, seed), at least one of task, step and rank, and a task
/// (if any) msprobe has: {"task": "tensor", "step": [1]}. probelab's reading of such a config
/// has no watch point and selects nothing.
bool is_msprobe_config(const YAML::Node& node);

struct MsprobeTranslation {
  YAML::Node probes;                    // probelab's config
  std::vector<ConfigMapping> mapping;   // one entry per msprobe key
  std::vector<std::string> warnings;    // keys with no equivalent, with what to use instead
};

MsprobeTranslation translate_msprobe(const YAML::Node& node, const std::string& source);

}  // namespace probelab::probes
