// YAML model loader, see model_yaml.h.
#include "graph/model_yaml.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "graph/format.h"
#include "graph/npy.h"
#include "graph/op_registry.h"
#include "graph/yaml_check.h"

namespace probelab::graph {
namespace {

namespace fs = std::filesystem;

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const YAML::Node& n, std::string_view key, const std::string& msg) const {
    const YAML::Mark m = n.Mark();
    const std::string where =
        m.is_null() || m.line < 0 ? file_ : fmt::format("{}:{}:{}", file_, m.line + 1, m.column + 1);
    throw GraphError(key.empty() ? fmt::format("{}: {}", where, msg) : fmt::format("{}: {}: {}", where, key, msg));
  }

  void keys(const YAML::Node& map, std::string_view key, std::initializer_list<std::string_view> allowed) const {
    if (!map.IsMap()) fail(map, key, "expected a mapping");
    for (auto it = map.begin(); it != map.end(); ++it) {
      const std::string k = it->first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), k) != allowed.end()) continue;
      const std::string hint = k.find(')') != std::string::npos
                                   ? "; a value with commas inside {...} must be quoted, e.g. init: \"uniform(-1, 1)\""
                                   : "";
      fail(it->first, k, fmt::format("unknown key in {} (allowed: {}){}", key, fmt::join(allowed, ", "), hint));
    }
  }

  std::string str(const YAML::Node& n, std::string_view key) const {
    if (!n.IsScalar()) fail(n, key, "expected a string");
    return n.Scalar();
  }

  std::int64_t integer(const YAML::Node& n, std::string_view key) const {
    std::int64_t v = 0;
    const std::string s = n.IsScalar() ? n.Scalar() : "";
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (!n.IsScalar() || ec != std::errc() || p != s.data() + s.size())
      fail(n, key, fmt::format("expected an integer, got '{}'", s));
    return v;
  }

  double number(const YAML::Node& n, std::string_view key) const {
    const std::string s = n.IsScalar() ? n.Scalar() : "";
    try {
      std::size_t used = 0;
      const double v = std::stod(s, &used);
      if (used == s.size()) return v;
    } catch (const std::exception&) {
    }
    fail(n, key, fmt::format("expected a number, got '{}'", s));
  }

  bool boolean(const YAML::Node& n, std::string_view key) const {
    const std::string s = n.IsScalar() ? n.Scalar() : "";
    if (s == "true" || s == "True" || s == "yes") return true;
    if (s == "false" || s == "False" || s == "no") return false;
    fail(n, key, fmt::format("expected true or false, got '{}'", s));
  }

  Shape shape(const YAML::Node& n, std::string_view key) const {
    if (!n.IsSequence()) fail(n, key, "expected a shape list such as [2, 3]");
    Shape s;
    for (const auto& d : n) {
      s.push_back(integer(d, key));
      if (s.back() < 0) fail(d, key, "dimensions must be >= 0");
    }
    try {
      (void)numel(s);  // a product that does not wrap, here where the file and line are known
    } catch (const GraphError& e) {
      fail(n, key, e.what());
    }
    return s;
  }

  DType dtype(const YAML::Node& n, std::string_view key) const {
    const auto t = parse_dtype(str(n, key));
    if (!t) {
      std::vector<std::string_view> names;
      for (std::uint8_t v = 0; v < kNumDTypes; ++v) names.push_back(dtype_name(static_cast<DType>(v)));
      fail(n, key, fmt::format("unknown dtype '{}' (expected {})", n.Scalar(), fmt::join(names, ", ")));
    }
    return *t;
  }

  InitSpec init(const YAML::Node& n, std::string_view key) const {
    try {
      return parse_init(str(n, key));
    } catch (const GraphError& e) {
      fail(n, key, e.what());
    }
  }

  std::vector<std::string> names(const YAML::Node& n, std::string_view key) const {
    if (n.IsScalar()) return {n.Scalar()};
    if (!n.IsSequence()) fail(n, key, "expected a list of tensor names");
    std::vector<std::string> out;
    for (const auto& x : n) out.push_back(x.IsNull() ? std::string() : str(x, key));
    return out;
  }

  AttrValue attr(const YAML::Node& n, const std::string& key) const {
    if (n.IsScalar()) return scalar_attr(n);
    if (!n.IsSequence()) fail(n, key, "expected a number, a string or a list of them");
    std::vector<AttrValue> items;
    for (const auto& x : n) {
      if (!x.IsScalar()) fail(x, key, "nested lists and maps are not attribute values");
      items.push_back(scalar_attr(x));
    }
    auto all = [&](std::size_t idx) {
      return std::all_of(items.begin(), items.end(), [&](const AttrValue& v) { return v.index() == idx; });
    };
    if (all(0)) {
      std::vector<std::int64_t> v;
      for (const auto& x : items) v.push_back(std::get<std::int64_t>(x));
      return v;
    }
    if (std::all_of(items.begin(), items.end(), [](const AttrValue& v) { return v.index() <= 1; })) {
      std::vector<double> v;
      for (const auto& x : items)
        v.push_back(x.index() == 0 ? static_cast<double>(std::get<std::int64_t>(x)) : std::get<double>(x));
      return v;
    }
    if (all(2)) {
      std::vector<std::string> v;
      for (const auto& x : items) v.push_back(std::get<std::string>(x));
      return v;
    }
    fail(n, key, "a list attribute mixes numbers and strings");
  }

  std::string dir() const { return fs::path(file_).parent_path().string(); }
  const std::string& file() const { return file_; }

 private:
  static AttrValue scalar_attr(const YAML::Node& n) {
    const std::string& s = n.Scalar();
    if (n.Tag() == "!") return s;  // quoted: always a string
    std::int64_t i = 0;
    if (auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), i); ec == std::errc() && p == s.data() + s.size())
      return i;
    if (s == "true" || s == "True") return std::int64_t{1};
    if (s == "false" || s == "False") return std::int64_t{0};
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && !std::isspace(static_cast<unsigned char>(s[0]))) return d;
    return s;
  }

  std::string file_;
};

struct Loader {
  Reader r;
  ModelFile m;
  std::map<std::string, int> auto_names;

  // A weight from its spec (map, or a bare shape list); declared as an initializer named `name`.
  void weight(const YAML::Node& n, const std::string& name, std::string_view key) {
    YAML::Node spec = n;
    Shape shape;
    bool has_shape = false;
    if (n.IsSequence()) {
      shape = r.shape(n, key);
      has_shape = true;
    } else {
      r.keys(n, key, {"name", "shape", "dtype", "init", "seed", "file", "trainable"});
      if (n["shape"]) {
        shape = r.shape(n["shape"], "shape");
        has_shape = true;
      }
    }
    const bool is_map = n.IsMap();
    const bool trainable = is_map && n["trainable"] ? r.boolean(n["trainable"], "trainable") : true;
    const DType dtype = is_map && n["dtype"] ? r.dtype(n["dtype"], "dtype") : DType::F32;
    Tensor value;
    if (is_map && n["file"]) {
      if (n["init"] || n["seed"]) r.fail(n["file"], "file", "a weight has either a file or an init, not both");
      const fs::path p = fs::path(r.dir()) / r.str(n["file"], "file");
      try {
        value = read_npy(p.string());
      } catch (const GraphError& e) {
        r.fail(n["file"], "file", e.what());
      }
      if (has_shape && value.shape() != shape)
        r.fail(n["shape"], "shape", fmt::format("{} holds {}, not {}", p.string(), shape_str(value.shape()),
                                                shape_str(shape)));
      if (n["dtype"] && value.dtype() != dtype)
        r.fail(n["dtype"], "dtype", fmt::format("{} holds {}, not {}", p.string(), dtype_name(value.dtype()),
                                                dtype_name(dtype)));
    } else {
      if (!has_shape) r.fail(n, key, fmt::format("weight '{}' needs a shape (or a file)", name));
      const InitSpec init = is_map && n["init"] ? r.init(n["init"], "init")
                            : shape.size() >= 2 ? InitSpec{InitSpec::Kind::Kaiming}
                                                : InitSpec{InitSpec::Kind::Zeros};
      const std::uint64_t seed = is_map && n["seed"] ? static_cast<std::uint64_t>(r.integer(n["seed"], "seed"))
                                                     : derive_seed(m.seed, name);
      value = make_init(init, {dtype, shape, Format::ND}, seed);
    }
    try {
      m.graph.add_initializer(name, std::move(value), trainable ? TensorKind::Weight : TensorKind::Constant);
    } catch (const GraphError& e) {
      r.fail(n, key, e.what());
    }
  }

  void input(const YAML::Node& n) {
    r.keys(n, "input", {"name", "shape", "dtype", "init", "format"});
    if (!n["name"]) r.fail(n, "input", "needs a name");
    if (!n["shape"]) r.fail(n, "input", "needs a shape");
    const std::string name = r.str(n["name"], "name");
    TensorDesc d{n["dtype"] ? r.dtype(n["dtype"], "dtype") : DType::F32, r.shape(n["shape"], "shape"), Format::ND};
    if (n["format"]) {
      const auto f = parse_format(r.str(n["format"], "format"));
      if (!f) r.fail(n["format"], "format", "expected ND, NCHW, NHWC, NC1HWC0 or FRACTAL_NZ");
      d.format = *f;
    }
    try {
      m.graph.add_tensor({name, d, TensorKind::Input});
      m.graph.mark_input(name);
    } catch (const GraphError& e) {
      r.fail(n, "input", e.what());
    }
    if (n["init"]) m.input_inits[name] = r.init(n["init"], "init");
  }

  void op(const YAML::Node& n, std::string& previous) {
    r.keys(n, "op", {"name", "type", "inputs", "outputs", "weights", "attrs", "scope", "debug"});
    if (!n["type"]) r.fail(n, "op", "needs a type");
    Op op;
    op.type = r.str(n["type"], "type");
    const OpDef* def = OpRegistry::instance().find(op.type);
    if (!def)
      r.fail(n["type"], "type", fmt::format("unknown op type '{}' (known: {})", op.type,
                                            fmt::join(OpRegistry::instance().all_names(), ", ")));
    if (n["name"]) {
      op.name = r.str(n["name"], "name");
    } else {
      std::string base = op.type;
      std::transform(base.begin(), base.end(), base.begin(), [](unsigned char c) { return std::tolower(c); });
      op.name = fmt::format("{}{}", base, ++auto_names[base]);
    }
    op.scope = n["scope"] ? r.str(n["scope"], "scope") : fmt::format("{}/{}", m.graph.name(), op.name);
    if (n["inputs"]) {
      op.inputs = r.names(n["inputs"], "inputs");
    } else if (!previous.empty()) {
      op.inputs = {previous};
    }
    for (const std::string& in : op.inputs)
      if (!in.empty() && !m.graph.find_tensor(in))
        r.fail(n["inputs"] ? n["inputs"] : n, "inputs",
               fmt::format("op '{}' reads '{}', which is not an input, a weight or the output of an earlier op",
                           op.name, in));
    if (n["weights"]) {
      const YAML::Node& ws = n["weights"];
      if (!ws.IsMap()) r.fail(ws, "weights", "expected a mapping of weight names to specs");
      for (auto it = ws.begin(); it != ws.end(); ++it) {
        const std::string full = fmt::format("{}/{}", op.name, it->first.Scalar());
        weight(it->second, full, it->first.Scalar());
        op.inputs.push_back(full);
      }
    }
    if (n["outputs"]) {
      op.outputs = r.names(n["outputs"], "outputs");
    } else {
      const int count = def->num_outputs >= 0 ? def->num_outputs : std::max(def->min_outputs, 1);
      for (int i = 0; i < count; ++i) op.outputs.push_back(i == 0 ? op.name : fmt::format("{}:{}", op.name, i));
    }
    if (n["attrs"]) {
      const YAML::Node& as = n["attrs"];
      if (!as.IsMap()) r.fail(as, "attrs", "expected a mapping of attribute names to values");
      for (auto it = as.begin(); it != as.end(); ++it) op.attrs[it->first.Scalar()] = r.attr(it->second, it->first.Scalar());
    }
    if (n["debug"]) {
      const YAML::Node& d = n["debug"];
      r.keys(d, "debug", {"sample_rate", "capture"});
      if (d["sample_rate"]) {
        const double rate = r.number(d["sample_rate"], "sample_rate");
        if (!(rate > 0.0 && rate <= 1.0)) r.fail(d["sample_rate"], "sample_rate", "expected a rate in (0, 1]");
        op.debug.sample_rate = rate;
      }
      if (d["capture"]) op.debug.capture = r.boolean(d["capture"], "capture");
    }
    try {
      previous = m.graph.add_op(std::move(op)).outputs.front();
    } catch (const GraphError& e) {
      r.fail(n, "op", e.what());
    }
  }

  void model(const YAML::Node& root) {
    if (!root.IsMap()) r.fail(root, "", "a model file is a mapping with name, inputs, weights, ops, outputs");
    r.keys(root, "model", {"name", "doc", "seed", "inputs", "weights", "ops", "layers", "outputs"});
    if (!root["name"]) r.fail(root, "name", "a model needs a name");
    m.graph.set_name(r.str(root["name"], "name"));
    if (root["seed"]) m.seed = static_cast<std::uint64_t>(r.integer(root["seed"], "seed"));
    if (root["ops"] && root["layers"]) r.fail(root["layers"], "layers", "give either ops or layers, not both");
    if (root["inputs"]) {
      if (!root["inputs"].IsSequence()) r.fail(root["inputs"], "inputs", "expected a list");
      for (const auto& n : root["inputs"]) input(n);
    }
    if (root["weights"]) {
      if (!root["weights"].IsSequence()) r.fail(root["weights"], "weights", "expected a list");
      for (const auto& n : root["weights"]) {
        if (!n.IsMap() || !n["name"]) r.fail(n, "weights", "each weight is a mapping with a name");
        weight(n, r.str(n["name"], "name"), "weight");
      }
    }
    const YAML::Node ops = root["ops"] ? root["ops"] : root["layers"];
    if (!ops || !ops.IsSequence() || ops.size() == 0) r.fail(ops ? ops : root, "ops", "expected a non-empty list of ops");
    std::string previous = m.graph.inputs().empty() ? std::string() : m.graph.inputs().front();
    for (const auto& n : ops) op(n, previous);
    if (root["outputs"]) {
      for (const std::string& o : r.names(root["outputs"], "outputs")) {
        if (!m.graph.find_tensor(o)) r.fail(root["outputs"], "outputs", fmt::format("no tensor named '{}'", o));
        m.graph.mark_output(o);
      }
    } else {
      for (const std::string& o : m.graph.ops().back().outputs) m.graph.mark_output(o);
    }
    try {
      m.graph.validate();
    } catch (const GraphError& e) {
      throw GraphError(fmt::format("{}: {}", r.file(), e.what()));
    }
  }
};

}  // namespace

ModelFile parse_model_yaml(const std::string& text, const std::string& path) {
  Loader l{Reader(path), {}, {}};
  l.m.path = path;
  YAML::Node root;
  if (auto issue = check_yaml_text(text))
    throw GraphError(fmt::format("{}:{}:{}: expected {}, got {}", path, issue->line, issue->column, issue->expected,
                                 issue->message));
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw GraphError(fmt::format("{}:{}:{}: YAML syntax error: {}", path, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  if (auto issue = check_yaml_document(root))
    throw GraphError(fmt::format("{}:{}:{}: {}: {}", path, issue->line, issue->column, issue->key, issue->message));
  l.model(root);
  return std::move(l.m);
}

ModelFile load_model_yaml(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw GraphError(fmt::format("{}: cannot open model file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_model_yaml(ss.str(), path);
}

std::map<std::string, Tensor> make_feeds(const ModelFile& m, std::uint64_t seed) {
  std::map<std::string, Tensor> feeds;
  for (const std::string& name : m.graph.inputs()) {
    const TensorInfo& t = m.graph.tensor(name);
    auto it = m.input_inits.find(name);
    const InitSpec spec = it != m.input_inits.end() ? it->second
                          : is_float(t.desc.dtype)  ? InitSpec{InitSpec::Kind::Normal, 0.0, 1.0}
                                                    : InitSpec{InitSpec::Kind::Zeros};
    Tensor v = make_init(spec, {t.desc.dtype, t.desc.shape, Format::ND}, derive_seed(seed, name));
    feeds.emplace(name, t.desc.format == Format::ND ? std::move(v) : convert_format(v, t.desc.format));
  }
  return feeds;
}

}  // namespace probelab::graph
