#include "chip_model/collective/collective_plan.h"

#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

namespace probelab::chip {
namespace {

using spec::CollectiveAlgo;
using spec::CollectiveOp;

/// Symbolic evaluation of the ranks' programs: values are expression nodes instead of numbers.
struct Sym {
  bool add = false;
  std::uint32_t pos = 0;  // leaf: contributor; add: the position that adds
  std::shared_ptr<const Sym> lhs, rhs;
};
using SymPtr = std::shared_ptr<const Sym>;

SymPtr leaf(std::uint32_t pos) { return std::make_shared<const Sym>(Sym{false, pos, nullptr, nullptr}); }
SymPtr sum(SymPtr a, SymPtr b, std::uint32_t at) { return std::make_shared<const Sym>(Sym{true, at, std::move(a), std::move(b)}); }

/// What a message carries: an expression node over the sender's element range (its input or a
/// partial), or final values as output chunks based at 0.
struct SymPayload {
  SymPtr sym;
  std::vector<OutputChunk> pieces;
};

/// Output chunks of `out` covering [begin, begin + count), rebased to start at 0.
std::vector<OutputChunk> extract(const std::vector<OutputChunk>& out, std::uint64_t begin, std::uint64_t count) {
  std::vector<OutputChunk> r;
  for (const auto& c : out) {
    const std::uint64_t lo = std::max(c.dst_begin, begin), hi = std::min(c.dst_begin + c.count, begin + count);
    if (lo >= hi) continue;
    r.push_back({c.src_begin + (lo - c.dst_begin), lo - begin, hi - lo, c.expr});
  }
  return r;
}

class SymbolicRun {
 public:
  SymbolicRun(CollectivePlan& plan, const PlanRequest& req) : plan_(plan), req_(req), n_(plan.size()) {}

  void run() {
    std::vector<RankProgram> progs;
    std::uint32_t rounds = 0;
    for (std::uint32_t q = 0; q < n_; ++q) {
      progs.push_back(build_program(program_request(req_, q)));
      rounds = std::max(rounds, progs.back().rounds);
    }
    plan_.steps.resize(rounds);
    slots_.resize(n_);
    outputs_.resize(n_);
    std::vector<std::size_t> pc(n_, 0);
    for (bool progress = true; progress;) {
      progress = false;
      for (std::uint32_t q = 0; q < n_; ++q)
        while (pc[q] < progs[q].steps.size() && exec(q, progs[q].steps[pc[q]], progs[q])) {
          ++pc[q];
          progress = true;
        }
    }
    for (std::uint32_t q = 0; q < n_; ++q)
      if (pc[q] != progs[q].steps.size())
        throw std::logic_error(fmt::format("collective plan: position {} blocked at step {}", q, pc[q]));
    renumber();
    for (auto& st : plan_.steps)
      std::stable_sort(st.transfers.begin(), st.transfers.end(),
                       [](const Transfer& a, const Transfer& b) { return std::tie(a.src, a.dst) < std::tie(b.src, b.dst); });
  }

 private:
  struct Slot {
    SymPtr sym;   // null: the rank's own input (a leaf)
    int expr = -1;  // finalized in place: expression and the range it started at
    std::uint64_t begin = 0;
  };
  using Key = std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>;  // src, dst, tag

  std::uint32_t new_expr(SymPtr s, std::uint32_t final_at) {
    ReductionExpr e;
    flatten(e, s);
    e.final_at = final_at;
    plan_.exprs.push_back(std::move(e));
    return static_cast<std::uint32_t>(plan_.exprs.size() - 1);
  }
  std::uint32_t flatten(ReductionExpr& e, const SymPtr& s) {
    if (!s->add) {
      e.terms.push_back({PlanTerm::Kind::Leaf, s->pos, 0, 0});
    } else {
      const std::uint32_t l = flatten(e, s->lhs), r = flatten(e, s->rhs);
      e.terms.push_back({PlanTerm::Kind::Add, s->pos, l, r});
    }
    return static_cast<std::uint32_t>(e.terms.size() - 1);
  }
  std::uint32_t leaf_expr(std::uint32_t pos) {
    auto it = leaf_exprs_.find(pos);
    if (it == leaf_exprs_.end()) it = leaf_exprs_.emplace(pos, new_expr(leaf(pos), pos)).first;
    return it->second;
  }
  SymPtr own(std::uint32_t q, std::uint32_t slot) const {
    auto it = slots_[q].find(slot);
    return it == slots_[q].end() || !it->second.sym ? leaf(q) : it->second.sym;
  }
  /// Writes output chunks at `dst`, replacing what the output held there (a tree all-gather
  /// receives the whole gathered buffer over the blocks it already had).
  void place(std::uint32_t q, const std::vector<OutputChunk>& pieces, std::uint64_t dst) {
    for (auto c : pieces) {
      c.dst_begin += dst;
      std::vector<OutputChunk> kept;
      for (const auto& o : outputs_[q]) {
        const std::uint64_t lo = o.dst_begin, hi = o.dst_begin + o.count;
        if (hi <= c.dst_begin || lo >= c.dst_begin + c.count) {
          kept.push_back(o);
          continue;
        }
        if (lo < c.dst_begin) kept.push_back({o.src_begin, lo, c.dst_begin - lo, o.expr});
        if (hi > c.dst_begin + c.count) {
          const std::uint64_t cut = c.dst_begin + c.count - lo;
          kept.push_back({o.src_begin + cut, lo + cut, hi - lo - cut, o.expr});
        }
      }
      kept.push_back(c);
      outputs_[q] = std::move(kept);
    }
  }

  bool exec(std::uint32_t q, const ProgStep& s, const RankProgram& prog) {
    using K = ProgStep::Kind;
    switch (s.kind) {
      case K::Send: {
        SymPayload pl;
        bool partial = false;
        if (s.from == Operand::Input) {
          pl.sym = leaf(q);
        } else if (s.from == Operand::Output) {
          pl.pieces = extract(outputs_[q], s.begin, s.count);
        } else {
          auto it = slots_[q].find(s.slot);
          if (it != slots_[q].end() && it->second.expr >= 0) {
            pl.pieces = {{s.begin, 0, s.count, static_cast<std::uint32_t>(it->second.expr)}};
          } else {
            pl.sym = own(q, s.slot);
            partial = pl.sym->add;
          }
        }
        mail_[{q, s.peer, s.tag}] = std::move(pl);
        plan_.steps.at(s.round).transfers.push_back({q, s.peer, s.count, partial});
        return true;
      }
      case K::Recv: {
        auto it = mail_.find({s.peer, q, s.tag});
        if (it == mail_.end()) return false;
        SymPayload pl = std::move(it->second);
        mail_.erase(it);
        if (s.combine == Combine::Store) {
          place(q, pl.sym ? std::vector<OutputChunk>{{s.begin, 0, s.count, leaf_expr(pl.sym->pos)}} : pl.pieces, s.dst);
        } else if (s.combine == Combine::AddRecvFirst) {
          slots_[q][s.slot].sym = sum(pl.sym, leaf(q), q);
        } else {
          slots_[q][s.slot].sym = sum(own(q, s.slot), pl.sym, q);
        }
        return true;
      }
      case K::Finalize: {
        auto it = slots_[q].find(s.slot);
        std::uint32_t e;
        std::uint64_t src = s.begin;
        if (it != slots_[q].end() && it->second.expr >= 0) {
          e = static_cast<std::uint32_t>(it->second.expr);
        } else {
          const SymPtr v = own(q, s.slot);
          e = v->add ? new_expr(v, q) : leaf_expr(q);
        }
        if (s.in_place) {
          slots_[q][s.slot] = Slot{nullptr, static_cast<int>(e), s.begin};
        } else {
          outputs_[q].push_back({src, s.dst, s.count, e});
        }
        return true;
      }
      case K::Copy:
        outputs_[q].push_back({s.begin, s.dst, s.count, leaf_expr(q)});
        return true;
      case K::FoldAll: {
        for (std::uint32_t p = 0; p < n_; ++p)
          if (p != q && !mail_.count({p, q, s.tag})) return false;
        std::vector<std::uint32_t> order = prog.fold_order;
        if (order.empty())
          for (std::uint32_t p = 0; p < n_; ++p) order.push_back(p);
        SymPtr acc = leaf(order[0]);
        for (std::size_t j = 1; j < order.size(); ++j) acc = sum(acc, leaf(order[j]), q);
        for (std::uint32_t p = 0; p < n_; ++p) mail_.erase({p, q, s.tag});
        outputs_[q].push_back({s.begin, 0, s.count, new_expr(acc, q)});
        plan_.ranks[q].order = order;
        return true;
      }
    }
    return false;
  }

  /// Expressions numbered by (final position, creation order); chunks sorted by destination.
  void renumber() {
    std::vector<std::uint32_t> idx(plan_.exprs.size());
    for (std::uint32_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return plan_.exprs[a].final_at < plan_.exprs[b].final_at; });
    std::vector<std::uint32_t> to(idx.size());
    std::vector<ReductionExpr> sorted;
    for (std::uint32_t i = 0; i < idx.size(); ++i) {
      to[idx[i]] = i;
      sorted.push_back(std::move(plan_.exprs[idx[i]]));
    }
    plan_.exprs = std::move(sorted);
    for (std::uint32_t q = 0; q < n_; ++q) {
      auto& out = outputs_[q];
      for (auto& c : out) c.expr = to[c.expr];
      std::stable_sort(out.begin(), out.end(), [](const OutputChunk& a, const OutputChunk& b) { return a.dst_begin < b.dst_begin; });
      plan_.ranks[q].chunks = std::move(out);
    }
  }

  CollectivePlan& plan_;
  const PlanRequest& req_;
  std::uint32_t n_;
  std::vector<std::map<std::uint32_t, Slot>> slots_;
  std::vector<std::vector<OutputChunk>> outputs_;
  std::map<Key, SymPayload> mail_;
  std::map<std::uint32_t, std::uint32_t> leaf_exprs_;
};

bool is_reducing(CollectiveOp op) {
  return op == CollectiveOp::AllReduce || op == CollectiveOp::ReduceScatter;
}

bool valid_data_dtype(graph::DType t) {
  return t == graph::DType::F16 || t == graph::DType::BF16 || t == graph::DType::F32;
}

}  // namespace

std::vector<std::uint32_t> ReductionExpr::leaf_order() const {
  std::vector<std::uint32_t> out;
  for (const auto& t : terms)
    if (t.kind == PlanTerm::Kind::Leaf) out.push_back(t.position);
  return out;
}

std::string ReductionExpr::to_string(const std::vector<std::uint32_t>& group) const {
  std::vector<std::string> s(terms.size());
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const auto& t = terms[i];
    s[i] = t.kind == PlanTerm::Kind::Leaf ? fmt::format("r{}", group.at(t.position))
                                          : fmt::format("({}+{})", s[t.lhs], s[t.rhs]);
  }
  return s.empty() ? std::string() : s.back();
}

bool CollectivePlan::reduces() const { return is_reducing(op); }

std::uint64_t CollectivePlan::input_count() const {
  return op == CollectiveOp::ReduceScatter ? count * size() : count;
}

std::uint64_t CollectivePlan::output_count() const {
  return op == CollectiveOp::AllGather ? count * size() : count;
}

std::uint64_t CollectivePlan::wire_bytes(const Transfer& t) const {
  return t.elems * graph::dtype_size(t.partial ? acc_dtypes.at(t.src) : data_dtype);
}

std::uint32_t CollectivePlan::position_of(std::uint32_t chip_rank) const {
  for (std::uint32_t i = 0; i < size(); ++i)
    if (group[i] == chip_rank) return i;
  throw std::invalid_argument(fmt::format("collective: chip rank {} is not in the group", chip_rank));
}

std::string CollectivePlan::describe() const {
  std::uint64_t transfers = 0, bytes = 0;
  for (const auto& s : steps)
    for (const auto& t : s.transfers) {
      ++transfers;
      bytes += wire_bytes(t);
    }
  std::string out = fmt::format(
      "{} {} N={} root=r{} count={} data={} acc={} reduction={}\n"
      "  steps={} transfers={} wire_bytes={}\n",
      spec::collective_op_name(op), spec::collective_algo_name(algo), size(), group.at(root_pos),
      count, graph::dtype_name(data_dtype), graph::dtype_name(acc_dtype),
      reduction == spec::ReduceOp::Mean ? "mean" : "sum", steps.size(), transfers, bytes);
  for (std::size_t i = 0; i < exprs.size(); ++i)
    out += fmt::format("  e{} @r{}: {}\n", i, group.at(exprs[i].final_at), exprs[i].to_string(group));
  for (std::uint32_t q = 0; q < size(); ++q) {
    out += fmt::format("  r{}:", group[q]);
    if (acc_dtypes[q] != acc_dtype) out += fmt::format(" acc={}", graph::dtype_name(acc_dtypes[q]));
    if (!ranks[q].order.empty()) {
      out += " order=";
      for (auto o : ranks[q].order) out += fmt::format("r{},", group[o]);
      out.back() = ';';
    }
    for (const auto& c : ranks[q].chunks)
      out += fmt::format(" [{},{})=e{}", c.dst_begin, c.dst_begin + c.count, c.expr);
    out += '\n';
  }
  return out;
}

std::string validate_plan_request(const PlanRequest& r) {
  const auto n = r.group.size();
  if (n == 0) return "group: empty";
  std::vector<std::uint32_t> sorted = r.group;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return "group: duplicate chip rank";
  if (std::find(r.group.begin(), r.group.end(), r.root) == r.group.end())
    return fmt::format("root: chip rank {} is not in the group", r.root);
  if (r.count == 0) return "count: must be > 0";
  if (static_cast<unsigned>(r.op) > 3) return "op: expected allreduce, reducescatter, allgather or broadcast";
  if (static_cast<unsigned>(r.algo) > 2) return "algorithm: expected ring, tree or direct";
  if (static_cast<unsigned>(r.reduction) > 1) return "reduction: expected sum or mean";
  if (!valid_data_dtype(r.data_dtype)) return "dtype: expected float16, bfloat16 or float32";
  if (!valid_data_dtype(r.acc_dtype)) return "acc_dtype: expected float32, float16 or bfloat16";
  if (!r.rank_acc_dtypes.empty() && r.rank_acc_dtypes.size() != n)
    return fmt::format("rank_acc_dtypes: {} entries for {} ranks", r.rank_acc_dtypes.size(), n);
  for (auto t : r.rank_acc_dtypes)
    if (!valid_data_dtype(t)) return "rank_acc_dtypes: expected float32, float16 or bfloat16";
  if (r.direct_orders.size() > n) return "direct_orders: more entries than ranks";
  for (std::size_t q = 0; q < r.direct_orders.size(); ++q) {
    const auto& o = r.direct_orders[q];
    if (o.empty()) continue;
    std::vector<std::uint32_t> s = o;
    std::sort(s.begin(), s.end());
    bool perm = s.size() == n;
    for (std::size_t i = 0; perm && i < n; ++i) perm = s[i] == i;
    if (!perm) return fmt::format("direct_orders[{}]: expected a permutation of positions 0..{}", q, n - 1);
  }
  return {};
}

CollectivePlan build_plan(const PlanRequest& req) {
  if (auto err = validate_plan_request(req); !err.empty())
    throw std::invalid_argument("collective plan: " + err);
  CollectivePlan p;
  p.op = req.op;
  p.algo = req.algo;
  p.reduction = req.reduction;
  p.data_dtype = req.data_dtype;
  p.acc_dtype = req.acc_dtype;
  p.acc_dtypes = req.rank_acc_dtypes.empty() ? std::vector<graph::DType>(req.group.size(), req.acc_dtype)
                                             : req.rank_acc_dtypes;
  p.count = req.count;
  p.group = req.group;
  p.root_pos = p.position_of(req.root);
  p.divisor = req.divisor;
  p.ranks.resize(p.size());
  SymbolicRun(p, req).run();
  return p;
}

ProgramRequest program_request(const PlanRequest& req, std::uint32_t pos) {
  ProgramRequest r;
  r.op = req.op;
  r.algo = req.algo;
  r.size = static_cast<std::uint32_t>(req.group.size());
  r.position = pos;
  r.count = req.count;
  for (std::uint32_t i = 0; i < r.size; ++i)
    if (req.group[i] == req.root) r.root_pos = i;
  if (req.algo == CollectiveAlgo::Direct && pos < req.direct_orders.size()) r.direct_order = req.direct_orders[pos];
  return r;
}

}  // namespace probelab::chip
