#include "probes/provenance.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "chip_model/spec/registers.h"
#include "graph/autodiff.h"
#include "graph/format.h"
#include "graph/op_registry.h"
#include "numerics/moments.h"
#include "probes/insertion_pass.h"

namespace probelab::probes {

std::map<std::string, std::string> carried_tensors(const graph::Graph& g) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : g.initializers()) {
    const std::string next = graph::updated_name(name);
    if (g.find_tensor(next) && g.producer(next)) out.emplace(name, next);
  }
  return out;
}

namespace {

constexpr std::uint32_t kNonFiniteKinds = (1u << spec::kExcOverflow) | (1u << spec::kExcInvalid) |
                                          (1u << spec::kExcNanInput) | (1u << spec::kExcInfInput);

bool produced_kind(AnomalyKind k) { return k == AnomalyKind::Invalid || k == AnomalyKind::Overflow; }

enum class Tri { No, Yes, Unknown };

/// One step of a path: an op execution, or a tensor in memory between steps.
struct Hop {
  std::string name;
  std::optional<std::uint32_t> step;  // nullopt: a tensor
  std::uint32_t rank = 0;
};

struct Trace {
  Origin origin;
  std::vector<Hop> path;  // origin first
};

struct Writer {
  enum Kind { Op, Collective, Carried, Upload, Feed } kind = Feed;
  std::uint32_t op = 0, step = 0;
  std::uint16_t slot = 0;
  std::string tensor;  // the tensor as the writer names it
};

struct Resolver {
  const graph::Graph& g;
  std::span<RankEvidence> ranks;
  std::vector<std::uint32_t> topo;
  std::map<std::string, std::string> carried;
  std::map<std::string, UploadSummary> graph_uploads;  // the graph's initializers, summarized once
  std::vector<std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<const AnomalyRecord*>>> at;
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>, Trace> memo;
  std::set<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> active;

  Resolver(const graph::Graph& graph, std::span<RankEvidence> rs) : g(graph), ranks(rs), carried(carried_tensors(graph)) {
    topo.assign(g.ops().size(), 0);
    const auto order = g.topo_order();
    for (std::size_t i = 0; i < order.size(); ++i) topo[order[i]] = static_cast<std::uint32_t>(i);
    at.resize(ranks.size());
    for (std::size_t r = 0; r < ranks.size(); ++r)
      if (ranks[r].anomalies)
        for (const AnomalyRecord& a : *ranks[r].anomalies) at[r][{a.step, a.op_id}].push_back(&a);
  }

  const RankEvidence& ev(std::size_t r) const { return ranks[r]; }
  /// Whether ranks q and r ran collective c in the same communicator (unknown: yes).
  bool same_comm(std::size_t q, std::size_t r, std::uint32_t c) const {
    const auto* a = ev(q).comm_groups;
    const auto* b = ev(r).comm_groups;
    if (!a || !b) return true;
    const auto x = a->find(c), y = b->find(c);
    return x == a->end() || y == b->end() || x->second == y->second;
  }
  const graph::Op& op(std::uint32_t id) const { return g.op(id); }
  std::uint32_t pos(std::uint32_t id) const { return id < topo.size() ? topo[id] : id; }

  const std::vector<const AnomalyRecord*>* anomalies_at(std::size_t r, std::uint32_t s, std::uint32_t o) const {
    auto it = at[r].find({s, o});
    return it == at[r].end() ? nullptr : &it->second;
  }
  bool any_nonfinite_anomaly(std::size_t r, std::uint32_t s, std::uint32_t o) const {
    if (const auto* v = anomalies_at(r, s, o))
      for (const auto* a : *v)
        if (a->kind != AnomalyKind::Underflow) return true;
    return false;
  }
  const EdgeObservation* obs(std::size_t r, std::uint32_t s, std::uint32_t o, bool in, std::uint16_t slot) const {
    const auto* m = ev(r).observations;
    if (!m) return nullptr;
    auto it = m->find({s, o, in, slot});
    return it == m->end() ? nullptr : &it->second;
  }
  bool complete(std::size_t r, std::uint32_t s) const {
    const RankEvidence& e = ev(r);
    if ((e.enabled_kinds & kNonFiniteKinds) != kNonFiniteKinds || !e.steps) return false;
    auto it = e.steps->find(s);
    return it != e.steps->end() && (it->second.suppressed_kinds & kNonFiniteKinds) == 0;
  }

  Writer writer_of(const std::string& t, std::uint32_t s, std::uint32_t first_step) const {
    Writer w;
    w.tensor = t;
    w.step = s;
    if (const graph::Op* p = g.producer(t)) {
      w.kind = is_collective_type(p->type) ? Writer::Collective : Writer::Op;
      w.op = p->id;
      for (std::size_t i = 0; i < p->outputs.size(); ++i)
        if (p->outputs[i] == t) w.slot = static_cast<std::uint16_t>(i);
      return w;
    }
    if (auto c = carried.find(t); c != carried.end() && s > first_step) {
      const graph::Op* u = g.producer(c->second);
      w.kind = Writer::Carried;
      w.op = u->id;
      w.step = s - 1;
      w.tensor = c->second;
      for (std::size_t i = 0; i < u->outputs.size(); ++i)
        if (u->outputs[i] == c->second) w.slot = static_cast<std::uint16_t>(i);
      return w;
    }
    w.kind = g.initializers().count(t) ? Writer::Upload : Writer::Feed;
    return w;
  }

  /// The initial value of `t` as rank r's host uploaded it.
  const UploadSummary& initial(std::size_t r, const std::string& t) {
    if (const auto* own = ev(r).uploads)
      if (auto it = own->find(t); it != own->end()) return it->second;
    auto it = graph_uploads.find(t);
    if (it == graph_uploads.end()) it = graph_uploads.emplace(t, summarize_upload(g.initializers().at(t))).first;
    return it->second;
  }

  /// Whether output `slot` of `o` at step `s` held a non-finite value.
  Tri output(std::size_t r, std::uint32_t s, std::uint32_t o, std::uint16_t slot) const {
    if (const auto* x = obs(r, s, o, false, slot)) {
      if (x->nonfinite()) return Tri::Yes;
      if (x->finite()) return Tri::No;
    }
    if (any_nonfinite_anomaly(r, s, o)) return Tri::Yes;
    if (complete(r, s)) return Tri::No;
    return Tri::Unknown;
  }

  /// Direct evidence that input `slot` of `o` held a non-finite value when `o` read it.
  bool input_seen(std::size_t r, std::uint32_t s, std::uint32_t o, std::uint16_t slot,
                  std::optional<std::uint64_t>* element = nullptr) const {
    if (const auto* v = anomalies_at(r, s, o))
      for (const auto* a : *v)
        if (a->on_input && reads_input(a->kind) && a->output_index == slot) {
          if (element) *element = a->element;
          return true;
        }
    if (const auto* x = obs(r, s, o, true, slot); x && x->nonfinite()) return true;
    return false;
  }

  /// Whether the writer of input `slot` of `o` at step `s` shows non-finite evidence.
  bool writer_nonfinite(std::size_t r, std::uint32_t s, std::uint32_t o, std::uint16_t slot) {
    const std::string& t = op(o).inputs[slot];
    const Writer w = writer_of(t, s, ev(r).first_step);
    switch (w.kind) {
      case Writer::Op:
      case Writer::Carried: return output(r, w.step, w.op, w.slot) == Tri::Yes;
      case Writer::Collective: {
        if (const auto* x = obs(r, s, w.op, false, w.slot); x && x->nonfinite()) return true;
        for (std::size_t q = 0; q < ranks.size(); ++q) {
          if (!same_comm(q, r, w.op)) continue;
          if (any_nonfinite_anomaly(q, s, w.op) || input_seen(q, s, w.op, 0)) return true;
          const graph::Op& c = op(w.op);
          if (!c.inputs.empty() && !c.inputs[0].empty()) {
            const Writer in = writer_of(c.inputs[0], s, ev(q).first_step);
            if ((in.kind == Writer::Op || in.kind == Writer::Carried) && output(q, in.step, in.op, in.slot) == Tri::Yes)
              return true;
          }
        }
        return false;
      }
      case Writer::Upload: return !initial(r, t).is_finite(std::nullopt);
      case Writer::Feed: return false;
    }
    return false;
  }

  Hop hop(std::size_t r, std::uint32_t s, std::uint32_t o) const { return {op(o).name, s, ev(r).rank}; }

  // ---- finite values out of range (see the header) ----
  static constexpr double kJumpFactor = 16;       // captured max |x| over the bound of the inputs
  static constexpr double kLargeFraction = 1.0 / 1024;  // inputs followed: >= this share of the largest
  static constexpr std::size_t kJumpVisits = 4096;

  static std::optional<Magnitude> magnitude(const EdgeObservation* x) {
    if (!x || !x->finite() || !x->max_abs || !x->l2) return std::nullopt;
    return Magnitude{*x->max_abs, *x->l2, x->min.value_or(0.0), x->count};
  }
  /// Magnitudes of input `slot` of `o` at step `s` as read on rank r, and who wrote it.
  std::optional<Magnitude> read_magnitude(std::size_t r, std::uint32_t s, std::uint32_t o, std::uint16_t slot, Writer& w) {
    const std::string& t = op(o).inputs[slot];
    w = writer_of(t, s, ev(r).first_step);
    if (auto m = magnitude(obs(r, s, o, true, slot))) return m;
    switch (w.kind) {
      case Writer::Op:
      case Writer::Carried: return magnitude(obs(r, w.step, w.op, false, w.slot));
      case Writer::Collective: return magnitude(obs(r, s, w.op, false, w.slot));
      case Writer::Upload: return initial(r, t).magnitude();
      case Writer::Feed: {
        const auto* fed = ev(r).feeds;
        if (!fed) return std::nullopt;
        const auto it = fed->find({s, t});
        return it == fed->end() ? std::nullopt : it->second.magnitude();
      }
    }
    return std::nullopt;
  }

  struct JumpHit {
    std::size_t rank = 0;
    std::uint32_t step = 0, op = 0;
    std::uint16_t slot = 0;
    double magnitude = 0, bound = 0;
    std::vector<Hop> path;  // from the writer to the op searched from (origin first)
  };
  struct JumpSearch {
    std::set<std::tuple<std::size_t, std::uint32_t, std::uint32_t>> seen;  // ops whose inputs are followed
    std::set<std::tuple<std::size_t, std::uint32_t, std::uint32_t, std::uint16_t>> checked;  // outputs checked
    std::size_t visits = 0;
  };

  /// The inputs of `o` (on rank r at step s) that carry its large values; for a collective,
  /// its input on every rank of r's communicator.
  struct Lead {
    double max_abs = 0;
    std::size_t rank = 0;
    Writer w;
    std::string tensor;  // as the op reads it
  };
  std::vector<Lead> large_inputs(std::size_t r, std::uint32_t s, std::uint32_t o) {
    std::vector<Lead> leads;
    const graph::Op& x = op(o);
    auto add = [&](std::size_t q, std::uint16_t slot) {
      Writer w;
      if (auto m = read_magnitude(q, s, o, slot, w)) leads.push_back({m->max_abs, q, w, x.inputs[slot]});
    };
    if (is_collective_type(x.type)) {
      if (!x.inputs.empty() && !x.inputs[0].empty())
        for (std::size_t q = 0; q < ranks.size(); ++q)
          if (same_comm(q, r, o)) add(q, 0);
    } else {
      for (std::size_t i = 0; i < x.inputs.size(); ++i)
        if (!x.inputs[i].empty()) add(r, static_cast<std::uint16_t>(i));
    }
    double top = 0;
    for (const Lead& l : leads) top = std::max(top, l.max_abs);
    std::erase_if(leads, [&](const Lead& l) { return l.max_abs <= 0 || l.max_abs < top * kLargeFraction; });
    std::stable_sort(leads.begin(), leads.end(), [](const Lead& a, const Lead& b) { return a.max_abs > b.max_abs; });
    return leads;
  }

  /// Searches the writers of the large inputs of `o` for an op whose output exceeds its bound,
  /// depth first (writers of the largest input first). The search keeps its own stack: a chain of
  /// writers is as long as the graph times the steps it crosses, deeper than the stack of the
  /// simulated host's thread allows.
  std::optional<JumpHit> search_jump(std::size_t r, std::uint32_t s, std::uint32_t o, JumpSearch& js) {
    struct Frame {
      std::uint32_t step = 0;  // of the op whose inputs these are
      std::vector<Lead> leads;
      std::size_t next = 0;  // the lead after the one being searched
    };
    auto writer_step = [](const Frame& f, const Lead& l) { return l.w.kind == Writer::Collective ? f.step : l.w.step; };
    std::vector<Frame> stack;
    stack.push_back({s, large_inputs(r, s, o), 0});
    while (!stack.empty()) {
      if (stack.back().next == stack.back().leads.size()) {
        stack.pop_back();  // nothing beyond the bound behind this op's inputs: the caller's next lead
        continue;
      }
      Frame& f = stack.back();
      const Lead& l = f.leads[f.next++];
      if (l.w.kind == Writer::Upload || l.w.kind == Writer::Feed) continue;
      const std::uint32_t ws = writer_step(f, l);
      // An op reached again through another of its outputs (a gradient's dX, then its dScale) has
      // that output checked; its inputs are followed once.
      const bool follow = js.seen.insert({l.rank, ws, l.w.op}).second;
      const bool check = js.checked.insert({l.rank, ws, l.w.op, l.w.slot}).second;
      if ((!follow && !check) || ++js.visits > kJumpVisits) continue;
      std::optional<JumpHit> hit;
      if (check) hit = l.w.kind == Writer::Collective ? check_collective_jump(l.rank, ws, l.w.op, l.w.slot)
                                                      : check_jump(l.rank, ws, l.w.op, l.w.slot);
      if (!hit) {
        if (follow) stack.push_back({ws, large_inputs(l.rank, ws, l.w.op), 0});
        continue;
      }
      // The path from the writer found back to `o`, through the lead being searched at each level.
      for (std::size_t k = stack.size(); k-- > 0;) {
        const Frame& g = stack[k];
        const Lead& m = g.leads[g.next - 1];
        const std::uint32_t ms = writer_step(g, m);
        if (!(hit->rank == m.rank && hit->step == ms && hit->op == m.w.op)) hit->path.push_back(hop(m.rank, ms, m.w.op));
        if (m.w.kind == Writer::Carried) hit->path.push_back({m.tensor, std::nullopt, ev(m.rank).rank});
      }
      return hit;
    }
    return std::nullopt;
  }

  /// Magnitudes of each input of o at step s as rank r read them (nullopt: unknown or omitted).
  std::vector<std::optional<Magnitude>> inputs_read(std::size_t r, std::uint32_t s, std::uint32_t o) {
    const graph::Op& x = op(o);
    std::vector<std::optional<Magnitude>> in(x.inputs.size());
    for (std::size_t i = 0; i < x.inputs.size(); ++i) {
      Writer w;
      if (!x.inputs[i].empty()) in[i] = read_magnitude(r, s, o, static_cast<std::uint16_t>(i), w);
    }
    return in;
  }

  /// Whether output `slot` of `o` (rank r, step s) holds a value beyond the bound of its inputs.
  std::optional<JumpHit> check_jump(std::size_t r, std::uint32_t s, std::uint32_t o, std::uint16_t slot) {
    const auto out = magnitude(obs(r, s, o, false, slot));
    if (!out) return std::nullopt;
    const graph::Op& x = op(o);
    const std::vector<std::optional<Magnitude>> in = inputs_read(r, s, o);
    const auto bound = value_bound(x, slot, in, dot_length(g, x), ev(r).lr_factor);
    if (!bound || !(out->max_abs > kJumpFactor * *bound)) return std::nullopt;
    JumpHit h{r, s, o, slot, out->max_abs, *bound, {}};
    h.path.push_back(hop(r, s, o));
    return h;
  }

  /// check_jump for a collective, whose result on rank r comes from its input on every rank of
  /// r's communicator: a gather or broadcast moves values (at most the largest input), a sum adds
  /// one element of each (at most the sum of their largest; a mean divides it by the divisor).
  /// The largest |x| each member of r's communicator put into collective o at step s: their
  /// maximum, their sum and the members counted. A gather's or a broadcast's members without a
  /// captured input are skipped (a broadcast's non-roots read nothing); a reduction's make it
  /// unknown (nullopt), as does no member at all.
  struct MemberInputs {
    double top = 0, sum = 0;
    std::int64_t n = 0;
  };
  static bool moves_values(const graph::Op& x) { return collective_moves_values(x.type); }
  std::optional<MemberInputs> member_inputs(std::size_t r, std::uint32_t s, std::uint32_t o) {
    const graph::Op& x = op(o);
    if (x.inputs.empty() || x.inputs[0].empty()) return std::nullopt;
    MemberInputs mi;
    for (std::size_t q = 0; q < ranks.size(); ++q) {
      if (!same_comm(q, r, o)) continue;
      Writer w;
      const auto m = read_magnitude(q, s, o, 0, w);
      if (!m && moves_values(x)) continue;
      if (!m) return std::nullopt;
      mi.top = std::max(mi.top, m->max_abs);
      mi.sum += m->max_abs;
      ++mi.n;
    }
    if (mi.n == 0) return std::nullopt;
    return mi;
  }

  std::optional<JumpHit> check_collective_jump(std::size_t r, std::uint32_t s, std::uint32_t o, std::uint16_t slot) {
    const auto out = magnitude(obs(r, s, o, false, slot));
    const auto mi = out ? member_inputs(r, s, o) : std::nullopt;
    if (!mi) return std::nullopt;
    const graph::Op& x = op(o);
    double bound = mi->top;
    if (!moves_values(x)) {
      const std::int64_t divisor = x.attr_int("divisor", 0) > 0 ? x.attr_int("divisor", 0) : mi->n;
      bound = x.attr_str("reduction", "mean") == "mean" ? mi->sum / static_cast<double>(divisor) : mi->sum;
    }
    if (!(out->max_abs > kJumpFactor * bound)) return std::nullopt;
    JumpHit h{r, s, o, slot, out->max_abs, bound, {}};
    h.path.push_back(hop(r, s, o));
    return h;
  }

  /// `t` names `o` (rank r, step s) as the origin of a non-finite value from finite inputs: an op
  /// upstream that wrote a value beyond what its inputs allow explains it instead.
  /// Whether the magnitudes of o's inputs (rank r, step s) rule out a non-finite result of its own
  /// arithmetic: for an op whose value_bound() also bounds every intermediate it computes (data
  /// movement and selection, sums and products, dot products: any partial sum is within
  /// Cauchy-Schwarz too; not pooling averages or transcendental activations, whose intermediates
  /// can exceed their output), a bound below half the largest finite value of its output type.
  /// Then no value upstream explains the non-finite value. Softmax, the normalizations and the
  /// saturating activations count when their intermediates stay finite: the Vector unit computes
  /// them with FP32 or wider intermediates (x - max and exp(.) <= 1 summed over n terms;
  /// (x - mean)^2 summed over n values and 1 / sqrt(var + epsilon); tanh, erf and the logistic
  /// function saturate at +-1, 0 and 1), so from inputs below B none overflows while n (2B)^2
  /// (Gelu's tanh form: 0.045 B^3) is within the FP32 range, and with epsilon > 0 none is 0 / 0
  /// or 0 * Inf.
  bool inputs_rule_out_overflow(std::size_t r, std::uint32_t s, std::uint32_t o) {
    const graph::Op& x = op(o);
    static const std::set<std::string> kBoundedInside = {
        "MatMul", "Gemm", "Conv", "ConvTranspose", "ConvGradInput", "ConvGradWeight", "MatMulGradA", "MatMulGradB",
        "Add", "Sub", "Sum", "Mul", "Scale", "SumToShape", "SgdUpdate", "Relu", "ReluGrad", "Identity", "Reshape",
        "Flatten", "Transpose", "Expand", "Squeeze", "Unsqueeze", "Concat", "Slice", "Split", "MaxPool", "ReduceMax",
        "ReduceMin", "Neg", "Abs", "Max", "Min", "Cast", "Gather", "GatherElements", "SliceGrad"};
    static const std::set<std::string> kWideInside = {"Softmax", "LayerNormalization", "InstanceNormalization",
                                                      "BatchNormalization", "Gelu", "Tanh", "Sigmoid"};
    const graph::OpDef* def = graph::OpRegistry::instance().find(x.type);
    const std::string& type = def ? def->type : x.type;  // canonical (BatchNorm -> BatchNormalization)
    const graph::TensorInfo* out = x.outputs.empty() ? nullptr : g.find_tensor(x.outputs[0]);
    const bool wide = kWideInside.count(type) > 0;
    if ((!kBoundedInside.count(type) && !wide) || !out) return false;
    const std::vector<std::optional<Magnitude>> in = inputs_read(r, s, o);
    if (wide && !wide_intermediates_finite(x, type, in)) return false;
    const double top = largest_finite(*out);
    if (top == 0) return false;
    const auto len = dot_length(g, x);
    for (std::uint16_t slot = 0; slot < x.outputs.size(); ++slot) {
      const auto bound = value_bound(x, slot, in, len, ev(r).lr_factor);
      if (!bound || !(*bound < top / 2)) return false;
    }
    return true;
  }

  /// Softmax, a normalization or a saturating activation (`type`) with inputs `in`: whether its
  /// FP32 intermediates stay finite (inputs_rule_out_overflow()).
  static bool wide_intermediates_finite(const graph::Op& x, const std::string& type,
                                        std::span<const std::optional<Magnitude>> in) {
    if (in.empty() || !in[0]) return false;
    const double b = 2 * in[0]->max_abs, n = static_cast<double>(std::max<std::uint64_t>(in[0]->count, 1));
    if (type == "Tanh" || type == "Sigmoid") return true;
    if (type == "Gelu") return 0.045 * b * b * b < 1.7e38;
    if (type == "Softmax") return b < 1.7e38;
    return x.attr_float("epsilon", 1e-5) > 0 && n * b * b < 1.7e38;
  }

  /// The largest finite value of a tensor's dtype (0: not FP16, BF16 or FP32).
  static double largest_finite(const graph::TensorInfo& t) {
    switch (t.desc.dtype) {
      case graph::DType::F16: return 65504.0;
      case graph::DType::BF16:
      case graph::DType::F32: return 3.3895313892515355e38;
      default: return 0;
    }
  }

  /// The magnitudes of every input of x as read (`in`, inputs_read()), or nullopt if one is unknown.
  static std::optional<std::vector<Magnitude>> every_input(const graph::Op& x,
                                                          std::span<const std::optional<Magnitude>> in) {
    std::vector<Magnitude> m;
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (x.inputs[i].empty()) continue;
      if (!in[i]) return std::nullopt;
      m.push_back(*in[i]);
    }
    return m;
  }

  /// Whether o (rank r) computed a finite result at an earlier step from inputs at least half as
  /// large as those it read at step s (every input's max |x|), a result that stays below half its
  /// dtype's range when grown as the inputs allow (by the ratio of the bounds value_bound() puts on
  /// the two results, when it exceeds 1): then the size of its inputs does not explain the
  /// non-finite value, whatever wrote them. A result already within a factor 2 of the range (56,384
  /// in FP16, say) is no such evidence: inputs as large may well have carried it past.
  bool inputs_seen_before(std::size_t r, std::uint32_t s, std::uint32_t o) {
    const graph::Op& x = op(o);
    const std::vector<std::optional<Magnitude>> in_now = inputs_read(r, s, o);
    const auto now = every_input(x, in_now);
    if (!now || now->empty()) return false;
    const auto len = dot_length(g, x);
    const auto bound_now = value_bound(x, 0, in_now, len, ev(r).lr_factor);
    const graph::TensorInfo* out = x.outputs.empty() ? nullptr : g.find_tensor(x.outputs[0]);
    const double top = out ? largest_finite(*out) : 0;
    for (std::uint32_t e = ev(r).first_step; e < s; ++e) {
      if (output(r, e, o, 0) != Tri::No) continue;
      const std::vector<std::optional<Magnitude>> in_then = inputs_read(r, e, o);
      const auto then = every_input(x, in_then);
      if (!then || then->size() != now->size()) continue;
      bool as_large = true;
      for (std::size_t i = 0; i < now->size() && as_large; ++i)
        as_large = (*now)[i].max_abs <= 2 * (*then)[i].max_abs;
      if (!as_large) continue;
      if (top > 0) {
        double growth = 1;
        if (bound_now)
          if (const auto bound_then = value_bound(x, 0, in_then, len, ev(r).lr_factor); bound_then && *bound_then > 0)
            growth = std::max(1.0, *bound_now / *bound_then);
        const auto out_then = magnitude(obs(r, e, o, false, 0));
        if (out_then && out_then->max_abs * growth >= top / 2) continue;
      }
      return true;
    }
    return false;
  }

  Trace through_value_jump(std::size_t r, std::uint32_t s, std::uint32_t o, Trace t) {
    if (t.origin.kind != OriginKind::Op || t.origin.jump) return t;
    // An overflow is the size of the values themselves: an earlier finite result from inputs as
    // large clears nothing (where the large input meets a large operand varies from step to step).
    const bool overflow = t.origin.latch && t.origin.latch->kind == AnomalyKind::Overflow;
    if (inputs_rule_out_overflow(r, s, o) || (!overflow && inputs_seen_before(r, s, o))) return t;
    JumpSearch js;
    js.seen.insert({r, s, o});
    auto hit = search_jump(r, s, o, js);
    if (!hit) return t;
    Trace j;
    Origin& x = j.origin;
    x.kind = OriginKind::Op;
    x.rank = ev(hit->rank).rank;
    x.step = hit->step;
    x.op_id = hit->op;
    const graph::Op& w = op(hit->op);
    x.tensor = hit->slot < w.outputs.size() ? w.outputs[hit->slot] : std::string();
    x.jump = ValueJump{hit->magnitude, hit->bound, fmt::format("{}@{}", op(o).name, s)};
    x.evidence = fmt::format("{}@{} wrote max |x| = {:.6g} into {}, {:.3g} times the most its inputs allow ({:.4g} by "
                             "{} arithmetic on {} captured magnitudes): no computation gives that value; {} of "
                             "{}@{} follows from it",
                             w.name, hit->step, hit->magnitude, x.tensor, hit->magnitude / std::max(hit->bound, 1e-300),
                             hit->bound, w.type, is_collective_type(w.type) ? "every member's input's" : "their",
                             t.origin.latch ? anomaly_kind_name(t.origin.latch->kind) : std::string_view("the non-finite value"),
                             op(o).name, s);
    j.path = std::move(hit->path);
    j.path.push_back(hop(r, s, o));
    return j;
  }

  /// The latch that names the origin in op `o`: the first produced value, except that when the op
  /// both overflowed and made a NaN in one execution the overflow is the root (a running sum at
  /// ±Inf gives Inf - Inf = NaN in the same accumulators, whichever latch the tiles raised first).
  const AnomalyRecord* first_produced(std::size_t r, std::uint32_t s, std::uint32_t o) const {
    const AnomalyRecord* best = nullptr;
    const AnomalyRecord* overflow = nullptr;
    if (const auto* v = anomalies_at(r, s, o))
      for (const auto* a : *v) {
        if (produced_kind(a->kind) && (!best || a->cycle < best->cycle)) best = a;
        if (a->kind == AnomalyKind::Overflow && (!overflow || a->cycle < overflow->cycle)) overflow = a;
      }
    return overflow ? overflow : best;
  }

  Trace op_origin(std::size_t r, std::uint32_t s, std::uint32_t o, std::string why_presumed) const {
    Trace t;
    Origin& x = t.origin;
    x.kind = OriginKind::Op;
    x.rank = ev(r).rank;
    x.step = s;
    x.op_id = o;
    x.latch = first_produced(r, s, o);
    x.presumed = x.latch == nullptr;
    if (x.latch) {
      x.tensor = x.latch->tensor;
      x.element = x.latch->element;
      x.evidence = fmt::format("{} produced the first non-finite value from finite inputs: {} latched at element {} "
                               "(value {})",
                               op(o).name, anomaly_kind_name(x.latch->kind), x.latch->element, x.latch->value);
      if (x.latch->kind == AnomalyKind::Overflow)
        if (const auto* v = anomalies_at(r, s, o))
          for (const auto* a : *v)
            if (a->kind == AnomalyKind::Invalid) {
              x.evidence += fmt::format("; invalid latched too, at element {} (value {}): Inf - Inf in the same "
                                        "accumulators after the overflow",
                                        a->element, a->value);
              break;
            }
    } else {
      if (!op(o).outputs.empty()) x.tensor = op(o).outputs[0];
      x.evidence = std::move(why_presumed);
    }
    t.path.push_back(hop(r, s, o));
    return t;
  }

  Trace memory_origin(std::size_t r, std::uint32_t s, std::uint32_t reader, const std::string& tensor,
                      std::optional<std::uint64_t> element, const Writer& w, const std::string& why) const {
    Trace t;
    Origin& x = t.origin;
    x.kind = w.kind == Writer::Feed ? OriginKind::HostData : OriginKind::Memory;
    x.rank = ev(r).rank;
    x.step = s;
    x.op_id = reader;
    x.tensor = tensor;
    x.element = element;
    if (w.kind == Writer::Op || w.kind == Writer::Carried || w.kind == Writer::Collective) {
      x.writer_op = w.op;
      x.writer_step = w.step;
      if (const auto* o = obs(r, w.step, w.op, false, w.slot); o && o->cycle) x.window_lo = o->cycle;
    }
    if (const auto* v = anomalies_at(r, s, reader))
      for (const auto* a : *v)
        if (a->on_input && a->tensor == tensor && (!x.window_hi || a->cycle < *x.window_hi)) x.window_hi = a->cycle;
    x.evidence = why;
    t.path.push_back({tensor, std::nullopt, ev(r).rank});
    return t;
  }

  /// Input `slot` of `o` at step `s` held a non-finite value: who wrote it?
  Trace explain_read(std::size_t r, std::uint32_t s, std::uint32_t o, std::uint16_t slot,
                     std::optional<std::uint64_t> element) {
    const std::string& t = op(o).inputs[slot];
    const Writer w = writer_of(t, s, ev(r).first_step);
    const std::string at_elem = element ? fmt::format(" element {}", *element) : std::string();
    switch (w.kind) {
      case Writer::Op:
      case Writer::Collective:
      case Writer::Carried: {
        const Tri st = output(r, w.step, w.op, w.slot);
        if (st != Tri::No) {
          Trace tr = explain_node(r, w.step, w.op);
          if (w.kind == Writer::Carried) tr.path.push_back({t, std::nullopt, ev(r).rank});
          return tr;
        }
        const auto* wo = obs(r, w.step, w.op, false, w.slot);
        const std::string how = wo && wo->finite()
                                    ? fmt::format("its capture of {} shows no NaN/Inf", w.tensor)
                                    : std::string("it latched nothing in a step whose latches saw every report");
        return memory_origin(r, s, o, t, element, w,
                             fmt::format("{}@{} read a non-finite value in {}{} that no op wrote: {}@{} wrote it and {}",
                                         op(o).name, s, t, at_elem, op(w.op).name, w.step, how));
      }
      case Writer::Upload: {
        const UploadSummary& v = initial(r, t);
        const bool finite = v.is_finite(element && *element < v.elements ? element : std::nullopt);
        Writer host = w;
        if (!finite) host.kind = Writer::Feed;  // the initial value itself is non-finite: data
        return memory_origin(
            r, s, o, t, element, host,
            finite ? fmt::format("{}@{} read a non-finite value in {}{} that no op wrote: the host uploaded its initial "
                                 "value, which is finite there",
                                 op(o).name, s, t, at_elem)
                   : fmt::format("{}@{} read {}{}, whose initial value is non-finite", op(o).name, s, t, at_elem));
      }
      case Writer::Feed:
        return memory_origin(r, s, o, t, element, w,
                             fmt::format("{}@{} read a non-finite value in {}{}, which no op writes (the host feeds it)",
                                         op(o).name, s, t, at_elem));
    }
    return op_origin(r, s, o, "unresolved");
  }

  /// The output of `o` at step `s` was (or is presumed) non-finite: why?
  Trace explain_node(std::size_t r, std::uint32_t s, std::uint32_t o) {
    const auto key = std::make_tuple(static_cast<std::uint32_t>(r), s, o);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    if (active.count(key) || active.size() > 4096)
      return op_origin(r, s, o, fmt::format("{}@{}: provenance cycle or depth limit", op(o).name, s));
    active.insert(key);
    Trace t = explain_node_uncached(r, s, o);
    active.erase(key);
    memo[key] = t;
    return t;
  }

  Trace explain_node_uncached(std::size_t r, std::uint32_t s, std::uint32_t o) {
    const graph::Op& x = op(o);
    auto via = [&](Trace t) {
      t.path.push_back(hop(r, s, o));
      return t;
    };
    for (std::size_t i = 0; i < x.inputs.size(); ++i) {
      std::optional<std::uint64_t> e;
      if (!x.inputs[i].empty() && input_seen(r, s, o, static_cast<std::uint16_t>(i), &e))
        return via(explain_read(r, s, o, static_cast<std::uint16_t>(i), e));
    }
    if (is_collective_type(x.type)) return explain_collective(r, s, o);
    for (std::size_t i = 0; i < x.inputs.size(); ++i)
      if (!x.inputs[i].empty() && writer_nonfinite(r, s, o, static_cast<std::uint16_t>(i)))
        return via(explain_read(r, s, o, static_cast<std::uint16_t>(i), std::nullopt));
    return through_value_jump(r, s, o,
                              op_origin(r, s, o,
                                        fmt::format("{}@{} is the first op whose output shows a non-finite value (no "
                                                    "latch named it; no input shows one)",
                                                    x.name, s)));
  }

  /// A collective's output on rank r held a non-finite value that no latch on this rank's input
  /// showed: the writer of its input on this rank first (a latch may have been suppressed), then
  /// every other rank's input.
  Trace explain_collective(std::size_t r, std::uint32_t s, std::uint32_t c) {
    if (!op(c).inputs.empty() && writer_nonfinite(r, s, c, 0)) {
      Trace t = explain_read(r, s, c, 0, std::nullopt);
      t.path.push_back(hop(r, s, c));
      return t;
    }
    for (std::size_t q = 0; q < ranks.size(); ++q) {
      if (q == r || !same_comm(q, r, c)) continue;
      std::optional<std::uint64_t> e;
      if (input_seen(q, s, c, 0, &e) || (!op(c).inputs.empty() && writer_nonfinite(q, s, c, 0))) {
        Trace t = explain_read(q, s, c, 0, e);
        t.path.push_back(hop(q, s, c));
        t.path.push_back(hop(r, s, c));
        return t;
      }
    }
    for (std::size_t q = 0; q < ranks.size(); ++q)
      if (same_comm(q, r, c) && first_produced(q, s, c)) {
        Trace t = op_origin(q, s, c, "");
        if (q != r) t.path.push_back(hop(r, s, c));
        return t;
      }
    return op_origin(r, s, c,
                     fmt::format("{}@{} delivered a non-finite value that no rank's input to it shows", op(c).name, s));
  }

  /// The history of anomaly `a` on rank r.
  Trace explain(std::size_t r, const AnomalyRecord& a) {
    // An underflow, and an operand that saturated its low-bit format when quantized (finite
    // values clipped: no non-finite value follows), are their own history.
    if (a.kind == AnomalyKind::Underflow || (a.detail & spec::kExcDetailQuantize) || a.op_id >= g.ops().size()) {
      Trace t;
      t.origin.kind = OriginKind::Op;
      t.origin.rank = ev(r).rank;
      t.origin.step = a.step;
      t.origin.op_id = a.op_id;
      t.origin.latch = &a;
      t.origin.tensor = a.tensor;
      t.origin.element = a.element;
      t.origin.evidence = (a.detail & spec::kExcDetailQuantize)
                              ? fmt::format("overflow latched at {}: quantizing its input {} ({}) saturated {} element{}, "
                                            "the first at element {} (value {})",
                                            a.op, a.output_index, a.tensor, a.count, a.count == 1 ? "" : "s", a.element,
                                            a.value)
                              : fmt::format("{} latched at {} element {}", anomaly_kind_name(a.kind), a.op, a.element);
      if (a.op_id < g.ops().size()) t.path.push_back(hop(r, a.step, a.op_id));
      return t;
    }
    if (reads_input(a.kind) && a.on_input && a.output_index < op(a.op_id).inputs.size()) {
      Trace t = explain_read(r, a.step, a.op_id, static_cast<std::uint16_t>(a.output_index), a.element);
      t.path.push_back(hop(r, a.step, a.op_id));
      return t;
    }
    if (a.kind == AnomalyKind::Overflow) return through_value_jump(r, a.step, a.op_id, op_origin(r, a.step, a.op_id, ""));
    return explain_node(r, a.step, a.op_id);
  }
};

std::vector<std::string> split_path(const std::vector<Hop>& path, std::uint32_t rank) {
  std::vector<std::string> out;
  for (const Hop& h : path) {
    std::string s = h.name;
    if (h.step) s += fmt::format("@{}", *h.step);
    if (h.rank != rank) s += fmt::format(" (rank {})", h.rank);
    if (out.empty() || out.back() != s) out.push_back(std::move(s));
  }
  return out;
}

// FP16/BF16 storage as the numerics types.
template <class H> std::span<const H> halves(const graph::Tensor& t) {
  const auto bits = t.data<std::uint16_t>();
  return {reinterpret_cast<const H*>(bits.data()), bits.size()};
}

}  // namespace

std::optional<Magnitude> UploadSummary::magnitude() const {
  if (nonfinite_count > 0) return std::nullopt;
  return finite;
}

bool UploadSummary::is_finite(std::optional<std::uint64_t> e) const {
  if (nonfinite_count == 0) return true;
  if (!e) return false;
  if (std::binary_search(nonfinite.begin(), nonfinite.end(), *e)) return false;
  return nonfinite.size() == nonfinite_count || *e < nonfinite.back();
}

UploadSummary summarize_upload(const graph::Tensor& value) {
  const graph::Format f = value.desc().format;
  if (f != graph::Format::ND && f != graph::Format::NCHW) return summarize_upload(graph::to_logical(value));
  num::FiniteMoments m;
  switch (value.dtype()) {  // FP32/FP16/BF16 in their own storage; the rest widened to double
    case graph::DType::F32: num::accumulate(m, value.data<float>(), UploadSummary::kListed); break;
    case graph::DType::F16: num::accumulate(m, halves<num::f16>(value), UploadSummary::kListed); break;
    case graph::DType::BF16: num::accumulate(m, halves<num::bf16>(value), UploadSummary::kListed); break;
    default: num::accumulate(m, std::span<const double>(value.to_f64()), UploadSummary::kListed); break;
  }
  UploadSummary u;
  u.finite = Magnitude{m.max_abs, std::sqrt(m.sum_sq), m.min, m.count};
  u.elements = m.elements;
  u.nonfinite_count = m.nonfinite_count;
  u.nonfinite = std::move(m.nonfinite);
  return u;
}

std::optional<double> collective_order_limit(const graph::Graph& g, std::span<RankEvidence> ranks, std::uint32_t rank,
                                             std::uint32_t step, std::uint32_t op) {
  if (op >= g.ops().size() || !is_collective_type(g.op(op).type)) return std::nullopt;
  const graph::Op& x = g.op(op);
  if (Resolver::moves_values(x)) return 0.0;
  if (x.outputs.empty()) return std::nullopt;
  const auto r = std::find_if(ranks.begin(), ranks.end(), [&](const RankEvidence& e) { return e.rank == rank; });
  if (r == ranks.end()) return std::nullopt;
  Resolver res(g, ranks);
  const auto mi = res.member_inputs(static_cast<std::size_t>(r - ranks.begin()), step, op);
  if (!mi) return std::nullopt;
  auto roundoff = [](graph::DType t) {
    return t == graph::DType::F16 ? 0x1p-11 : t == graph::DType::BF16 ? 0x1p-8 : 0x1p-24;
  };
  const graph::DType acc = x.attr_str("accumulation", "fp32") == "fp16" ? graph::DType::F16 : graph::DType::F32;
  const double u = std::max(roundoff(acc), roundoff(g.tensor(x.outputs[0]).desc.dtype));
  return 2.0 * static_cast<double>(mi->n) * u * mi->sum;
}

std::vector<Origin> resolve_provenance(const graph::Graph& g, std::span<RankEvidence> ranks) {
  Resolver res(g, ranks);
  // An underflow is its own history, never the same origin as a NaN/Inf the same op produced
  // in the same step (the last key field keeps them apart).
  using Key = std::tuple<std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t, std::string, bool>;
  std::map<Key, Origin> origins;
  std::map<Key, std::size_t> best_path;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    if (!ranks[r].anomalies) continue;
    for (AnomalyRecord& a : *ranks[r].anomalies) {
      Trace t = res.explain(r, a);
      const Origin& o = t.origin;
      a.origin = o.kind;
      a.source_op = o.op_id < g.ops().size() ? g.op(o.op_id).name : a.op;
      a.source_step = o.step;
      a.source_rank = o.rank;
      a.corrupted_tensor.clear();
      a.corrupted_element.reset();
      if (o.kind != OriginKind::Op) {
        a.corrupted_tensor = o.tensor;
        a.corrupted_element = o.element;
      }
      const bool here = o.rank == a.rank && o.step == a.step && o.op_id == a.op_id;
      if (o.kind == OriginKind::Op && here) a.role = AnomalyRole::Source;
      else if (o.kind != OriginKind::Op && here && reads_input(a.kind)) a.role = AnomalyRole::Corruption;
      else if (o.rank != a.rank) a.role = AnomalyRole::Carrier;
      else a.role = AnomalyRole::Propagation;
      a.propagation_path = split_path(t.path, a.rank);
      const Key k{o.step, res.pos(o.op_id), o.rank, static_cast<std::uint32_t>(o.kind), o.tensor,
                  o.latch && (o.latch->kind == AnomalyKind::Underflow || (o.latch->detail & spec::kExcDetailQuantize))};
      auto [it, fresh] = origins.emplace(k, o);
      it->second.explains.push_back(&a);
      if (fresh || t.path.size() > best_path[k]) {
        best_path[k] = t.path.size();
        it->second.path = a.propagation_path;
      }
      if (!it->second.latch && o.latch) it->second.latch = o.latch;
    }
  }
  std::vector<Origin> out;
  for (auto& [k, o] : origins) out.push_back(std::move(o));
  return out;
}

}  // namespace probelab::probes
