// Initialisers, see init.h.
#include "graph/init.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <regex>
#include <span>

#include <fmt/format.h>

#include "graph/graph.h"
#include "numerics/mt19937.h"
#include "numerics/normal.h"

namespace probelab::graph {
namespace {

struct Fans {
  double in = 1, out = 1;
};

Fans fans_of(const Shape& s) {
  if (s.empty()) return {};
  if (s.size() == 1) return {static_cast<double>(s[0]), static_cast<double>(s[0])};
  if (s.size() == 2) return {static_cast<double>(s[0]), static_cast<double>(s[1])};
  double receptive = 1;
  for (std::size_t i = 2; i < s.size(); ++i) receptive *= static_cast<double>(s[i]);
  return {static_cast<double>(s[1]) * receptive, static_cast<double>(s[0]) * receptive};
}

// Uniform in [0, 1) from the next draw.
double unit(num::Mt19937_64& rng) { return num::unit_interval(rng()); }

// Standard normal values into v, one Box-Muller pair (u1 in (0, 1), u2) per value, the cosine
// side; in chunks, so that the temporaries stay in a few cache-resident kilobytes.
void gaussians(num::Mt19937_64& rng, std::span<double> v) {
  constexpr std::size_t kChunk = 256;
  std::array<double, kChunk> u1, u2, s;
  std::array<std::uint64_t, 2 * kChunk> draws;
  for (std::size_t i0 = 0; i0 < v.size(); i0 += kChunk) {
    const std::size_t m = std::min(kChunk, v.size() - i0);
    rng.generate(std::span(draws).first(2 * m));
    bool zero = false;  // a first draw that gives u1 = 0 (one in 2^53) is drawn again
    for (std::size_t i = 0; i < m; ++i) zero |= (draws[2 * i] >> 11) == 0;
    if (!zero) {
      num::uniform_pairs(std::span(draws).first(2 * m), false, std::span(u1).first(m), std::span(u2).first(m));
    } else {  // the same draws one at a time, then the generator's next ones
      std::size_t at = 0;
      auto next = [&] { return at < 2 * m ? draws[at++] : rng(); };
      for (std::size_t i = 0; i < m; ++i) {
        do u1[i] = num::unit_interval(next());
        while (u1[i] <= 0.0);
        u2[i] = num::unit_interval(next());
      }
    }
    num::box_muller(std::span(u1).first(m), std::span(u2).first(m), 0.0, 1.0, v.subspan(i0, m), std::span(s).first(m));
  }
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

InitSpec parse_init(const std::string& text) {
  using K = InitSpec::Kind;
  static const std::regex re(R"(\s*([a-z_]+)\s*(?:\(\s*([^,()\s]+)\s*(?:,\s*([^,()\s]+)\s*)?\))?\s*)");
  std::smatch m;
  auto bad = [&](const std::string& why) -> GraphError {
    return GraphError(fmt::format(
        "init '{}': {} (expected zeros, ones, constant(v), normal(std), normal(mean, std), uniform(a, b), "
        "kaiming, xavier, randint(lo, hi) or arange)",
        text, why));
  };
  if (text.size() > 256 || !std::regex_match(text, m, re)) throw bad("cannot parse");
  const std::string name = m[1];
  std::vector<double> args;
  for (int i = 2; i <= 3; ++i) {
    if (!m[i].matched) continue;
    try {
      std::size_t used = 0;
      args.push_back(std::stod(m[i].str(), &used));
      if (used != m[i].str().size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      throw bad(fmt::format("'{}' is not a number", m[i].str()));
    }
  }
  auto want = [&](std::size_t lo, std::size_t hi) {
    if (args.size() < lo || args.size() > hi)
      throw bad(fmt::format("'{}' takes {} argument(s), got {}", name, lo == hi ? fmt::format("{}", lo)
                                                                               : fmt::format("{} or {}", lo, hi),
                            args.size()));
  };
  InitSpec s;
  if (name == "zeros" || name == "ones" || name == "kaiming" || name == "xavier" || name == "arange") {
    want(0, 0);
    s.kind = name == "zeros"     ? K::Zeros
             : name == "ones"    ? K::Ones
             : name == "kaiming" ? K::Kaiming
             : name == "xavier"  ? K::Xavier
                                 : K::Arange;
  } else if (name == "constant") {
    want(1, 1);
    s = {K::Constant, args[0], 0};
  } else if (name == "normal") {
    want(1, 2);
    s = args.size() == 1 ? InitSpec{K::Normal, 0.0, args[0]} : InitSpec{K::Normal, args[0], args[1]};
    if (s.b < 0) throw bad("std must be >= 0");
  } else if (name == "uniform" || name == "randint") {
    want(2, 2);
    s = {name == "uniform" ? K::Uniform : K::RandInt, args[0], args[1]};
    if (!(s.a < s.b)) throw bad("the low bound must be below the high bound");
  } else {
    throw bad(fmt::format("unknown initialiser '{}'", name));
  }
  return s;
}

std::string init_str(const InitSpec& s) {
  using K = InitSpec::Kind;
  switch (s.kind) {
    case K::Zeros: return "zeros";
    case K::Ones: return "ones";
    case K::Constant: return fmt::format("constant({})", s.a);
    case K::Normal: return fmt::format("normal({}, {})", s.a, s.b);
    case K::Uniform: return fmt::format("uniform({}, {})", s.a, s.b);
    case K::Kaiming: return "kaiming";
    case K::Xavier: return "xavier";
    case K::RandInt: return fmt::format("randint({}, {})", s.a, s.b);
    case K::Arange: return "arange";
  }
  return "invalid";
}

std::uint64_t derive_seed(std::uint64_t model_seed, const std::string& name) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001B3ull;
  return splitmix64(model_seed ^ splitmix64(h));
}

Tensor make_init(const InitSpec& spec, const TensorDesc& desc, std::uint64_t seed) {
  using K = InitSpec::Kind;
  // Every kind writes all of v (Zeros too), so it starts uninitialised.
  const auto n = static_cast<std::size_t>(numel(desc.shape));
  const auto values = std::make_unique_for_overwrite<double[]>(n);
  const std::span<double> v(values.get(), n);
  num::Mt19937_64 rng(seed);
  const Fans f = fans_of(desc.shape);
  switch (spec.kind) {
    case K::Zeros: std::fill(v.begin(), v.end(), 0.0); break;
    case K::Ones: std::fill(v.begin(), v.end(), 1.0); break;
    case K::Constant: std::fill(v.begin(), v.end(), spec.a); break;
    case K::Normal:
      gaussians(rng, v);
      for (double& x : v) x = spec.a + spec.b * x;
      break;
    case K::Uniform:
      for (double& x : v) x = spec.a + (spec.b - spec.a) * unit(rng);
      break;
    case K::Kaiming: {
      const double std = std::sqrt(2.0 / f.in);
      gaussians(rng, v);
      for (double& x : v) x = std * x;
      break;
    }
    case K::Xavier: {
      const double l = std::sqrt(6.0 / (f.in + f.out));
      for (double& x : v) x = -l + 2 * l * unit(rng);
      break;
    }
    case K::RandInt: {
      const auto lo = static_cast<std::int64_t>(std::ceil(spec.a)), hi = static_cast<std::int64_t>(std::ceil(spec.b));
      if (hi <= lo) throw GraphError(fmt::format("init '{}': no integer in the range", init_str(spec)));
      const auto span = static_cast<std::uint64_t>(hi - lo);
      for (double& x : v) x = static_cast<double>(lo + static_cast<std::int64_t>(rng() % span));
      break;
    }
    case K::Arange:
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
      break;
  }
  return Tensor::from_f64(desc.shape, v, desc.dtype);
}

}  // namespace probelab::graph
