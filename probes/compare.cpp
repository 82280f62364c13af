#include "probes/compare.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "graph/format.h"
#include "graph/op_registry.h"

namespace probelab::probes {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kRelEps = 1e-7;  // relative-error floor for near-zero references (as CANN's |g| + 1e-7)

/// Ordered integer key of a float bit pattern of `bits` width (sign-magnitude -> two's complement).
std::int64_t ordered(std::uint64_t v, int bits) {
  std::uint64_t sign = std::uint64_t{1} << (bits - 1);
  std::uint64_t mag = v & (sign - 1);
  return (v & sign) ? -static_cast<std::int64_t>(mag) : static_cast<std::int64_t>(mag);
}

/// Bit patterns of `vals` rounded to `dtype`; widths: 16 (F16/BF16), 32, 64.
std::vector<std::uint64_t> bits_of(std::span<const double> vals, graph::DType dtype, int& width) {
  std::vector<std::uint64_t> out(vals.size());
  switch (dtype) {
    case graph::DType::F16:
    case graph::DType::BF16: {
      width = 16;
      auto t = graph::Tensor::from_f64({static_cast<std::int64_t>(vals.size())}, vals, dtype);
      auto d = t.data<std::uint16_t>();
      for (std::size_t i = 0; i < vals.size(); ++i) out[i] = d[i];
      break;
    }
    case graph::DType::F32:
      width = 32;
      for (std::size_t i = 0; i < vals.size(); ++i) out[i] = std::bit_cast<std::uint32_t>(static_cast<float>(vals[i]));
      break;
    default:
      width = 64;
      for (std::size_t i = 0; i < vals.size(); ++i) out[i] = std::bit_cast<std::uint64_t>(vals[i]);
      break;
  }
  return out;
}

std::uint64_t ulp_bits(std::uint64_t a, std::uint64_t b, int width, double av, double bv) {
  if (std::isnan(av) || std::isnan(bv)) return (std::isnan(av) && std::isnan(bv)) ? 0 : std::numeric_limits<std::uint64_t>::max();
  std::int64_t ka = ordered(a, width), kb = ordered(b, width);
  return ka > kb ? static_cast<std::uint64_t>(ka - kb) : static_cast<std::uint64_t>(kb - ka);
}

std::vector<double> logical_f64(const graph::Tensor& t) {
  if (t.desc().format == graph::Format::NC1HWC0 || t.desc().format == graph::Format::FRACTAL_NZ ||
      t.desc().format == graph::Format::NHWC)
    return graph::to_logical(t).to_f64();
  return t.to_f64();
}

double smallest_normal(graph::DType dtype) {
  switch (dtype) {
    case graph::DType::F16: return 0x1p-14;
    case graph::DType::BF16:
    case graph::DType::F32: return 0x1p-126;
    case graph::DType::F64: return 0x1p-1022;
    default: return 0.0;
  }
}

}  // namespace

std::uint64_t ulp_distance(double a, double b, graph::DType dtype) {
  int w = 64;
  double v[2] = {a, b};
  auto bits = bits_of(v, dtype, w);
  return ulp_bits(bits[0], bits[1], w, a, b);
}

Metrics compute_metrics(std::span<const double> a, std::span<const double> g, graph::DType dtype) {
  if (a.size() != g.size())
    throw std::invalid_argument(fmt::format("compare: {} device elements vs {} reference elements", a.size(), g.size()));
  Metrics m;
  m.count = a.size();
  if (a.empty()) return m;
  int wa = 64, wg = 64;
  auto ba = bits_of(a, dtype, wa);
  auto bg = bits_of(g, dtype, wg);
  double dot = 0, na = 0, ng = 0, sq = 0, rel_sum = 0, ulp_sum = 0;
  std::uint64_t finite = 0, w1 = 0, w5 = 0;
  // Below the device dtype's normal range a value only has absolute precision (subnormal
  // spacing), so relative errors there are taken against the smallest normal instead.
  const double rel_floor = std::max(kRelEps, smallest_normal(dtype));
  for (std::size_t i = 0; i < a.size(); ++i) {
    double x = a[i], y = g[i];
    if (!std::isfinite(x) || !std::isfinite(y)) {
      bool same = (std::isnan(x) && std::isnan(y)) || x == y;
      if (!same) {
        ++m.nonfinite_mismatch;
        m.max_abs_err = kInf;
        m.max_rel_err = kInf;
        m.max_ulp = std::max(m.max_ulp, ulp_bits(ba[i], bg[i], wa, x, y));
        m.worst_element = i;
      } else {
        ++w1;
        ++w5;
      }
      continue;
    }
    ++finite;
    dot += x * y;
    na += x * x;
    ng += y * y;
    double e = std::fabs(x - y);
    sq += e * e;
    double rel = e == 0 ? 0.0 : e / std::max(std::fabs(y), rel_floor);
    rel_sum += rel;
    if (rel <= 0.001) ++w1;
    if (rel <= 0.005) ++w5;
    if (e > m.max_abs_err) {
      m.max_abs_err = e;
      m.worst_element = i;
    }
    m.max_rel_err = std::max(m.max_rel_err, rel);
    std::uint64_t u = ulp_bits(ba[i], bg[i], wa, x, y);
    m.max_ulp = std::max(m.max_ulp, u);
    ulp_sum += static_cast<double>(u);
  }
  if (finite) {
    double n = static_cast<double>(finite);
    m.rmse = std::sqrt(sq / n);
    m.mean_rel_err = m.nonfinite_mismatch ? kInf : rel_sum / n;
    m.mean_ulp = ulp_sum / n;
    if (na == 0 && ng == 0) m.cosine = 1.0;
    else if (na == 0 || ng == 0) m.cosine = 0.0;
    else m.cosine = std::clamp(dot / (std::sqrt(na) * std::sqrt(ng)), -1.0, 1.0);
  } else if (m.nonfinite_mismatch) {
    m.cosine = 0.0;
    m.rmse = kInf;
    m.mean_rel_err = kInf;
  }
  m.within_0_1pct = static_cast<double>(w1) / static_cast<double>(a.size());
  m.within_0_5pct = static_cast<double>(w5) / static_cast<double>(a.size());
  return m;
}

Metrics compute_metrics(const graph::Tensor& actual, const graph::Tensor& golden, graph::DType device_dtype) {
  auto a = logical_f64(actual);
  auto g = logical_f64(golden);
  return compute_metrics(a, g, device_dtype);
}

Verdict judge(const Metrics& m, graph::DType dtype, const CompareCriteria& c, double noise_floor) {
  Verdict v;
  auto fail = [&](std::string why) {
    v.pass = false;
    v.reasons.push_back(std::move(why));
  };
  if (m.nonfinite_mismatch) fail(fmt::format("{} element(s) NaN/Inf on one side only", m.nonfinite_mismatch));
  // Within rounding at the operands' scale: only the absolute checks apply.
  const bool noise = !m.nonfinite_mismatch && m.max_abs_err <= noise_floor;
  if (!noise && m.cosine < c.cosine_min && m.max_abs_err > c.max_abs_err)
    fail(fmt::format("cosine {:.6g} < {} and max_abs_err {:.6g} > {}", m.cosine, c.cosine_min, m.max_abs_err, c.max_abs_err));
  if (!noise && m.cosine < c.cosine_hard_min) fail(fmt::format("cosine {:.6g} < {}", m.cosine, c.cosine_hard_min));
  if (m.max_abs_err > c.max_abs_err_hard && std::isfinite(m.max_abs_err))
    fail(fmt::format("max_abs_err {:.6g} > {}", m.max_abs_err, c.max_abs_err_hard));
  if (noise) return v;
  if (auto it = c.mean_rel_err.find(dtype); it != c.mean_rel_err.end() && m.mean_rel_err > it->second && std::isfinite(m.mean_rel_err))
    fail(fmt::format("mean_rel_err {:.6g} > {:.6g} ({})", m.mean_rel_err, it->second, graph::dtype_name(dtype)));
  if (auto it = c.max_rel_err.find(dtype); it != c.max_rel_err.end() && m.max_rel_err > it->second && std::isfinite(m.max_rel_err))
    fail(fmt::format("max_rel_err {:.6g} > {:.6g} ({})", m.max_rel_err, it->second, graph::dtype_name(dtype)));
  if (c.max_ulp && m.max_ulp > *c.max_ulp) fail(fmt::format("max_ulp {} > {}", m.max_ulp, *c.max_ulp));
  return v;
}

double rounding_noise_floor(std::span<const graph::Tensor* const> inputs, const graph::Tensor& golden,
                            graph::DType dtype) {
  double ulp = 0;
  switch (dtype) {
    case graph::DType::F16: ulp = 0x1p-10; break;
    case graph::DType::BF16: ulp = 0x1p-7; break;
    case graph::DType::F32: ulp = 0x1p-23; break;
    case graph::DType::F64: ulp = 0x1p-52; break;
    default: return 0.0;
  }
  double scale = 0;
  auto widen = [&](const graph::Tensor& t) {
    if (!graph::is_float(t.dtype())) return;
    for (double x : logical_f64(t))
      if (std::isfinite(x)) scale = std::max(scale, std::fabs(x));
  };
  for (const graph::Tensor* t : inputs)
    if (t) widen(*t);
  widen(golden);
  return 16 * ulp * scale;
}

// ---- op replay ---------------------------------------------------------------------------------

std::vector<OpComparison> compare_op(const graph::Op& op, std::span<const graph::Tensor* const> inputs,
                                     std::span<const graph::Tensor* const> outputs, const CompareCriteria& c, bool decompose,
                                     const std::map<std::string, graph::Tensor>* partial) {
  std::vector<OpComparison> out;
  std::vector<graph::Tensor> ref;
  std::string skipped;
  try {
    ref = graph::run_reference(op, inputs, graph::RefPrecision::F64);
  } catch (const std::exception& e) {
    skipped = fmt::format("reference replay failed: {}", e.what());
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i]) continue;
    OpComparison r;
    r.op = op.name;
    r.op_id = op.id;
    r.op_type = op.type;
    r.output_index = static_cast<std::uint32_t>(i);
    r.tensor = i < op.outputs.size() ? op.outputs[i] : "";
    r.device_dtype = outputs[i]->dtype();
    r.skipped = skipped;
    if (skipped.empty()) {
      if (i >= ref.size()) {
        r.skipped = "reference produced fewer outputs";
      } else {
        try {
          r.metrics = compute_metrics(*outputs[i], ref[i], r.device_dtype);
          Verdict v = judge(r.metrics, r.device_dtype, c, rounding_noise_floor(inputs, ref[i], r.device_dtype));
          r.pass = v.pass;
          r.reasons = std::move(v.reasons);
        } catch (const std::exception& e) {
          r.skipped = e.what();
        }
      }
    }
    if (r.skipped.empty() && decompose && i == 0 && !op.fused_body.empty()) {
      try {
        decompose_fused(op, inputs, *outputs[i], c, r, partial);
      } catch (const std::exception& e) {
        r.culprit_basis = fmt::format("decomposition failed: {}", e.what());
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

const OpComparison* first_divergence(std::span<const OpComparison> cs, const graph::Graph& g) {
  std::vector<std::uint32_t> pos(g.ops().size(), 0);
  auto order = g.topo_order();
  for (std::size_t i = 0; i < order.size(); ++i) pos[order[i]] = static_cast<std::uint32_t>(i);
  const OpComparison* best = nullptr;
  auto key = [&](const OpComparison& c) {
    return std::make_tuple(c.step, c.op_id < pos.size() ? pos[c.op_id] : c.op_id, c.output_index);
  };
  for (const auto& c : cs)
    if (!c.pass && c.skipped.empty() && (!best || key(c) < key(*best))) best = &c;
  return best;
}

}  // namespace probelab::probes
