// Einsum (ONNX opset 12): "ij,jk->ik", implicit outputs (the labels used once, in alphabetical
// order), "..." for broadcast dimensions, repeated labels in a term (diagonals), sums over labels
// the output lacks. Every output element accumulates its products in one fixed order: the summed
// labels' index tuples row-major. Its gradient with respect to operand i is again an Einsum of dY
// and the other operands, for equations without "..." whose terms repeat no label.
#include "graph/ops/einsum.h"

#include <algorithm>
#include <map>

#include "graph/autodiff.h"
#include "graph/ops/op_util.h"

namespace probelab::graph::ops {
namespace {

// Labels are letters; the dimensions "..." stands for get labels 'A' - 1 - j (j-th from the right).
using Term = std::vector<int>;

struct Equation {
  std::vector<Term> in;
  Term out;
  std::map<int, std::int64_t> size;  // label -> dimension
};

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// One term with its "..." expanded to `ell` ellipsis labels.
Term expand(const Op& op, const std::string& t, std::size_t ell) {
  Term r;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t.compare(i, 3, "...") == 0) {
      for (std::size_t j = ell; j-- > 0;) r.push_back('A' - 1 - static_cast<int>(j));
      i += 2;
    } else if (is_letter(t[i])) {
      r.push_back(t[i]);
    } else if (t[i] != ' ') {
      fail(op, "equation \"{}\": '{}' is not a letter, ',', '->' or '...'", op.attr_str("equation"), t[i]);
    }
  }
  return r;
}

std::size_t letters(const std::string& t) { return static_cast<std::size_t>(std::count_if(t.begin(), t.end(), is_letter)); }

Equation parse(const Op& op, const std::vector<Shape>& shapes) {
  const std::string eq = op.attr_str("equation");
  const auto arrow = eq.find("->");
  std::vector<std::string> terms;
  const std::string lhs = eq.substr(0, arrow);
  for (std::size_t b = 0;;) {
    const auto c = lhs.find(',', b);
    terms.push_back(lhs.substr(b, c == std::string::npos ? std::string::npos : c - b));
    if (c == std::string::npos) break;
    b = c + 1;
  }
  if (terms.size() != shapes.size())
    fail(op, "equation \"{}\" has {} input terms, the op has {} inputs", eq, terms.size(), shapes.size());
  Equation e;
  std::size_t max_ell = 0;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const bool ell = terms[i].find("...") != std::string::npos;
    const std::size_t n = letters(terms[i]);
    if (shapes[i].size() < n || (!ell && shapes[i].size() != n))
      fail(op, "term \"{}\" of equation \"{}\" does not fit input {} of shape {}", terms[i], eq, i, shape_str(shapes[i]));
    const std::size_t k = shapes[i].size() - n;
    max_ell = std::max(max_ell, k);
    e.in.push_back(expand(op, terms[i], k));
    for (std::size_t d = 0; d < e.in.back().size(); ++d) {
      const int l = e.in.back()[d];
      const std::int64_t s = shapes[i][d];
      auto [it, fresh] = e.size.emplace(l, s);
      if (fresh || it->second == s) continue;
      if (l < 'A' && (s == 1 || it->second == 1)) {  // "..." dims broadcast
        it->second = std::max(it->second, s);
        continue;
      }
      fail(op, "label '{}' of equation \"{}\" has sizes {} and {}", l < 'A' ? '.' : static_cast<char>(l), eq, it->second, s);
    }
  }
  if (arrow != std::string::npos) {
    e.out = expand(op, eq.substr(arrow + 2), max_ell);
    for (int l : e.out)
      if (!e.size.count(l)) fail(op, "output label '{}' of equation \"{}\" is in no input term", static_cast<char>(l), eq);
  } else {  // implicit: "..." first, then the labels used once, alphabetically
    std::map<int, int> uses;
    for (const Term& t : e.in)
      for (int l : t) ++uses[l];
    for (std::size_t j = max_ell; j-- > 0;) e.out.push_back('A' - 1 - static_cast<int>(j));
    for (const auto& [l, n] : uses)
      if (l >= 'A' && n == 1) e.out.push_back(l);
  }
  return e;
}

std::vector<TensorDesc> infer_einsum(const Op& op, Descs in) {
  if (in.empty()) fail(op, "needs at least one input");
  std::vector<Shape> shapes;
  for (const TensorDesc& d : in) {
    if (d.dtype != in[0].dtype) fail(op, "all inputs must have one dtype, got {} and {}", dtype_name(in[0].dtype), dtype_name(d.dtype));
    shapes.push_back(d.shape);
  }
  if (!is_float(in[0].dtype) && !is_integer(in[0].dtype)) fail(op, "inputs must be float or integer tensors");
  const Equation e = parse(op, shapes);
  Shape s;
  for (int l : e.out) s.push_back(e.size.at(l));
  return {TensorDesc{in[0].dtype, s, Format::ND}};
}

template <class T> void einsum_ref(const Op& op, Ins in, Outs out) {
  std::vector<Shape> shapes;
  for (const Tensor* t : in) shapes.push_back(t->shape());
  const Equation e = parse(op, shapes);
  // Loop labels: the output's, then the summed ones.
  std::vector<int> loop = e.out;
  for (const auto& [l, s] : e.size)
    if (std::find(loop.begin(), loop.end(), l) == loop.end()) loop.push_back(l);
  // Stride of every loop label in every input (0 where absent or broadcast).
  std::vector<std::vector<std::int64_t>> stride(in.size(), std::vector<std::int64_t>(loop.size(), 0));
  for (std::size_t i = 0; i < in.size(); ++i) {
    const auto st = strides_of(shapes[i]);
    for (std::size_t d = 0; d < e.in[i].size(); ++d)
      if (shapes[i][d] != 1 || e.size.at(e.in[i][d]) == 1)
        stride[i][static_cast<std::size_t>(std::find(loop.begin(), loop.end(), e.in[i][d]) - loop.begin())] += st[d];
  }
  std::vector<std::int64_t> dims;
  for (int l : loop) dims.push_back(e.size.at(l));
  std::int64_t summed = 1;
  for (std::size_t d = e.out.size(); d < loop.size(); ++d) summed *= dims[d];
  std::vector<std::span<const T>> x;
  for (const Tensor* t : in) x.push_back(cdata<T>(t));
  auto y = mdata<T>(out[0]);
  std::vector<std::int64_t> idx(loop.size(), 0), off(in.size(), 0);
  // Odometer over loop labels [0, end): the last one fastest, every input's offset alongside.
  auto step = [&](std::size_t end) {
    for (std::size_t d = end; d-- > 0;) {
      for (std::size_t i = 0; i < in.size(); ++i) off[i] += stride[i][d];
      if (++idx[d] < dims[d]) break;
      for (std::size_t i = 0; i < in.size(); ++i) off[i] -= stride[i][d] * dims[d];
      idx[d] = 0;
    }
  };
  for (std::size_t o = 0; o < y.size(); ++o) {
    T acc = 0;
    for (std::int64_t s = 0; s < summed; ++s) {
      T p = 1;
      for (std::size_t i = 0; i < in.size(); ++i) p *= x[i][static_cast<std::size_t>(off[i])];
      acc += p;
      step(loop.size());  // past the last summed tuple it carries into the output labels
    }
    y[o] = acc;
    if (summed == 0) step(e.out.size());  // nothing summed: step the output labels alone
  }
}

std::string term_str(const Term& t) { return std::string(t.begin(), t.end()); }

void einsum_grad(GradBuilder& b, const Op& op) {
  std::vector<Shape> shapes;
  for (const std::string& t : op.inputs) shapes.push_back(b.desc(t).shape);
  const Equation e = parse(op, shapes);
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    if (!b.needs(op, i)) continue;
    const Term& xi = e.in[i];
    auto unsupported = [&](const char* why) {
      fail(op, "equation \"{}\" has no gradient for input {} ({}): train without it, or use mode: inference",
           op.attr_str("equation"), i, why);
    };
    std::map<int, int> seen;
    for (const Term& t : e.in)
      for (int l : t) {
        if (l < 'A') unsupported("\"...\"");
        if (&t == &xi && ++seen[l] > 1) unsupported("a repeated label");
      }
    std::vector<std::string> terms{term_str(e.out)};
    std::vector<std::string> ins{b.dy(op)};
    for (std::size_t j = 0; j < op.inputs.size(); ++j)
      if (j != i) {
        terms.push_back(term_str(e.in[j]));
        ins.push_back(op.inputs[j]);
      }
    for (int l : xi) {
      bool found = false;
      for (const std::string& t : terms) found = found || t.find(static_cast<char>(l)) != std::string::npos;
      if (!found) unsupported("a label summed in this input alone");
    }
    std::string eq;
    for (const std::string& t : terms) eq += (eq.empty() ? "" : ",") + t;
    b.emit(op, "d" + std::to_string(i), "Einsum", ins, {b.dx(op, i)}, {{"equation", eq + "->" + term_str(xi)}});
  }
}

}  // namespace

std::optional<EinsumGemm> einsum_as_gemm(const Op& op, const std::vector<Shape>& shapes) {
  if (shapes.size() != 2) return std::nullopt;
  const Equation e = parse(op, shapes);
  const Term &a = e.in[0], &b = e.in[1];
  auto has = [](const Term& t, int l) { return std::find(t.begin(), t.end(), l) != t.end(); };
  for (const Term* t : {&a, &b})
    for (int l : *t)
      if (std::count(t->begin(), t->end(), l) != 1) return std::nullopt;
  // Broadcast "..." (a size-1 dimension against a larger one) is not a plain product.
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t d = 0; d < e.in[i].size(); ++d)
      if (shapes[i][d] != e.size.at(e.in[i][d])) return std::nullopt;
  std::vector<int> batch, m, n, k;
  for (int l : e.out) (has(a, l) && has(b, l) ? batch : has(a, l) ? m : n).push_back(l);
  for (int l : a)
    if (!has(e.out, l)) {
      if (!has(b, l)) return std::nullopt;  // summed in A alone
      k.push_back(l);
    }
  for (int l : b)
    if (!has(e.out, l) && !has(a, l)) return std::nullopt;
  Term order = batch;
  order.insert(order.end(), m.begin(), m.end());
  order.insert(order.end(), n.begin(), n.end());
  if (order != e.out) return std::nullopt;
  EinsumGemm g;
  auto place = [](const Term& t, const std::vector<std::vector<int>*>& groups) {
    std::vector<std::size_t> perm;
    for (const auto* grp : groups)
      for (int l : *grp) perm.push_back(static_cast<std::size_t>(std::find(t.begin(), t.end(), l) - t.begin()));
    return perm;
  };
  g.perm_a = place(a, {&batch, &m, &k});
  g.perm_b = place(b, {&batch, &k, &n});
  for (int l : batch) g.batch *= e.size.at(l);
  for (int l : m) g.m *= e.size.at(l);
  for (int l : n) g.n *= e.size.at(l);
  for (int l : k) g.k *= e.size.at(l);
  return g;
}

Tensor permuted(const Tensor& t, const std::vector<std::size_t>& perm) {
  const auto st = strides_of(t.shape());
  Shape ps;
  std::vector<std::int64_t> pst;
  for (std::size_t p : perm) {
    ps.push_back(t.shape()[p]);
    pst.push_back(st[p]);
  }
  Tensor out = Tensor::for_overwrite(TensorDesc{t.dtype(), ps, Format::ND});
  gather_strided(t.bytes(), out.bytes(), ps, pst, 0, dtype_size(t.dtype()));
  return out;
}

void register_einsum_ops(OpRegistry& r) {
  OpDef d;
  d.type = "Einsum";
  d.doc = "Einstein summation over the inputs by `equation` (ONNX Einsum: explicit or implicit output, \"...\", "
          "diagonals)";
  d.attrs = {attr_nodefault("equation", true, "e.g. \"bij,bjk->bik\"")};
  d.min_inputs = 1;
  d.max_inputs = -1;
  d.input_names = {"Inputs"};
  d.output_names = {"Output"};
  d.infer = infer_einsum;
  d.reference = [](const Op& op, Ins in, Outs out, RefPrecision p) {
    if (in[0]->dtype() == DType::I64) einsum_ref<std::int64_t>(op, in, out);
    else if (in[0]->dtype() == DType::I32) einsum_ref<std::int32_t>(op, in, out);
    else typed(einsum_ref<float>, einsum_ref<double>)(op, in, out, p);
  };
  d.gradient = einsum_grad;
  r.add(std::move(d));
}

}  // namespace probelab::graph::ops
