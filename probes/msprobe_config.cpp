#include "probes/msprobe_config.h"

#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "probes/detail/config_reader.h"

namespace probelab::probes {
namespace {

using detail::Reader;

constexpr std::string_view kOwnKeys[] = {"dump_path", "level",      "async_dump",        "dump_enable", "extra_info",
                                         "precision", "risk_level", "is_deterministic", "enable_dataloader",
                                         "acl_config"};
// Keys probelab's own config has too (task for mode, step and rank lists, seed).
constexpr std::string_view kSharedKeys[] = {"task", "step", "rank", "seed"};
constexpr std::string_view kSections[] = {"statistics", "tensor",     "overflow_check", "nan_check",      "acc_check",
                                          "run_ut",     "structure",  "free_benchmark", "grad_probe",     "exception_dump"};

// A node as JSON text: quoted scalars and non-numbers as strings, plain numbers and booleans as such.
std::string flow(const YAML::Node& n) {
  if (n.IsSequence()) {
    std::string s = "[";
    for (std::size_t i = 0; i < n.size(); ++i) s += (i ? ", " : "") + flow(n[i]);
    return s + "]";
  }
  if (n.IsMap()) {
    std::string s = "{";
    for (auto it = n.begin(); it != n.end(); ++it)
      s += (s.size() > 1 ? ", " : "") + fmt::format("\"{}\": {}", it->first.as<std::string>(), flow(it->second));
    return s + "}";
  }
  if (!n.IsScalar()) return "null";
  const std::string v = n.as<std::string>();
  if (n.Tag() != "!") {
    double d = 0;
    bool b = false;
    if (YAML::convert<double>::decode(n, d) || YAML::convert<bool>::decode(n, b)) return v;
  }
  return nlohmann::json(v).dump();
}

// One msprobe op name (from `list` or `scope`) as probelab selectors.
struct NameRef {
  std::vector<std::string> globs;
  std::string type;  // an API name: Tensor.add.0.forward -> "add"
  std::int64_t index = 0;
  std::string direction;  // "forward" | "backward" | ""
  std::string what;       // for the mapping note
};

bool is_int(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

NameRef name_ref(const std::string& s, bool exact) {
  std::vector<std::string> parts;
  std::size_t at = 0;
  for (;;) {
    const std::size_t dot = s.find('.', at);
    parts.push_back(s.substr(at, dot == std::string::npos ? std::string::npos : dot - at));
    if (dot == std::string::npos) break;
    at = dot + 1;
  }
  NameRef r;
  const auto dir_at = [&](std::size_t i) { return parts[i] == "forward" || parts[i] == "backward"; };
  // Module.<path>.<Class>.<forward|backward>.<n> (Cell. in MindSpore): the module's ops.
  if (parts.size() >= 5 && (parts[0] == "Module" || parts[0] == "Cell") && dir_at(parts.size() - 2) &&
      is_int(parts.back())) {
    std::string path;
    for (std::size_t i = 1; i + 3 < parts.size(); ++i) path += (path.empty() ? "" : "/") + parts[i];
    if (path.empty()) path = parts[parts.size() - 3];
    r.globs = {path, path + "/*"};
    r.direction = parts[parts.size() - 2];
    r.what = fmt::format("module {} ({})", path, r.direction);
    return r;
  }
  // <Prefix>.<api>.<n>.<forward|backward>: the n-th call of the API -> the n-th op of its type.
  if (parts.size() == 4 && is_int(parts[2]) && dir_at(3)) {
    r.type = parts[1];
    r.index = std::stoll(parts[2]);
    r.direction = parts[3];
    r.what = fmt::format("op #{} of type {} ({})", r.index, r.type, r.direction);
    return r;
  }
  if (s.find_first_of("*?[/") != std::string::npos || exact) {
    r.globs = {s};
    r.what = fmt::format("ops named {}", s);
  } else {
    r.globs = {"*" + s + "*"};
    r.type = s;
    r.what = fmt::format("ops of type {} or with '{}' in their name", s, s);
  }
  return r;
}

class Translator {
 public:
  Translator(const YAML::Node& n, const std::string& source) : n_(n), r_(source) {}

  MsprobeTranslation run() {
    std::vector<std::string_view> allowed = {"task", "rank", "step", "seed"};
    allowed.insert(allowed.end(), std::begin(kOwnKeys), std::end(kOwnKeys));
    allowed.insert(allowed.end(), std::begin(kSections), std::end(kSections));
    for (auto it = n_.begin(); it != n_.end(); ++it) {
      const std::string k = it->first.as<std::string>();
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
        std::string list;
        for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        r_.fail(it->first, k, fmt::format("unknown msprobe config.json key (expected one of: {})", list));
      }
    }
    task();
    common();
    out_["watch_points"] = wps_;
    return {out_, map_, warn_};
  }

 private:
  void put(const std::string& key, const YAML::Node& v, std::string to, std::string note) {
    map_.push_back({fmt::format("{}: {}", key, flow(v)), std::move(to), std::move(note)});
  }
  // A key the config leaves out, read with msprobe's default `as` ("" when msprobe has none).
  void absent(const std::string& key, const std::string& as, std::string to, std::string note) {
    map_.push_back({fmt::format("{} (absent{})", key, as.empty() ? "" : ": msprobe's default " + as), std::move(to),
                    std::move(note)});
  }
  void none(const std::string& key, const YAML::Node& v, const std::string& instead) {
    map_.push_back({fmt::format("{}: {}", key, flow(v)), "", "no equivalent: " + instead});
    warn_.push_back(fmt::format("msprobe {}: {} has no equivalent here: {}", key, flow(v), instead));
  }

  void task() {
    task_ = n_["task"] ? r_.str(n_["task"], "task") : "statistics";
    const YAML::Node tn = n_["task"] ? n_["task"] : YAML::Node("statistics");
    const auto put_task = [&](std::string to, std::string note) {
      if (n_["task"]) put("task", tn, std::move(to), std::move(note));
      else absent("task", "\"statistics\"", std::move(to), std::move(note));
    };
    static const std::pair<std::string_view, std::string_view> kNone[] = {
        {"structure", "`probelab show MODEL` prints the graph, its snapshots and fusion provenance"},
        {"acc_check", "`compare: {enabled: true}` compares every op against the CPU reference"},
        {"run_ut", "`compare: {enabled: true}` compares every op against the CPU reference"},
        {"free_benchmark", "`compare: {enabled: true}` compares every op against the CPU reference"},
        {"grad_probe", "watch points on */gradient with conditions (e.g. \"abs_mean < 1e-6\")"},
        {"exception_dump", "task overflow_check (the exception latch names the op; halt_on_exception dumps it)"}};
    for (const auto& [t, instead] : kNone)
      if (task_ == t) r_.fail(tn, "task", fmt::format("msprobe task '{}' has no equivalent here: use {}", task_, instead));
    if (task_ != "statistics" && task_ != "tensor" && task_ != "overflow_check" && task_ != "nan_check")
      r_.fail(tn, "task",
              fmt::format("unknown msprobe task '{}' (expected statistics, tensor, overflow_check or nan_check)", task_));
    YAML::Node wp;
    wp["name"] = "msprobe";
    wp["data_mode"].push_back("input");  // msprobe dumps each API's inputs and outputs
    wp["data_mode"].push_back("output");
    if (task_ == "tensor") {
      out_["mode"] = "full";
      put_task("mode: full", "full tensors of the selected ops (with statistics in dump.json)");
    } else if (task_ == "statistics") {
      out_["mode"] = "statistics";
      put_task("mode: statistics", "statistics records of the selected ops");
    } else {
      out_["mode"] = "statistics";
      YAML::Node kinds;
      for (const char* k : {"overflow", "invalid", "nan_input"}) kinds.push_back(k);
      out_["exceptions"]["kinds"] = kinds;
      if (task_ == "overflow_check") {
        wp["conditions"].push_back("inf_count > 0 || nan_count > 0");
        wp["actions"].push_back("full_dump");
        put_task("exceptions: {kinds: [overflow, invalid, nan_input]}; conditions: [inf_count > 0 || nan_count > 0] -> full_dump",
                 "the exception latch reports each overflow (op, element, cycle); tensors holding Inf/NaN are dumped");
      } else {
        put_task("exceptions: {kinds: [overflow, invalid, nan_input]}",
                 "the exception latch and the float-status register report NaN/Inf");
      }
    }
    for (const auto& s : kSections) {
      const YAML::Node sec = n_[std::string(s)];
      if (!sec) continue;
      if (s != task_) {
        map_.push_back({std::string(s) + ": {...}", "", fmt::format("used by task {} only; not used", s)});
        continue;
      }
      if (!sec.IsMap()) r_.fail(sec, std::string(s), "expected a mapping");
      section(sec, std::string(s), wp);
    }
    if (!wp["match"] && !wp["types"] && !wp["range"]) {
      wp["match"].push_back("*");
      const YAML::Node sec = n_[task_];
      if (task_ != "overflow_check" && !(sec && (sec["list"] || sec["scope"])))
        absent(task_ + ".list, " + task_ + ".scope", "[]", "match: [\"*\"]",
               "every op (msprobe dumps every API and module when list and scope are empty)");
    }
    wps_.push_back(wp);
    for (std::size_t i = 0; i < extra_wps_.size(); ++i) wps_.push_back(extra_wps_[i]);
  }

  void section(const YAML::Node& sec, const std::string& name, YAML::Node& wp) {
    if (name == "statistics")
      r_.check_keys(sec, name, {"scope", "list", "tensor_list", "data_mode", "summary_mode", "device"});
    else if (name == "tensor")
      r_.check_keys(sec, name, {"scope", "list", "data_mode", "file_format", "summary_mode", "bench_path", "diff_nums"});
    else if (name == "overflow_check")
      r_.check_keys(sec, name, {"overflow_nums", "check_mode"});
    else
      r_.check_keys(sec, name, {"scope", "list", "data_mode"});
    auto key = [&](const char* k) { return name + "." + k; };
    if (const auto& l = sec["list"]) {
      std::vector<std::string> what;
      for (const auto& e : r_.strings(l, key("list"))) {
        const NameRef ref = name_ref(e, false);
        for (const auto& g : ref.globs) {
          r_.glob(l, key("list"), g);
          wp["match"].push_back(g);
        }
        if (!ref.type.empty()) wp["types"].push_back(ref.type);
        what.push_back(ref.what);
      }
      if (!what.empty()) {
        std::string w;
        for (const auto& x : what) w += (w.empty() ? "" : "; ") + x;
        put(key("list"), l, fmt::format("match: {}{}", flow(wp["match"]), wp["types"] ? ", types: " + flow(wp["types"]) : ""),
            w);
      } else {
        put(key("list"), l, "match: [\"*\"]", "empty list: every op");
      }
    }
    if (const auto& sc = sec["scope"]) {
      const auto names = r_.strings(sc, key("scope"));
      if (names.size() == 2) {
        for (std::size_t i = 0; i < 2; ++i) {
          const NameRef ref = name_ref(names[i], true);
          YAML::Node end;
          if (!ref.type.empty()) {
            end["type"] = ref.type;
            end["index"] = ref.index;
            if (!ref.direction.empty()) end["direction"] = ref.direction;
          } else if (ref.globs.size() > 1 || !ref.direction.empty()) {  // a module: the ops under it
            for (const auto& g : ref.globs) end["match"].push_back(g);
            if (!ref.direction.empty()) end["direction"] = ref.direction;
          } else {
            end = YAML::Node(ref.globs.front());
          }
          wp["range"].push_back(end);
        }
        put(key("scope"), sc, fmt::format("range: {}", flow(wp["range"])),
            "the ops from the first to the last, in execution order");
      } else if (!names.empty()) {
        r_.fail(sc, key("scope"), fmt::format("expected exactly two names [first, last], got {}", names.size()));
      } else {
        put(key("scope"), sc, "", "empty: no range");
      }
    }
    if (const auto& dm = sec["data_mode"]) data_mode(dm, key("data_mode"), wp);
    if (const auto& sm = sec["summary_mode"]) summary_mode(sm, key("summary_mode"));
    if (const auto& tl = sec["tensor_list"]) {
      YAML::Node full;
      full["name"] = "msprobe_tensor_list";
      full["mode"] = "full";
      for (const auto& e : r_.strings(tl, key("tensor_list"))) {
        const NameRef ref = name_ref(e, false);
        for (const auto& g : ref.globs) full["match"].push_back(g);
        if (!ref.type.empty()) full["types"].push_back(ref.type);
      }
      if (full["match"]) {
        extra_wps_.push_back(full);
        put(key("tensor_list"), tl, "watch point msprobe_tensor_list, mode: full", "full tensors of these ops as well");
      } else {
        put(key("tensor_list"), tl, "", "empty: no full tensors");
      }
    }
    if (const auto& d = sec["device"]) {
      const bool dev = r_.choice<bool>(d, key("device"), "statistics device", {{"device", true}, {"host", false}});
      out_["capture"]["in_kernel_statistics"] = dev;
      put(key("device"), d, fmt::format("capture.in_kernel_statistics: {}", dev),
          dev ? "statistics computed by each op's kernel on the device" : "statistics computed by separate capture tasks");
    }
    if (const auto& f = sec["file_format"]) {
      const std::string ff = r_.choice<std::string>(f, key("file_format"), "file format", {{"npy", "npy"}, {"bin", "bin"}});
      if (ff == "npy") {
        out_["output"]["compression"] = "none";
        put(key("file_format"), f, "output.compression: none", "plain .npy files numpy reads as they are");
      } else {
        none(key("file_format"), f, "dumps are .npy files (use npy)");
      }
    }
    for (const char* k : {"bench_path", "diff_nums"})
      if (sec[k]) none(key(k), sec[k], "compare two runs' dumps with `probelab compare RUN_A RUN_B`");
    if (const auto& o = sec["overflow_nums"]) {
      const std::int64_t v = r_.integer(o, key("overflow_nums"), -1, INT32_MAX);
      if (v == 0) r_.fail(o, key("overflow_nums"), "expected -1 (no limit) or a positive integer");
      overflow_nums_ = v;
    }
    if (const auto& c = sec["check_mode"]) {
      const std::string m = r_.choice<std::string>(c, key("check_mode"), "check mode",
                                                   {{"all", "all"}, {"aicore", "aicore"}, {"atomic", "atomic"}});
      if (m == "all")
        put(key("check_mode"), c, "exceptions (every op)", "the latch sees every op on the AI cores and the collectives");
      else
        none(key("check_mode"), c, "the latch covers every op (use all)");
    }
  }

  void data_mode(const YAML::Node& dm, const std::string& key, YAML::Node& wp) {
    bool fwd = false, bwd = false, in = false, out = false, all = false;
    for (const auto& m : r_.strings(dm, key)) {
      if (m == "all") all = true;
      else if (m == "forward") fwd = true;
      else if (m == "backward") bwd = true;
      else if (m == "input") in = true;
      else if (m == "output") out = true;
      else r_.fail(dm, key, fmt::format("unknown data mode '{}' (expected all, forward, backward, input or output)", m));
    }
    if (all && (fwd || bwd || in || out)) r_.fail(dm, key, "\"all\" cannot be combined with other data modes");
    std::string to;
    if (fwd != bwd) {
      wp["direction"] = fwd ? "forward" : "backward";
      to = fmt::format("direction: {}", fwd ? "forward" : "backward");
    }
    YAML::Node edges;
    const bool any_edge = in || out;
    if (in || !any_edge) edges.push_back("input");
    if (out || !any_edge) edges.push_back("output");
    wp["data_mode"] = edges;
    to += (to.empty() ? "" : ", ") + fmt::format("data_mode: {}", flow(edges));
    put(key, dm, to, "which ops (forward/backward) and which of their edges (input/output)");
  }

  void summary_mode(const YAML::Node& sm, const std::string& key) {
    if (sm.IsSequence()) {
      put(key, sm, "", "statistics records always carry min, max, mean, l2, abs_mean, nan/inf/zero counts");
      return;
    }
    const std::string m =
        r_.choice<std::string>(sm, key, "summary mode", {{"statistics", "statistics"}, {"md5", "md5"}, {"xor", "xor"}});
    if (m == "statistics") {
      put(key, sm, task_ == "tensor" ? "" : "mode: statistics", "statistics records");
    } else if (task_ == "tensor") {
      put(key, sm, "", "full tensors are dumped; their dump.json entries carry statistics (hashes: task statistics with md5)");
    } else {
      out_["mode"] = "hash";
      put(key, sm, "mode: hash", "a 64-bit xxHash of each captured tensor (msprobe: CRC-32)");
    }
  }

  void common() {
    if (const auto& d = n_["dump_path"]) {
      std::string dir = std::filesystem::path(r_.str(d, "dump_path")).lexically_normal().filename().string();
      if (dir.empty() || dir == "." || dir == "..") dir = "dump";
      out_["output"]["dir"] = dir;
      put("dump_path", d, "output.dir: " + dir, "dumps stay inside the run's output directory: <out>/<scenario>/" + dir);
    } else {
      absent("dump_path", "", "output.dir: dump", "dumps go to <out>/<scenario>/dump");
    }
    for (const auto& [from, to] : {std::pair{"step", "steps"}, std::pair{"rank", "ranks"}}) {
      const YAML::Node v = n_[from];
      if (!v) {
        absent(from, "[]", std::string(to) + ": all", "every " + std::string(from));
        continue;
      }
      if (v.IsSequence() && v.size() == 0) {
        put(from, v, std::string(to) + ": all", "empty list: every " + std::string(from));
        continue;
      }
      (void)r_.intset(v, from);  // validates: integers and "a-b" ranges
      out_[to] = v;
      put(from, v, fmt::format("{}: {}", to, flow(v)), "");
    }
    if (const auto& l = n_["level"]) {
      const std::string lv = r_.str(l, "level");
      if (lv == "L0") put("level", l, "", "module level: a module is the ops under its scope (name modules in list/scope)");
      else if (lv == "L1") put("level", l, "", "API level: each op of the executed graph");
      else if (lv == "L2") put("level", l, "", "kernel level: each op of the executed (fused) graph runs as one kernel");
      else if (lv == "mix") put("level", l, "", "modules and APIs: each op, and modules through their scope");
      else if (lv == "debug") r_.fail(l, "level", "single-point saving (level debug) has no equivalent here: use watch_points on the tensors to save");
      else r_.fail(l, "level", fmt::format("unknown level '{}' (expected L0, L1, L2, mix or debug)", lv));
    } else {
      absent("level", "\"L1\"", "", "API level: each op of the executed graph");
    }
    if (const auto& a = n_["async_dump"]) {
      if (r_.boolean(a, "async_dump")) {
        out_["capture"]["drain"] = "buffer_full";
        put("async_dump", a, "capture.drain: buffer_full", "the host drains when a buffer fills and at the end; no wait between steps");
      } else {
        put("async_dump", a, "", "default drain policy (auto)");
      }
    }
    if (const auto& e = n_["dump_enable"]) {
      if (!r_.boolean(e, "dump_enable")) {
        out_["enabled"] = false;
        put("dump_enable", e, "enabled: false", "probes off");  // the run warns that nothing is captured
      } else {
        put("dump_enable", e, "enabled: true", "");
      }
    }
    if (const auto& x = n_["extra_info"])
      put("extra_info", x, "", "call stacks are in report.json's anomalies; the graph: `probelab show MODEL`");
    if (const auto& p = n_["precision"]) {
      const std::string v = r_.choice<std::string>(p, "precision", "precision", {{"high", "high"}, {"low", "low"}});
      if (v == "high") put("precision", p, "", "statistics accumulate in FP32 or wider already");
      else none("precision", p, "statistics accumulate in FP32 or wider (high)");
    }
    if (const auto& rl = n_["risk_level"]) {
      const std::string v = r_.choice<std::string>(rl, "risk_level", "risk level", {{"ALL", "ALL"}, {"CORE", "CORE"}, {"FOCUS", "FOCUS"}});
      if (v == "ALL") put("risk_level", rl, "", "every op");
      else none("risk_level", rl, "every op is probed; narrow with list or scope");
    }
    if (const auto& s = n_["seed"]) {
      out_["seed"] = r_.integer(s, "seed", 0, INT64_MAX);
      put("seed", s, "seed", "sampling seed");
    }
    if (const auto& d = n_["is_deterministic"]) put("is_deterministic", d, "", "runs are deterministic always");
    if (const auto& d = n_["enable_dataloader"]) none("enable_dataloader", d, "steps are the scenario's `steps`; select them with step");
    if (const auto& d = n_["acl_config"]) none("acl_config", d, "the chip model is configured by the scenario's `chip:`");
    if (task_ == "overflow_check" && overflow_nums_ != -1) {
      out_["rules"].push_back(fmt::format("anomaly_count >= {} -> stop", overflow_nums_));
      map_.push_back({fmt::format("overflow_check.overflow_nums: {}", overflow_nums_),
                      fmt::format("rules: [anomaly_count >= {} -> stop]", overflow_nums_),
                      "stop after that many anomalies (msprobe's default is 1; -1: never)"});
    }
  }

  const YAML::Node& n_;
  Reader r_;
  std::string task_;
  std::int64_t overflow_nums_ = 1;
  YAML::Node out_;
  YAML::Node wps_, extra_wps_;
  std::vector<ConfigMapping> map_;
  std::vector<std::string> warn_;
};

}  // namespace

bool is_msprobe_config(const YAML::Node& node) {
  if (!node.IsMap()) return false;
  for (auto k : kOwnKeys)
    if (node[std::string(k)]) return true;
  for (auto k : kSections)
    if (node[std::string(k)] && node[std::string(k)].IsMap()) return true;
  const YAML::Node t = node["task"];
  const std::string task = t && t.IsScalar() ? t.as<std::string>() : "";
  for (auto k : kSections)
    if (task == k && task != "statistics" && task != "tensor") return true;
  // Only keys both formats have: msprobe's when task (if given) is one of its tasks. probelab
  // would read it as a config with no watch point, which selects nothing; msprobe dumps every op.
  bool shared = false;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string k = it->first.as<std::string>();
    if (std::find(std::begin(kSharedKeys), std::end(kSharedKeys), k) == std::end(kSharedKeys)) return false;
    shared = shared || k != "seed";
  }
  return shared && (!t || task == "statistics" || task == "tensor");
}

MsprobeTranslation translate_msprobe(const YAML::Node& node, const std::string& source) {
  return Translator(node, source).run();
}

}  // namespace probelab::probes
