#include "python/src/yaml_convert.h"

#include <cmath>

namespace py = pybind11;

namespace probelab::python {

namespace {

std::string where(const std::string& path) { return path.empty() ? "the scenario" : "'" + path + "'"; }

std::string float_text(double v) {
  if (std::isnan(v)) return ".nan";
  if (std::isinf(v)) return v > 0 ? ".inf" : "-.inf";
  return py::repr(py::float_(v)).cast<std::string>();
}

}  // namespace

YAML::Node to_yaml_node(py::handle o, const std::string& path, int depth) {
  // Deeper than any configuration (the YAML reader refuses such documents too), or a dict or list
  // that holds itself: an error, not a stack overflow.
  constexpr int kMaxDepth = 256;
  if (depth > kMaxDepth)
    throw py::value_error("a value nested more than " + std::to_string(kMaxDepth) + " levels deep at " +
                          where(path.substr(0, 80)) + (path.size() > 80 ? "..." : "") +
                          " (a dict or list that contains itself?)");
  if (o.is_none()) return YAML::Node(YAML::NodeType::Null);
  if (py::isinstance<py::bool_>(o)) return YAML::Node(o.cast<bool>() ? "true" : "false");
  if (py::isinstance<py::int_>(o)) return YAML::Node(py::str(o).cast<std::string>());
  if (py::isinstance<py::float_>(o)) return YAML::Node(float_text(o.cast<double>()));
  if (py::isinstance<py::str>(o)) {
    // PyUnicode_AsUTF8AndSize fails on an unpaired surrogate, which no file could hold either.
    Py_ssize_t n = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(o.ptr(), &n);
    if (!utf8) {
      PyErr_Clear();
      throw py::value_error("the text at " + where(path) + " is not valid Unicode (an unpaired surrogate)");
    }
    return YAML::Node(std::string(utf8, static_cast<std::size_t>(n)));
  }
  if (py::isinstance<py::dict>(o)) {
    YAML::Node map(YAML::NodeType::Map);
    for (auto [k, v] : o.cast<py::dict>()) {
      if (!py::isinstance<py::str>(k))
        throw py::type_error("scenario keys are strings; " + where(path) + " has the key " + py::repr(k).cast<std::string>());
      const std::string key = k.cast<std::string>();
      map[key] = to_yaml_node(v, path.empty() ? key : path + "." + key, depth + 1);
    }
    return map;
  }
  if (py::isinstance<py::list>(o) || py::isinstance<py::tuple>(o)) {
    YAML::Node seq(YAML::NodeType::Sequence);
    std::size_t i = 0;
    for (auto v : o) seq.push_back(to_yaml_node(v, (path.empty() ? "" : path + ".") + std::to_string(i++), depth + 1));
    return seq;
  }
  const py::object obj = py::reinterpret_borrow<py::object>(o);
  if (py::hasattr(obj, "__index__")) return YAML::Node(py::str(py::int_(obj)).cast<std::string>());
  if (py::hasattr(obj, "__float__")) return YAML::Node(float_text(py::float_(obj).cast<double>()));
  throw py::type_error("cannot put a " + py::str(o.get_type().attr("__name__")).cast<std::string>() + " into " +
                       where(path) + " (dict, list, str, int, float, bool or None)");
}

std::string to_yaml_text(py::handle value, bool flow) {
  YAML::Emitter out;
  if (flow) out << YAML::Flow;
  out << to_yaml_node(value);
  return out.c_str();
}

}  // namespace probelab::python
