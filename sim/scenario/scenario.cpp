#include "sim/scenario/scenario.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "graph/init.h"
#include "graph/yaml_check.h"
#include "chip_model/collective/cluster_config.h"
#include "sim/scenario/source_root.h"

namespace probelab::sim {

namespace fs = std::filesystem;

std::string_view run_mode_name(RunMode m) { return m == RunMode::Training ? "training" : "inference"; }

const std::vector<std::string>& scenario_keys() {
  static const std::vector<std::string> k = {
      "name",      "description", "chip",       "ranks",     "cluster",  "parallel", "model",    "mode",
      "training",  "data",        "steps",      "seed",      "precision", "quantization", "checkpoints", "probes",
      "injections", "variants",   "expectations", "campaign", "profile"};
  return k;
}

// ---- --set overrides -----------------------------------------------------------------------

SetOverride parse_set(const std::string& text) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ScenarioError("--set", 0, 0, text, "key=value (a dotted key path, e.g. chip.overrides.num_cores=4)",
                        "'" + text + "'");
  if (auto issue = graph::check_yaml_text(text))
    throw ScenarioError("--set", 0, 0, text.substr(0, eq), issue->expected, issue->message);
  SetOverride s{text.substr(0, eq), text.substr(eq + 1)};
  if (s.key.front() == '.' || s.key.back() == '.' || s.key.find("..") != std::string::npos)
    throw ScenarioError("--set", 0, 0, s.key, "a dotted key path without empty segments", "'" + s.key + "'");
  return s;
}

std::map<std::string, std::int64_t> parse_dims(const std::string& text) {
  std::map<std::string, std::int64_t> dims;
  std::stringstream ss(text);
  std::string item;
  const auto bad = [&](const std::string& what, const std::string& got) {
    throw ScenarioError("--dims", 0, 0, "--dims", what, "'" + got + "'");
  };
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      bad("name=value pairs separated by commas (the model's symbolic dimensions, e.g. batch=2,seq=128)", item);
    const std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc() || end != value.data() + value.size() || v < 1 || v > (std::int64_t{1} << 31))
      bad(fmt::format("a size in [1, 2^31] for dimension '{}'", name), value);
    if (!dims.emplace(name, v).second) bad(fmt::format("each dimension once ('{}' is given twice)", name), text);
  }
  if (dims.empty()) bad("name=value pairs separated by commas, e.g. batch=2,seq=128", text);
  return dims;
}

std::string model_ref_kind(const std::string& ref) {
  const bool is_file = ref.find('/') != std::string::npos || ref.ends_with(".yaml") || ref.ends_with(".yml") ||
                       ref.ends_with(".onnx");
  return is_file ? (ref.ends_with(".onnx") ? "onnx" : "file") : "name";
}

namespace {

std::vector<std::string> split_path(const std::string& key) {
  std::vector<std::string> out;
  std::stringstream ss(key);
  std::string seg;
  while (std::getline(ss, seg, '.')) out.push_back(seg);
  return out;
}

bool is_index(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

YAML::Node parse_value(const std::string& text) {
  try {
    YAML::Node n = YAML::Load(text);
    if (n.IsDefined()) return n;
  } catch (const YAML::Exception&) {
  }
  return YAML::Node(text);
}

// Returns `node` with the value at segs[i..] replaced (maps are created where missing).
YAML::Node set_at(YAML::Node node, const std::vector<std::string>& segs, std::size_t i,
                  const YAML::Node& value, const std::string& key, const std::string& file) {
  if (i == segs.size()) return value;
  const std::string& seg = segs[i];
  std::string done;
  for (std::size_t k = 0; k <= i; ++k) done += (k ? "." : "") + segs[k];
  if (node.IsSequence()) {
    if (!is_index(seg))
      throw ScenarioError(file, 0, 0, key, fmt::format("a list index at '{}' (a list is there)", done));
    std::size_t idx = std::stoul(seg);
    if (idx >= node.size())
      throw ScenarioError(file, 0, 0, key,
                          fmt::format("an index below {} at '{}' (the list has {} entries)", node.size(), done,
                                      node.size()));
    node[idx] = set_at(node[idx], segs, i + 1, value, key, file);
    return node;
  }
  if (!node.IsDefined() || node.IsNull()) node = YAML::Node(YAML::NodeType::Map);
  if (!node.IsMap())
    throw ScenarioError(file, 0, 0, key, fmt::format("a mapping at '{}' to set a key in", done.substr(0, done.rfind('.'))),
                        "a scalar");
  YAML::Node child = node[seg];
  node[seg] = set_at(child.IsDefined() ? child : YAML::Node(), segs, i + 1, value, key, file);
  return node;
}

// Names become directory names under --out: letters, digits, '_', '.', '-', not starting with
// '.' (so never "." or "..", and never one of the runner's hidden scratch directories), at most
// 128 characters.
void check_name(const YamlView& v, const std::string& s) {
  const bool chars = std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
  const std::string shown = s.size() > 60 ? "'" + s.substr(0, 60) + "...'" : "'" + s + "'";
  if (s.empty() || !chars || s.size() > 128)
    v.fail("a name of at most 128 letters, digits, '_', '.', '-'", shown);
  if (s.front() == '.') v.fail("a name not starting with '.' (it names a directory under --out)", shown);
}

ChipSpec parse_chip(const YamlView& v) {
  ChipSpec c;
  c.source = v;
  if (v.is_scalar()) {
    c.preset = v.str();
    return c;
  }
  v.expect_keys({"preset", "overrides"});
  c.preset = v.str_or("preset", "");
  if (auto o = v.get("overrides")) {
    for (const auto& key : o->keys()) {
      YamlView val = (*o)[key];
      if (!val.is_scalar()) val.fail("a scalar chip parameter value", val.describe());
      c.overrides[key] = val.str();
    }
  }
  return c;
}

ClusterSpec parse_cluster(const YamlView& v) {
  ClusterSpec c;
  c.source = v;
  if (!v.is_map()) v.fail("a mapping of cluster parameters", v.describe());
  chip::ClusterConfig check;
  std::vector<std::string> names{"partition"};
  for (const auto& p : chip::cluster_params()) names.push_back(p.name);
  v.expect_keys(names);
  for (const auto& key : v.keys()) {
    YamlView val = v[key];
    if (key == "partition") {
      if (val.is_scalar() && val.str() == "auto") continue;
      if (!val.is_seq()) val.fail("a list of process indices, one per rank, or auto (servers split evenly)", val.describe());
      for (const auto& item : val.items()) c.partition.push_back(static_cast<std::uint32_t>(item.integer(0, 65535)));
      // An empty map would read as none (servers split evenly): say so instead.
      if (c.partition.empty()) val.fail("one process index per rank (or auto: servers split evenly)", "an empty list");
      continue;
    }
    const auto& params = chip::cluster_params();
    const auto info = std::find_if(params.begin(), params.end(), [&](const chip::ParamInfo& p) { return p.name == key; });
    if (!val.is_scalar()) val.fail("a scalar cluster parameter value", val.describe());
    try {
      chip::set_cluster_param(check, key, val.str());
    } catch (const chip::ConfigError&) {
      val.fail(chip::expected_value(*info), "'" + val.str() + "'");
    }
    c.params[key] = val.str();
  }
  return c;
}

ModelSpec parse_model(const YamlView& v, const fs::path& scenario_dir, const fs::path& root) {
  ModelSpec m;
  std::string kind;
  if (v.is_scalar()) {
    m.ref = v.str();
    kind = model_ref_kind(m.ref);
  } else {
    v.expect_keys({"name", "file", "onnx", "dims", "trainable"});
    std::vector<std::string> keys;
    for (const std::string& k : v.keys())
      if (k != "dims" && k != "trainable") keys.push_back(k);
    if (keys.size() != 1) v.fail("exactly one of name, file, onnx", v.describe());
    kind = keys.front();
    m.ref = v[kind].str();
    if (auto d = v.get("dims")) {
      if (!d->is_map()) d->fail("a map of symbolic dimension names to sizes, e.g. {batch: 2, seq: 128}", d->describe());
      for (const std::string& k : d->keys()) m.dims[k] = (*d)[k].integer(1, std::int64_t{1} << 31);
    }
    if (auto t = v.get("trainable")) {
      if (!t->is_seq()) t->fail("a list of scalar initializer names to train, e.g. [logit_scale]", t->describe());
      for (const YamlView& x : t->items()) m.trainable.push_back(x.str());
    }
  }
  if (kind == "name") {
    m.source = ModelSpec::Source::Bundled;
    auto p = find_bundled_model(root, m.ref);
    if (!p) {
      auto names = bundled_models(root);
      v.fail(fmt::format("a bundled model ({}) or a .yaml/.onnx file path",
                         names.empty() ? std::string("none found under " + (root / "scenarios/models").string())
                                       : fmt::format("{}", fmt::join(names, ", "))),
             "'" + m.ref + "'");
    }
    m.path = *p;
    m.source = p->extension() == ".onnx" ? ModelSpec::Source::Onnx : ModelSpec::Source::Bundled;
    if (!m.dims.empty() && m.source != ModelSpec::Source::Onnx)
      v["dims"].fail("no dims: dimensions are bound for ONNX models only", "a YAML model");
    if (!m.trainable.empty() && m.source != ModelSpec::Source::Onnx)
      v["trainable"].fail("no trainable: a YAML model says `trainable` on each weight", "a YAML model");
    return m;
  }
  m.source = kind == "onnx" || m.ref.ends_with(".onnx") ? ModelSpec::Source::Onnx : ModelSpec::Source::YamlFile;
  fs::path p = m.ref;
  if (p.is_relative()) p = scenario_dir / p;
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) v.fail("an existing model file (relative to the scenario)", "'" + p.string() + "' (not found)");
  if (!m.dims.empty() && m.source != ModelSpec::Source::Onnx)
    v["dims"].fail("no dims: dimensions are bound for ONNX models only", "a YAML model");
  if (!m.trainable.empty() && m.source != ModelSpec::Source::Onnx)
    v["trainable"].fail("no trainable: a YAML model says `trainable` on each weight", "a YAML model");
  m.path = fs::weakly_canonical(p, ec);
  if (ec) m.path = p;
  return m;
}

OptimizerSpec parse_optimizer(const YamlView& v) {
  OptimizerSpec o;
  if (v.is_scalar()) {
    o.type = v.str_in({"sgd", "adam"});
    return o;
  }
  v.expect_keys({"type", "lr", "momentum", "beta1", "beta2", "eps", "weight_decay"});
  o.type = v["type"].str_in({"sgd", "adam"});
  o.lr = v.number_or("lr", o.lr);
  o.momentum = v.number_or("momentum", o.momentum);
  o.beta1 = v.number_or("beta1", o.beta1);
  o.beta2 = v.number_or("beta2", o.beta2);
  o.eps = v.number_or("eps", o.eps);
  o.weight_decay = v.number_or("weight_decay", o.weight_decay);
  if (o.lr <= 0) v["lr"].fail("a positive learning rate", v["lr"].describe());
  if (o.type == "sgd" && (o.momentum < 0 || o.momentum >= 1))
    v["momentum"].fail("a momentum in [0, 1)", v["momentum"].describe());
  if (o.type != "adam")
    for (const char* k : {"beta1", "beta2", "eps"})
      if (v.has(k)) v[k].fail("no Adam parameter for optimizer type " + o.type, "'" + std::string(k) + "'");
  if (o.type != "sgd" && v.has("momentum")) v["momentum"].fail("no momentum for optimizer type " + o.type, "'momentum'");
  return o;
}

AllReduceSpec parse_allreduce(const YamlView& v) {
  v.expect_keys({"algorithm", "inter_algorithm", "accumulation", "order", "reduction", "bucket_mb"});
  AllReduceSpec a;
  if (auto x = v.get("algorithm")) a.algorithm = x->str_in({"ring", "tree", "direct", "hierarchical"});
  if (auto x = v.get("inter_algorithm")) a.inter_algorithm = x->str_in({"ring", "tree", "direct"});
  if (auto x = v.get("accumulation")) a.accumulation = x->str_in({"fp32", "fp16"});
  if (auto x = v.get("order")) a.order = x->str_in({"arrival", "group"});
  if (auto x = v.get("reduction")) a.reduction = x->str_in({"mean", "sum"});
  if (auto x = v.get("bucket_mb")) {
    a.bucket_mb = x->number();
    if (!(a.bucket_mb >= 0 && a.bucket_mb <= 1024 * 1024)) x->fail("a bucket size in MiB from 0 (one all-reduce per parameter) to 1048576", x->describe());
  }
  // Keys the chosen algorithm would ignore are mistakes, not settings.
  if (auto x = v.get("inter_algorithm"); x && a.algorithm != "hierarchical")
    x->fail("inter_algorithm only with algorithm: hierarchical (it is the stage between servers)",
            "algorithm: " + a.algorithm);
  const bool one_place = a.algorithm == "direct" || (a.algorithm == "hierarchical" && a.inter_algorithm == "direct");
  if (auto x = v.get("order"); x && !one_place)
    x->fail("order only where one rank adds every contribution: algorithm direct, or hierarchical with "
            "inter_algorithm direct (ring and tree fix their own order)",
            a.algorithm == "hierarchical" ? "inter_algorithm: " + a.inter_algorithm : "algorithm: " + a.algorithm);
  return a;
}

LossScalingSpec parse_loss_scaling(const YamlView& v) {
  v.expect_keys({"scale_op", "initial", "backoff", "growth", "growth_interval", "min_scale", "guard", "all_reduce"});
  LossScalingSpec l;
  l.source = v;
  l.scale_op = v["scale_op"].str();
  l.initial = v.number_or("initial", l.initial);
  l.backoff = v.number_or("backoff", l.backoff);
  l.growth = v.number_or("growth", l.growth);
  l.min_scale = v.number_or("min_scale", l.min_scale);
  l.growth_interval = static_cast<std::uint32_t>(v.int_or("growth_interval", l.growth_interval, 1));
  l.guard = v.bool_or("guard", false);
  l.all_reduce = v.bool_or("all_reduce", false);
  if (!(l.initial > 0)) v["initial"].fail("a positive loss scale", v["initial"].describe());
  if (!(l.backoff > 0 && l.backoff < 1)) v["backoff"].fail("a backoff factor in (0, 1)", v["backoff"].describe());
  if (!(l.growth >= 1)) v["growth"].fail("a growth factor >= 1", v["growth"].describe());
  if (!(l.min_scale > 0)) v["min_scale"].fail("a positive minimum scale", v["min_scale"].describe());
  return l;
}

TrainingSpec parse_training(const YamlView& v) {
  if (auto m = v.is_map() ? v.get("master_weights") : std::nullopt)  // a precision setting, often looked for here
    m->fail("precision.master_weights (FP32 master weights are a precision setting, not a training one)",
            "training.master_weights");
  v.expect_keys({"loss", "optimizer", "batch", "allreduce", "sharding", "loss_scaling"});
  TrainingSpec t;
  if (auto x = v.get("sharding")) t.sharding = x->str_in({"none", "zero1"});
  if (auto l = v.get("loss")) t.loss = l->str_in({"auto", "cross_entropy", "mse", "model"});
  if (auto o = v.get("optimizer")) t.optimizer = parse_optimizer(*o);
  t.batch = v.int_or("batch", 0, 1);
  if (auto a = v.get("allreduce")) t.allreduce = parse_allreduce(*a);
  if (auto l = v.get("loss_scaling")) {
    t.loss_scaling = parse_loss_scaling(*l);
    if (t.optimizer.type != "sgd" || t.optimizer.weight_decay != 0)
      l->fail("optimizer sgd without weight decay (the loss scale's unscale is folded into the learning rate)",
              "loss scaling with optimizer " + t.optimizer.type);
  }
  return t;
}

DataSpec parse_data(const YamlView& v, std::uint64_t scenario_seed) {
  v.expect_keys({"generator", "seed", "mean", "std", "low", "high", "batches", "inputs"});
  DataSpec d;
  d.generator = v.get("generator") ? v["generator"].str_in({"normal", "uniform", "ones"}) : d.generator;
  d.seed = v.get("seed") ? v["seed"].uinteger() : scenario_seed;
  d.mean = v.number_or("mean", d.mean);
  d.std = v.number_or("std", d.std);
  d.low = v.number_or("low", d.low);
  d.high = v.number_or("high", d.high);
  d.batches = static_cast<std::uint32_t>(v.int_or("batches", 0, 0, std::numeric_limits<std::uint32_t>::max()));
  if (d.std < 0) v["std"].fail("a non-negative standard deviation", v["std"].describe());
  if (d.low > d.high) v["high"].fail("high >= low", v["high"].describe());
  if (auto in = v.get("inputs")) {
    if (!in->is_map()) in->fail("a mapping of model input names to initialisers", in->describe());
    for (const auto& name : in->keys()) {
      const YamlView init = (*in)[name];
      if (!init.is_scalar()) init.fail("an initialiser (randint(lo, hi), uniform(a, b), normal(std), ones, ...)", init.describe());
      const std::string text = init.str();
      try {
        graph::parse_init(text);
      } catch (const graph::GraphError&) {
        init.fail("an initialiser (randint(lo, hi), uniform(a, b), normal(mean, std), constant(v), ones, zeros, arange)",
                  "'" + text + "'");
      }
      d.inputs[name] = text;
    }
  }
  return d;
}

PrecisionPolicy parse_precision(const YamlView& v) {
  v.expect_keys({"compute", "master_weights", "accumulation", "overflow_mode"});
  PrecisionPolicy p;
  if (auto c = v.get("compute")) {
    std::string s = c->str_in({"fp16", "bf16", "fp32", "float16", "bfloat16", "float32"});
    p.compute = *graph::parse_dtype(s);
  }
  if (auto m = v.get("master_weights")) p.master_fp32 = m->str_in({"fp32", "none"}) == "fp32";
  if (auto a = v.get("accumulation")) p.accumulation = a->str_in({"fp32", "fp16", "fp16_via_fp32"});
  if (auto o = v.get("overflow_mode")) {
    p.overflow_mode = o->str_in({"inf_nan", "saturation"});
    p.overflow_mode_given = true;
  }
  return p;
}

Variant parse_variant(const YamlView& v) {
  v.expect_keys({"name", "set"});
  Variant out;
  out.name = v["name"].str();
  check_name(v["name"], out.name);
  YamlView s = v["set"];
  out.source = s;
  for (const auto& key : s.keys()) {
    if (key == "variants" || key.rfind("variants.", 0) == 0) s[key].fail("a key outside 'variants'", "'" + key + "'");
    out.sets.emplace_back(key, YAML::Dump(s[key].node()));
  }
  return out;
}

}  // namespace

void apply_overrides(YAML::Node& root, const std::vector<SetOverride>& sets, const std::string& file) {
  for (const auto& s : sets) {
    auto segs = split_path(s.key);
    root = set_at(root, segs, 0, parse_value(s.value), s.key, file.empty() ? "--set" : file + " (--set)");
  }
}

std::optional<fs::path> find_bundled_model(const fs::path& root, const std::string& name) {
  std::error_code ec;
  for (const char* ext : {".yaml", ".yml", ".onnx"}) {
    fs::path p = root / "scenarios" / "models" / (name + ext);
    if (fs::is_regular_file(p, ec)) return p;
  }
  return std::nullopt;
}

std::vector<std::string> bundled_models(const fs::path& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root / "scenarios" / "models", ec)) {
    auto ext = e.path().extension();
    if (ext == ".yaml" || ext == ".yml" || ext == ".onnx") out.push_back(e.path().stem().string());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void limit_steps(Scenario& s, int steps) {
  s.steps = steps;
  std::erase_if(s.injections, [steps](const InjectionSpec& in) {
    const YAML::Node st = in.params["step"];
    if (!st || !st.IsScalar()) return false;
    try {
      return st.as<long long>() >= steps;
    } catch (const YAML::Exception&) {
      return false;
    }
  });
}

Scenario parse_scenario(const std::string& yaml_text, const fs::path& file, const LoadOptions& opts) {
  const std::string fname = file.string();
  YAML::Node doc;
  if (auto issue = graph::check_yaml_text(yaml_text))
    throw ScenarioError(fname, issue->line, issue->column, "", issue->expected, issue->message);
  try {
    doc = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    throw ScenarioError(fname, e.mark.line + 1, e.mark.column + 1, "", "well-formed YAML", e.msg);
  }
  if (!doc.IsMap()) {
    YamlView(doc, fname, "").fail("a mapping of scenario keys at the top level",
                                  doc.IsDefined() && !doc.IsNull() ? YamlView(doc, fname, "").describe() : "an empty file");
  }
  if (auto issue = graph::check_yaml_document(doc))
    throw ScenarioError(fname, issue->line, issue->column, issue->key, issue->expected, issue->message);
  // `chip: tiny` is the short form of `chip: {preset: tiny}`; a --set of a chip key needs the long one.
  for (const auto& set : opts.sets)
    if (set.key.rfind("chip.", 0) == 0 && doc["chip"].IsScalar()) {
      YAML::Node chip(YAML::NodeType::Map);
      chip["preset"] = doc["chip"].Scalar();
      doc["chip"] = chip;
    }
  // Likewise `model: gpt2_block` for `model: {name: gpt2_block}` when a --set binds model.dims.
  for (const auto& set : opts.sets)
    if (set.key.rfind("model.", 0) == 0 && doc["model"].IsScalar()) {
      YAML::Node model(YAML::NodeType::Map);
      model[model_ref_kind(doc["model"].Scalar())] = doc["model"].Scalar();
      doc["model"] = model;
    }
  apply_overrides(doc, opts.sets, fname);
  if (auto issue = graph::check_yaml_document(doc))  // values given with --set
    throw ScenarioError(fname + " (--set)", 0, 0, issue->key, issue->expected, issue->message);
  std::vector<std::string> set_paths;  // "a.0.b" -> "a[0].b", as YamlView paths read
  for (const auto& set : opts.sets) {
    std::string p;
    for (const auto& seg : split_path(set.key)) p += is_index(seg) ? "[" + seg + "]" : (p.empty() ? "" : ".") + seg;
    set_paths.push_back(p);
  }
  const YamlView root = YamlView(doc, fname, "").with_overrides(set_paths);
  root.expect_keys(scenario_keys());

  Scenario s;
  s.file = file;
  s.resolved = doc;
  s.source = root;
  s.source_text = yaml_text;
  s.name = root["name"].str();
  check_name(root["name"], s.name);
  s.description = root.str_or("description", "");
  if (auto c = root.get("chip")) s.chip = parse_chip(*c);
  s.ranks = static_cast<int>(root.int_or("ranks", 1, 1, 65536));
  if (auto c = root.get("cluster")) s.cluster = parse_cluster(*c);
  if (auto p = root.get("parallel")) {
    p->expect_keys({"tensor"});
    s.parallel_source = *p;
    if (auto t = p->get("tensor"))
      for (const auto& item : t->items()) s.tensor_parallel.push_back(item.str());
  }
  s.seed = opts.seed ? *opts.seed : (root.get("seed") ? root["seed"].uinteger() : 0);
  s.steps = static_cast<int>(root.int_or("steps", 1, 1, 100000));

  fs::path srcroot = opts.source_root.empty() ? find_source_root() : opts.source_root;
  s.model = parse_model(root["model"], file.parent_path(), srcroot);
  s.mode = root.get("mode") && root["mode"].str_in({"inference", "training"}) == "training" ? RunMode::Training
                                                                                            : RunMode::Inference;
  if (auto t = root.get("training")) {
    if (s.mode != RunMode::Training) t->fail("no 'training' section unless mode: training", "a training section");
    s.training = parse_training(*t);
  }
  s.data.seed = s.seed;
  if (auto d = root.get("data")) s.data = parse_data(*d, s.seed);
  if (auto p = root.get("precision")) s.precision = parse_precision(*p);
  if (auto q = root.get("quantization")) s.quantization = parse_quantization(*q);
  s.profile = root.bool_or("profile", false);
  if (auto c = root.get("checkpoints")) {
    c->expect_keys({"every"});
    s.checkpoint_every = static_cast<int>((*c)["every"].integer(1, 1 << 30));
  }
  if (auto p = root.get("probes")) {
    if (!p->is_map() && !p->is_scalar())
      p->fail("a mapping (the probe runtime's config) or the path of a config file (YAML, JSON, msprobe's config.json)",
              p->describe());
    s.probes = p->node();
    s.probes_source = *p;
  }
  if (auto inj = root.get("injections")) {
    for (const auto& item : inj->items()) {
      if (!item.is_map()) item.fail("an injection descriptor mapping with a 'kind'", item.describe());
      InjectionSpec spec{item["kind"].str(), item.node(), item};
      // Plain integer sites are checked here; lists, ranges and "all" by the injector registry.
      if (auto st = item.get("step"); st && st->is_scalar() && is_index(st->str()))
        if (st->integer(0) >= s.steps)
          st->fail(fmt::format("a step below steps ({})", s.steps), st->describe());
      if (auto rk = item.get("rank"); rk && rk->is_scalar() && is_index(rk->str()))
        if (rk->integer(0) >= s.ranks)
          rk->fail(fmt::format("a rank below ranks ({})", s.ranks), rk->describe());
      s.injections.push_back(std::move(spec));
    }
  }
  if (auto vs = root.get("variants")) {
    for (const auto& item : vs->items()) {
      Variant v = parse_variant(item);
      for (const auto& other : s.variants)
        if (other.name == v.name) item["name"].fail("a variant name used once", "'" + v.name + "' twice");
      s.variants.push_back(std::move(v));
    }
  }
  if (auto ex = root.get("expectations")) {
    for (const auto& item : ex->items()) {
      Expectation e = parse_expectation(item);
      ExpectationScope scope{s.steps, s.ranks, {}};
      for (const auto& v : s.variants) scope.variants.push_back(v.name);
      e.check->validate(scope, item);
      s.expectations.push_back(std::move(e));
    }
  }
  if (auto c = root.get("campaign")) s.campaign = parse_fault_model(*c);
  return s;
}

Scenario load_scenario(const fs::path& file, const LoadOptions& opts) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ScenarioError(file.string(), 0, 0, "", "a readable scenario file", "cannot open it");
  std::stringstream ss;
  ss << in.rdbuf();
  std::error_code ec;
  fs::path abs = fs::absolute(file, ec);
  return parse_scenario(ss.str(), ec ? file : abs.lexically_normal(), opts);
}

}  // namespace probelab::sim
