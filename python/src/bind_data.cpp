// Data out of a run: dump entries and fetched outputs as numpy arrays (zstd and XOR-delta decoded,
// checksums verified, dtype and shape checked against the manifest), the HTML renderers and the
// registries.
#include <cstring>
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "graph/npy.h"
#include "probes/dump_writer.h"
#include "python/src/bindings.h"
#include "sim/campaign/campaign_html.h"
#include "sim/html/report_html.h"
#include "sim/run/catalog.h"

namespace py = pybind11;

namespace probelab::python {

namespace {

using nlohmann::json;

const char* numpy_dtype(graph::DType t) {
  switch (t) {
    case graph::DType::F32: return "float32";
    case graph::DType::F16: return "float16";
    case graph::DType::F64: return "float64";
    case graph::DType::I32: return "int32";
    case graph::DType::I64: return "int64";
    case graph::DType::Bool: return "bool";
    case graph::DType::I8: return "int8";
    case graph::DType::U8: return "uint8";
    case graph::DType::BF16: return "float32";  // numpy has no bfloat16: widened exactly
  }
  return "float32";
}

py::array to_numpy(const graph::Tensor& t) {
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  py::array a(py::dtype(numpy_dtype(t.dtype())), shape);
  if (t.dtype() == graph::DType::BF16) {
    const std::vector<float> v = t.to_f32();
    std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(float));
  } else {
    if (static_cast<std::size_t>(a.nbytes()) != t.nbytes())
      throw std::runtime_error("tensor of " + std::to_string(t.nbytes()) + " bytes does not fill its array of " +
                               std::to_string(a.nbytes()));
    std::memcpy(a.mutable_data(), t.bytes().data(), t.nbytes());
  }
  return a;
}

// A dump.json text as JSON, checked as the CLI checks it (format, manifest_crc32): an edited or
// corrupt manifest is bad input (probes::DumpError) naming `what`, never an internal error.
json checked_manifest(const std::string& text, const std::string& what) {
  json manifest = json::parse(text, nullptr, false);
  if (manifest.is_discarded()) throw probes::DumpError(what + ": not valid JSON");
  probes::check_manifest(manifest, what);
  return manifest;
}

py::array load_dump(const std::string& dir, const std::string& manifest_text, const std::string& entry_text) {
  const json manifest = checked_manifest(manifest_text, dir + "/dump.json");
  const json entry = json::parse(entry_text);
  graph::Tensor t;
  {
    py::gil_scoped_release nogil;
    t = probes::load_dump(dir, manifest, entry);
  }
  const std::string want = entry.value("dtype", std::string());
  const auto want_dtype = graph::parse_dtype(want);
  if (!want_dtype) throw probes::DumpError("dump entry with unknown dtype '" + want + "'");
  if (entry.contains("shape") && entry["shape"].get<graph::Shape>() != t.shape())
    throw probes::DumpError("dump file " + entry.value("file", std::string()) + " holds shape " +
                             graph::shape_str(t.shape()) + ", the manifest says " + entry["shape"].dump());
  // BF16 is stored widened to float32 (npy has no bfloat16); every other dtype as written.
  if (t.dtype() != *want_dtype && !(*want_dtype == graph::DType::BF16 && t.dtype() == graph::DType::F32))
    throw probes::DumpError("dump file " + entry.value("file", std::string()) + " holds " +
                             std::string(graph::dtype_name(t.dtype())) + ", the manifest says " + want);
  return to_numpy(t);
}

// A page rendered from a JSON text; a field of the wrong type (a hand-made dict) is a ValueError
// naming what was rendered, not an internal error.
template <class Render>
std::string render(const char* what, Render&& page, const std::string& text) {
  try {
    return page(json::parse(text));
  } catch (const json::exception& e) {
    throw py::value_error(std::string(what) + ": a field has an unexpected type or value (" + e.what() + ")");
  }
}

}  // namespace

void bind_data(py::module_& m) {
  m.def("check_manifest", [](const std::string& text, const std::string& what) { checked_manifest(text, what); },
        py::arg("text"), py::arg("what"),
        "Raises BadInputError unless the dump.json text is an unmodified probelab dump manifest.");
  m.def("load_dump", &load_dump, py::arg("dir"), py::arg("manifest"), py::arg("entry"),
        "The tensor of one dump.json entry (JSON texts) as a numpy array.");
  m.def("read_npy", [](const std::string& path) { return to_numpy(graph::read_npy(path)); }, py::arg("path"),
        "A .npy file as a numpy array (float16 kept as float16).");
  m.def("report_html", [](const std::string& report) { return render("report", html::report_html, report); },
        py::arg("report"), "report.html from report.json text.");
  m.def("campaign_html",
        [](const std::string& summary) { return render("summary", sim::campaign_summary_html, summary); },
        py::arg("summary"), "summary.html from a campaign's summary.json text.");
  m.def("report_sections", &html::report_sections, "Section ids of report.html.");
  m.def("campaign_sections", &sim::campaign_html_sections, "Section ids of a campaign's summary.html.");
  m.def("catalog", [] { return sim::catalog_json().dump(); }, "Every registry as JSON text.");
}

}  // namespace probelab::python
