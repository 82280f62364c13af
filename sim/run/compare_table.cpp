#include "sim/run/compare_table.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "graph/npy.h"
#include "probes/compare.h"
#include "probes/dump_writer.h"
#include "sim/run/run_manifests.h"
#include "sim/scenario/scenario_error.h"

namespace probelab::sim {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// One tensor of a dump, either format.
struct Item {
  std::uint32_t rank = 0, step = 0;
  std::string name;                 // as shown in the table
  std::string op, edge;             // probelab: op name, "out0"; msprobe: API name, "output.0"
  std::string type;                 // op type (probelab, when report.json is there) or API (msprobe)
  std::int64_t call = -1;           // n-th forward op of its type in (rank, step); -1: unknown
  bool forward = true;
  std::string dtype;
  std::vector<std::int64_t> shape;
  TableStats stats;
  std::function<std::optional<graph::Tensor>()> load;  // empty: statistics only
  std::string note;                 // why only statistics
};

json read_json(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const std::exception& e) {
    throw ScenarioError(f.string(), 0, 0, "", "a JSON dump manifest (probelab's or msprobe's dump.json)", e.what());
  }
}

// A statistic: a number, or the text probelab writes for a non-finite one ("nan", "inf", "-inf";
// also "NaN", "Infinity", "-Infinity").
std::optional<double> num(const json& j, const char* k) {
  if (!j.is_object() || !j.contains(k)) return std::nullopt;
  if (j[k].is_number()) return j[k].get<double>();
  if (!j[k].is_string()) return std::nullopt;
  const std::string t = j[k].get<std::string>();
  if (t == "nan" || t == "NaN") return std::nan("");
  if (t == "inf" || t == "Infinity") return INFINITY;
  if (t == "-inf" || t == "-Infinity") return -INFINITY;
  return std::nullopt;
}

// A number that names a step, rank or call in a dump: digits only, within 32 bits.
std::optional<std::uint32_t> small_number(std::string_view digits) {
  std::uint32_t v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return v;
}

// The number of the first path component "<prefix><digits>" (step3, rank12), 0 without one.
std::uint32_t number_in(const fs::path& file, const fs::path& rel, const char* prefix) {
  const std::size_t n = std::strlen(prefix);
  for (const auto& part : rel) {
    const std::string s = part.string();
    if (s.rfind(prefix, 0) != 0 || s.size() == n ||
        !std::all_of(s.begin() + static_cast<long>(n), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
      continue;
    if (auto v = small_number(std::string_view(s).substr(n))) return *v;
    throw ScenarioError(file.string(), 0, 0, "", fmt::format("a {} number below 2^32 in the directory name", prefix), s);
  }
  return 0;
}

void probelab_items(const fs::path& root, const fs::path& file, const std::shared_ptr<json>& m,
                    const std::map<std::pair<std::uint32_t, std::string>, std::string>& types, std::vector<Item>& out) {
  const fs::path dir = file.parent_path();
  for (const auto& e : (*m)["entries"]) {
    if (!e.is_object() || !e.contains("op") || !e.contains("edge")) continue;
    Item it;
    it.rank = e.value("rank", 0u);
    it.step = e.value("step", 0u);
    it.op = e.value("op", "");
    it.edge = e.value("edge", "");
    it.name = it.op + " " + it.edge;
    if (auto t = types.find({it.rank, it.op}); t != types.end()) it.type = t->second;
    it.forward = it.op.find("/grad") == std::string::npos && it.op.find(".grad") == std::string::npos &&
                 it.op.find("/update") == std::string::npos && it.op.find(".update") == std::string::npos;
    it.dtype = e.value("dtype", "");
    if (e.contains("shape")) it.shape = e["shape"].get<std::vector<std::int64_t>>();
    if (e.contains("statistics")) {
      const json& s = e["statistics"];
      it.stats = {num(s, "max"), num(s, "min"), num(s, "mean"), num(s, "l2"), num(s, "nan_count"), num(s, "inf_count")};
    }
    if (e.contains("file")) {
      it.load = [dir, m, e]() -> std::optional<graph::Tensor> { return probes::load_dump(dir, *m, e); };
    } else {
      it.note = fmt::format("{} capture", e.value("payload", "statistics"));
    }
    (void)root;
    out.push_back(std::move(it));
  }
}

void msprobe_items(const fs::path& root, const fs::path& file, const json& m, std::vector<Item>& out) {
  const fs::path rel = fs::relative(file.parent_path(), root);
  const std::uint32_t step = number_in(file, rel, "step"), rank = number_in(file, rel, "rank");
  const fs::path data_dir = file.parent_path() / "dump_tensor_data";
  const std::regex api(R"(^[A-Za-z]+\.(.+)\.(\d+)\.(forward|backward)$)");
  for (const auto& [name, rec] : m["data"].items()) {
    std::smatch sm;
    std::string type;
    std::int64_t call = -1;
    bool forward = name.find(".backward") == std::string::npos;
    if (std::regex_match(name, sm, api)) {
      type = sm[1].str();
      const auto n = small_number(sm[2].str());
      if (!n) throw ScenarioError(file.string(), 0, 0, "data." + name, "a call number below 2^32", sm[2].str());
      call = *n;
      forward = sm[3].str() == "forward";
    }
    for (const char* side : {"input_args", "output"}) {
      if (!rec.is_object() || !rec.contains(side) || !rec[side].is_array()) continue;
      for (std::size_t i = 0; i < rec[side].size(); ++i) {
        const json& t = rec[side][i];
        if (!t.is_object() || !t.contains("shape")) continue;
        Item it;
        it.rank = rank;
        it.step = step;
        it.op = name;
        it.edge = fmt::format("{}.{}", std::string(side) == "output" ? "output" : "input", i);
        it.name = name + "." + it.edge;
        it.type = type;
        it.call = call;
        it.forward = forward;
        it.dtype = t.value("dtype", "");
        it.shape = t["shape"].get<std::vector<std::int64_t>>();
        it.stats = {num(t, "Max"), num(t, "Min"), num(t, "Mean"), num(t, "Norm"), std::nullopt, std::nullopt};
        const std::string data = t.value("data_name", "");
        if (data.size() > 4 && data.ends_with(".npy")) {
          fs::path f;
          try {
            f = probes::dump_file_path(data_dir, data);  // inside dump_tensor_data, as probelab's own
          } catch (const probes::DumpError& e) {
            throw ScenarioError(file.string(), 0, 0, fmt::format("data.{}.{}[{}].data_name", name, side, i),
                                "a file name inside dump_tensor_data", e.what());
          }
          const std::string key = fmt::format("data.{}.{}[{}].data_name", name, side, i);
          it.load = [f, file, key]() -> std::optional<graph::Tensor> {
            try {
              return graph::read_npy(f.string());
            } catch (const std::exception& e) {
              throw ScenarioError(file.string(), 0, 0, key, "a readable .npy file in dump_tensor_data", e.what());
            }
          };
        } else if (!data.empty()) {
          it.note = fmt::format("{} needs torch: compared by statistics (dump with file_format npy to compare tensors)", data);
        } else {
          it.note = "statistics dump";
        }
        out.push_back(std::move(it));
      }
    }
  }
}

struct Side {
  std::vector<Item> items;
  bool msprobe = false;
};

Side load_side(const fs::path& root) {
  const std::vector<fs::path> files = run_manifests(root);
  if (files.empty()) throw ScenarioError(root.string(), 0, 0, "", "a directory holding dump.json manifests", "none");
  // Op types of a probelab run, from its report.
  std::map<std::pair<std::uint32_t, std::string>, std::string> types;
  if (fs::exists(root / "report.json")) {
    const json r = read_json(root / "report.json");
    if (r.contains("ops") && r["ops"].is_array())
      for (const auto& o : r["ops"])
        if (o.is_object()) types[{o.value("rank", 0u), o.value("op", "")}] = o.value("type", "");
  }
  Side s;
  for (const auto& f : files) {
    auto m = std::make_shared<json>(read_json(f));
    const bool ours = m->is_object() && m->contains("format_version") && m->contains("entries") && (*m)["entries"].is_array();
    const bool msprobe = !ours && m->is_object() && m->contains("data") && (*m)["data"].is_object() && m->contains("task");
    // A hand-edited manifest (checksum, a field of the wrong type) is bad input naming the file.
    try {
      if (ours) {
        probes::check_manifest(*m, f.filename().string());
        probelab_items(root, f, m, types, s.items);
      } else if (msprobe) {
        msprobe_items(root, f, *m, s.items);
        s.msprobe = true;
      }
    } catch (const probes::DumpError& e) {
      throw ScenarioError(f.string(), 0, 0, "", "a JSON dump manifest as probelab wrote it", e.what());
    } catch (const json::exception& e) {
      throw ScenarioError(f.string(), 0, 0, "", "a JSON dump manifest whose fields have msprobe's types", e.what());
    }
    if (!ours && !msprobe) {
      throw ScenarioError(f.string(), 0, 0, "", "probelab's dump.json (format_version, entries) or msprobe's (task, data)",
                          "a foreign manifest");
    }
  }
  if (s.items.empty())
    throw ScenarioError(files.front().string(), 0, 0, "", "a dump manifest listing at least one captured tensor",
                        "none (an empty 'entries' list or 'data' map)");
  // The n-th forward op of each type, per (rank, step), in dump order.
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::string>, std::vector<std::string>> seen;
  for (auto& it : s.items) {
    if (it.call >= 0 || it.type.empty() || !it.forward) continue;
    auto& ops = seen[{it.rank, it.step, it.type}];
    auto pos = std::find(ops.begin(), ops.end(), it.op);
    if (pos == ops.end()) pos = ops.insert(ops.end(), it.op);
    it.call = pos - ops.begin();
  }
  return s;
}

// probelab "out0"/"in1" <-> msprobe "output.0"/"input.1"
std::string edge_key(const std::string& e) {
  if (e.rfind("out", 0) == 0 && e.find('.') == std::string::npos) return "output." + e.substr(3);
  if (e.rfind("in", 0) == 0 && e.find('.') == std::string::npos) return "input." + e.substr(2);
  return e;
}

bool same_tensor(const Item& a, const Item& b, bool cross) {
  if (a.rank != b.rank || a.step != b.step) return false;
  if (!cross) return a.op == b.op && a.edge == b.edge;
  if (a.call < 0 || b.call != a.call || !a.forward || !b.forward || edge_key(a.edge) != edge_key(b.edge)) return false;
  return probes::op_type_matches(a.type, b.type) || probes::op_type_matches(b.type, a.type);
}

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

bool has_nonfinite(const TableStats& s) {
  if (s.nan_count || s.inf_count) return s.nan_count.value_or(0) > 0 || s.inf_count.value_or(0) > 0;
  for (const auto& v : {s.max, s.min, s.mean, s.norm})
    if (v && !std::isfinite(*v)) return true;
  return false;
}

// Statistics-only rows. "No" when NaN/Inf appear on one side only, as for tensors: the NaN or Inf
// counts differ (so at least that many elements are non-finite on one side only) or, without
// counts (msprobe), one side's statistics are non-finite and the other's are not. Otherwise
// "Warning" when a statistic differs by more than rtol, relatively (equal non-finite values agree).
void compare_stats(TableRow& r, double rtol) {
  const auto count = [](const std::optional<double>& c) { return c ? fmt::format("{:.0f}", *c) : std::string("?"); };
  const bool counted = r.npu.nan_count && r.bench.nan_count && r.npu.inf_count && r.bench.inf_count;
  const bool one_side = counted ? r.npu.nan_count != r.bench.nan_count || r.npu.inf_count != r.bench.inf_count
                                : has_nonfinite(r.npu) != has_nonfinite(r.bench);
  if (one_side) {
    r.result = "No";
    r.message += (r.message.empty() ? "" : "; ") +
                 fmt::format("NaN/Inf on one side only (NaN count {} vs {}, Inf count {} vs {})", count(r.npu.nan_count),
                             count(r.bench.nan_count), count(r.npu.inf_count), count(r.bench.inf_count));
    return;
  }
  double worst = 0;
  std::string which;
  auto one = [&](const char* n, const std::optional<double>& x, const std::optional<double>& y) {
    if (!x || !y) return;
    const bool same = *x == *y || (std::isnan(*x) && std::isnan(*y));
    const double d = same ? 0.0 : std::abs(*x - *y) / std::max(std::abs(*y), 1e-30);
    if (which.empty() || d > worst || std::isnan(d)) {
      worst = d;
      which = n;
    }
  };
  one("Max", r.npu.max, r.bench.max);
  one("Min", r.npu.min, r.bench.min);
  one("Mean", r.npu.mean, r.bench.mean);
  one("Norm", r.npu.norm, r.bench.norm);
  r.result = worst > rtol || std::isnan(worst) ? "Warning" : "Yes";
  r.message += (r.message.empty() ? "" : "; ") +
               (which.empty() ? std::string("no statistics to compare")
                              : fmt::format("largest relative statistics difference {:.6g} ({})", worst, which));
}

}  // namespace

std::size_t CompareTable::reached() const {
  return static_cast<std::size_t>(std::count_if(rows.begin(), rows.end(), [](const TableRow& r) { return r.result == "Yes"; }));
}
std::size_t CompareTable::not_reached() const { return rows.size() - reached(); }

CompareTable build_compare_table(const fs::path& a, const fs::path& b, const TableOptions& opts) {
  const Side sa = load_side(a), sb = load_side(b);
  const bool cross = sa.msprobe != sb.msprobe;
  CompareTable t;
  t.npu_msprobe = sa.msprobe;
  t.bench_msprobe = sb.msprobe;
  std::vector<bool> used(sb.items.size(), false);
  for (const Item& x : sa.items) {
    std::size_t j = 0;
    for (; j < sb.items.size(); ++j)
      if (!used[j] && same_tensor(x, sb.items[j], cross)) break;
    if (j == sb.items.size()) {
      ++t.only_a;
      continue;
    }
    used[j] = true;
    const Item& y = sb.items[j];
    TableRow r;
    r.rank = x.rank;
    r.step = x.step;
    r.npu_name = x.name;
    r.bench_name = y.name;
    r.npu_dtype = x.dtype;
    r.bench_dtype = y.dtype;
    r.npu_shape = x.shape;
    r.bench_shape = y.shape;
    r.npu = x.stats;
    r.bench = y.stats;
    std::optional<graph::Tensor> tx, ty;
    try {
      if (x.load) tx = x.load();
      if (y.load) ty = y.load();
    } catch (const ScenarioError&) {
      throw;  // names the file already (an msprobe dump's data file)
    } catch (const std::exception& e) {
      throw ScenarioError(x.load && !tx ? a.string() : b.string(), 0, 0, r.npu_name, "a readable dump file", e.what());
    }
    if (tx && ty && tx->numel() == ty->numel()) {
      const auto vx = tx->to_f64(), vy = ty->to_f64();
      const probes::Metrics m = probes::compute_metrics(vx, vy, tx->dtype());
      double sq = 0;
      for (std::size_t i = 0; i < vx.size(); ++i)
        if (std::isfinite(vx[i]) && std::isfinite(vy[i])) sq += (vx[i] - vy[i]) * (vx[i] - vy[i]);
      r.cosine = m.cosine;
      r.euc_dist = std::sqrt(sq);
      r.max_abs_err = m.max_abs_err;
      r.max_rel_err = m.max_rel_err;
      r.one_thousandth = m.within_0_1pct;
      r.five_thousandths = m.within_0_5pct;
      const probes::Verdict v = probes::judge(m, tx->dtype(), opts.criteria);
      r.result = v.pass ? "Yes" : "No";
      for (const auto& why : v.reasons) r.message += (r.message.empty() ? "" : "; ") + why;
    } else {
      if (tx && ty) r.message = fmt::format("element counts differ ({} vs {})", tx->numel(), ty->numel());
      else r.message = !x.note.empty() ? x.note : y.note;
      if (tx && ty) r.result = "No";
      else compare_stats(r, opts.stats_rtol);
    }
    t.rows.push_back(std::move(r));
  }
  t.only_b = static_cast<std::size_t>(std::count(used.begin(), used.end(), false));
  return t;
}

namespace {

json opt(const std::optional<double>& v) {
  if (!v) return nullptr;
  if (std::isnan(*v)) return "nan";
  if (std::isinf(*v)) return *v > 0 ? "inf" : "-inf";
  return *v;
}

std::string cell(const std::optional<double>& v) { return v ? fmt::format("{:.6g}", *v) : std::string("N/A"); }

std::string csv_quote(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

json CompareTable::to_json() const {
  json rows_j = json::array();
  for (const auto& r : rows)
    rows_j.push_back({{"rank", r.rank},
                      {"step", r.step},
                      {"NPU Name", r.npu_name},
                      {"Bench Name", r.bench_name},
                      {"NPU Dtype", r.npu_dtype},
                      {"Bench Dtype", r.bench_dtype},
                      {"NPU Tensor Shape", r.npu_shape},
                      {"Bench Tensor Shape", r.bench_shape},
                      {"Cosine", opt(r.cosine)},
                      {"EucDist", opt(r.euc_dist)},
                      {"MaxAbsErr", opt(r.max_abs_err)},
                      {"MaxRelativeErr", opt(r.max_rel_err)},
                      {"One Thousandth Err Ratio", opt(r.one_thousandth)},
                      {"Five Thousandths Err Ratio", opt(r.five_thousandths)},
                      {"NPU max", opt(r.npu.max)},
                      {"NPU min", opt(r.npu.min)},
                      {"NPU mean", opt(r.npu.mean)},
                      {"NPU l2norm", opt(r.npu.norm)},
                      {"Bench max", opt(r.bench.max)},
                      {"Bench min", opt(r.bench.min)},
                      {"Bench mean", opt(r.bench.mean)},
                      {"Bench l2norm", opt(r.bench.norm)},
                      {"Accuracy Reached or Not", r.result},
                      {"Err_message", r.message}});
  return {{"rows", rows_j}, {"reached", reached()}, {"not_reached", not_reached()}, {"only_npu", only_a},
          {"only_bench", only_b}};
}

std::string CompareTable::to_csv() const {
  std::string s =
      "rank,step,NPU Name,Bench Name,NPU Dtype,Bench Dtype,NPU Tensor Shape,Bench Tensor Shape,Cosine,EucDist,MaxAbsErr,"
      "MaxRelativeErr,One Thousandth Err Ratio,Five Thousandths Err Ratio,NPU max,NPU min,NPU mean,NPU l2norm,Bench max,"
      "Bench min,Bench mean,Bench l2norm,Accuracy Reached or Not,Err_message\n";
  for (const auto& r : rows) {
    std::vector<std::string> c = {std::to_string(r.rank), std::to_string(r.step), r.npu_name, r.bench_name, r.npu_dtype,
                                  r.bench_dtype, shape_text(r.npu_shape), shape_text(r.bench_shape), cell(r.cosine),
                                  cell(r.euc_dist), cell(r.max_abs_err), cell(r.max_rel_err), cell(r.one_thousandth),
                                  cell(r.five_thousandths), cell(r.npu.max), cell(r.npu.min), cell(r.npu.mean),
                                  cell(r.npu.norm), cell(r.bench.max), cell(r.bench.min), cell(r.bench.mean),
                                  cell(r.bench.norm), r.result, r.message};
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (i) s += ',';
      s += csv_quote(c[i]);
    }
    s += "\n";
  }
  return s;
}

}  // namespace probelab::sim
