// Test helper: checks the gradients built by graph/autodiff against central finite differences of
// the loss, both evaluated with the FP64 reference kernels.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "graph/autodiff.h"
#include "graph/graph.h"
#include "graph/op_registry.h"

namespace probelab::graph::testing {

inline Tensor random_f64(const Shape& s, std::mt19937_64& rng, double lo = -1.0, double hi = 1.0, double min_abs = 0.0) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<std::size_t>(numel(s)));
  for (double& x : v) {
    x = u(rng);
    if (std::fabs(x) < min_abs) x += x < 0 ? -min_abs : min_abs;
  }
  return Tensor::from_f64(s, v, DType::F64);
}

inline Tensor int64_tensor(const Shape& s, const std::vector<std::int64_t>& v) {
  std::vector<std::byte> b(v.size() * sizeof(std::int64_t));
  std::memcpy(b.data(), v.data(), b.size());
  return Tensor(TensorDesc{DType::I64, s, Format::ND}, std::move(b));
}

inline double scalar(const Tensor& t) { return t.to_f64().at(0); }

/// Central differences of `loss` with respect to every element of initializer `param`.
inline std::vector<double> numeric_gradient(const Graph& g, const std::string& param, const std::string& loss,
                                            const std::map<std::string, Tensor>& feeds = {}, double h = 1e-6) {
  Graph work = g;
  Tensor& p = work.initializers().at(param);
  const std::size_t n = static_cast<std::size_t>(p.numel());
  std::vector<double> grad(n);
  for (std::size_t j = 0; j < n; ++j) {
    const double x0 = p.data<double>()[j];
    p.data<double>()[j] = x0 + h;
    const double up = scalar(run_graph_reference(work, feeds, RefPrecision::F64).at(loss));
    p.data<double>()[j] = x0 - h;
    const double down = scalar(run_graph_reference(work, feeds, RefPrecision::F64).at(loss));
    p.data<double>()[j] = x0;
    grad[j] = (up - down) / (2 * h);
  }
  return grad;
}

/// Expects the analytic gradient of every weight of `forward` (an FP64 graph) to match central
/// differences; returns the number of checked weights.
inline std::size_t expect_gradients_match(const Graph& forward, const std::string& loss,
                                          const std::map<std::string, Tensor>& feeds = {}, double atol = 1e-6,
                                          double rtol = 1e-5) {
  Graph g = forward;
  const auto grads = append_backward(g, loss);
  g.validate();
  const auto values = run_graph_reference(g, feeds, RefPrecision::F64);
  std::size_t checked = 0;
  for (const auto& [name, info] : forward.tensors()) {
    if (info.kind != TensorKind::Weight) continue;
    const auto it = grads.find(name);
    EXPECT_NE(it, grads.end()) << "no gradient for weight " << name;
    if (it == grads.end()) continue;
    EXPECT_EQ(it->second, gradient_name(name));
    EXPECT_EQ(g.tensor(it->second).kind, TensorKind::Gradient) << it->second;
    const std::vector<double> analytic = values.at(it->second).to_f64();
    const std::vector<double> numeric = numeric_gradient(forward, name, loss, feeds);
    EXPECT_EQ(analytic.size(), numeric.size()) << name;
    if (analytic.size() != numeric.size()) continue;
    for (std::size_t j = 0; j < numeric.size(); ++j)
      EXPECT_NEAR(analytic[j], numeric[j], atol + rtol * std::fabs(numeric[j])) << name << "[" << j << "]";
    ++checked;
  }
  return checked;
}

}  // namespace probelab::graph::testing
