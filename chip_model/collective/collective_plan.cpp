#include "chip_model/collective/collective_plan.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace probelab::chip {
namespace {

using spec::CollectiveAlgo;
using spec::CollectiveOp;

std::uint32_t add_leaf(ReductionExpr& e, std::uint32_t pos) {
  e.terms.push_back({PlanTerm::Kind::Leaf, pos, 0, 0});
  return static_cast<std::uint32_t>(e.terms.size() - 1);
}

std::uint32_t add_sum(ReductionExpr& e, std::uint32_t lhs, std::uint32_t rhs, std::uint32_t at) {
  e.terms.push_back({PlanTerm::Kind::Add, at, lhs, rhs});
  return static_cast<std::uint32_t>(e.terms.size() - 1);
}

ReductionExpr single_leaf(std::uint32_t pos) {
  ReductionExpr e;
  add_leaf(e, pos);
  e.final_at = pos;
  return e;
}

/// Left fold ((o0 + o1) + o2) + ... computed on position `at`.
ReductionExpr fold(const std::vector<std::uint32_t>& order, std::uint32_t at) {
  ReductionExpr e;
  std::uint32_t acc = add_leaf(e, order[0]);
  for (std::size_t j = 1; j < order.size(); ++j) acc = add_sum(e, acc, add_leaf(e, order[j]), at);
  e.final_at = at;
  return e;
}

struct Range {
  std::uint64_t begin, size;
};

/// count split into n nearly equal chunks, the first count % n one element larger.
std::vector<Range> split(std::uint64_t count, std::uint32_t n) {
  std::vector<Range> r(n);
  const std::uint64_t base = count / n, rem = count % n;
  std::uint64_t at = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    r[i] = {at, base + (i < rem ? 1 : 0)};
    at += r[i].size;
  }
  return r;
}

std::uint32_t ceil_log2(std::uint32_t n) {
  std::uint32_t k = 0;
  while ((1u << k) < n) ++k;
  return k;
}

void push(PlanStep& s, std::uint32_t src, std::uint32_t dst, std::uint64_t elems, bool partial) {
  if (elems > 0 && src != dst) s.transfers.push_back({src, dst, elems, partial});
}

bool is_reducing(CollectiveOp op) {
  return op == CollectiveOp::AllReduce || op == CollectiveOp::ReduceScatter;
}

void build_ring(CollectivePlan& p) {
  const std::uint32_t n = p.size();
  auto mod = [n](std::int64_t x) { return static_cast<std::uint32_t>(((x % n) + n) % n); };
  const std::uint64_t cnt = p.count;
  std::vector<Range> chunks;
  if (p.op == CollectiveOp::AllReduce || p.op == CollectiveOp::Broadcast) {
    chunks = split(cnt, n);
  } else {
    for (std::uint32_t c = 0; c < n; ++c) chunks.push_back({c * cnt, cnt});
  }
  auto reduce_scatter_steps = [&] {
    for (std::uint32_t s = 0; s + 1 < n; ++s) {
      PlanStep st;
      for (std::uint32_t q = 0; q < n; ++q) push(st, q, mod(q + 1), chunks[mod(q - 1 - s)].size, true);
      p.steps.push_back(std::move(st));
    }
  };
  auto all_gather_steps = [&] {
    for (std::uint32_t s = 0; s + 1 < n; ++s) {
      PlanStep st;
      for (std::uint32_t q = 0; q < n; ++q) push(st, q, mod(q + 1), chunks[mod(q - s)].size, false);
      p.steps.push_back(std::move(st));
    }
  };
  switch (p.op) {
    case CollectiveOp::AllReduce:
    case CollectiveOp::ReduceScatter: {
      for (std::uint32_t c = 0; c < n; ++c) {
        ReductionExpr e;
        std::uint32_t acc = add_leaf(e, mod(c + 1));
        for (std::uint32_t j = 2; j <= n; ++j) acc = add_sum(e, acc, add_leaf(e, mod(c + j)), mod(c + j));
        e.final_at = c;
        p.exprs.push_back(std::move(e));
      }
      reduce_scatter_steps();
      if (p.op == CollectiveOp::AllReduce) {
        for (std::uint32_t q = 0; q < n; ++q)
          for (std::uint32_t c = 0; c < n; ++c)
            if (chunks[c].size) p.ranks[q].chunks.push_back({chunks[c].begin, chunks[c].begin, chunks[c].size, c});
        all_gather_steps();
      } else {
        for (std::uint32_t q = 0; q < n; ++q) p.ranks[q].chunks.push_back({chunks[q].begin, 0, cnt, q});
      }
      break;
    }
    case CollectiveOp::AllGather:
      for (std::uint32_t c = 0; c < n; ++c) p.exprs.push_back(single_leaf(c));
      for (std::uint32_t q = 0; q < n; ++q)
        for (std::uint32_t c = 0; c < n; ++c) p.ranks[q].chunks.push_back({0, c * cnt, cnt, c});
      all_gather_steps();
      break;
    case CollectiveOp::Broadcast: {
      p.exprs.push_back(single_leaf(p.root_pos));
      for (std::uint32_t q = 0; q < n; ++q) p.ranks[q].chunks.push_back({0, 0, cnt, 0});
      // Chunk i crosses hop h (root+h -> root+h+1) in step i + h.
      for (std::uint32_t s = 0; n > 1 && s < 2 * (n - 1); ++s) {
        PlanStep st;
        for (std::uint32_t h = 0; h + 1 < n; ++h) {
          if (s < h || s - h >= n) continue;
          push(st, mod(p.root_pos + h), mod(p.root_pos + h + 1), chunks[s - h].size, false);
        }
        p.steps.push_back(std::move(st));
      }
      break;
    }
  }
}

void build_tree(CollectivePlan& p) {
  const std::uint32_t n = p.size(), k_levels = ceil_log2(n);
  const std::uint64_t cnt = p.count;
  auto pos = [&](std::uint32_t v) { return (v + p.root_pos) % n; };
  auto broadcast_steps = [&](std::uint64_t elems) {
    for (std::uint32_t k = k_levels; k-- > 0;) {
      PlanStep st;
      for (std::uint32_t v = 0; v < n; v += 2u << k)
        if (v + (1u << k) < n) push(st, pos(v), pos(v + (1u << k)), elems, false);
      p.steps.push_back(std::move(st));
    }
  };
  switch (p.op) {
    case CollectiveOp::AllReduce:
    case CollectiveOp::ReduceScatter: {
      const std::uint64_t elems = p.op == CollectiveOp::AllReduce ? cnt : cnt * n;
      ReductionExpr e;
      std::vector<std::uint32_t> cur(n);
      for (std::uint32_t v = 0; v < n; ++v) cur[v] = add_leaf(e, pos(v));
      for (std::uint32_t k = 0; k < k_levels; ++k) {
        PlanStep st;
        for (std::uint32_t v = 1u << k; v < n; v += 2u << k) {
          const std::uint32_t dst = v - (1u << k);
          cur[dst] = add_sum(e, cur[dst], cur[v], pos(dst));
          push(st, pos(v), pos(dst), elems, true);
        }
        p.steps.push_back(std::move(st));
      }
      // The last level has one addition, into v = 0, so the last term is the result.
      e.final_at = p.root_pos;
      p.exprs.push_back(std::move(e));
      if (p.op == CollectiveOp::AllReduce) {
        for (std::uint32_t q = 0; q < n; ++q) p.ranks[q].chunks.push_back({0, 0, cnt, 0});
        broadcast_steps(cnt);
      } else {
        for (std::uint32_t q = 0; q < n; ++q) p.ranks[q].chunks.push_back({q * cnt, 0, cnt, 0});
        PlanStep st;
        for (std::uint32_t q = 0; q < n; ++q) push(st, p.root_pos, q, cnt, false);
        if (!st.transfers.empty()) p.steps.push_back(std::move(st));
      }
      break;
    }
    case CollectiveOp::AllGather: {
      for (std::uint32_t c = 0; c < n; ++c) p.exprs.push_back(single_leaf(c));
      for (std::uint32_t q = 0; q < n; ++q)
        for (std::uint32_t c = 0; c < n; ++c) p.ranks[q].chunks.push_back({0, c * cnt, cnt, c});
      for (std::uint32_t k = 0; k < k_levels; ++k) {
        PlanStep st;
        for (std::uint32_t v = 1u << k; v < n; v += 2u << k)
          push(st, pos(v), pos(v - (1u << k)), cnt * (std::min(v + (1u << k), n) - v), false);
        p.steps.push_back(std::move(st));
      }
      broadcast_steps(cnt * n);
      break;
    }
    case CollectiveOp::Broadcast:
      p.exprs.push_back(single_leaf(p.root_pos));
      for (std::uint32_t q = 0; q < n; ++q) p.ranks[q].chunks.push_back({0, 0, cnt, 0});
      broadcast_steps(cnt);
      break;
  }
}

void build_direct(CollectivePlan& p, const std::vector<std::vector<std::uint32_t>>& orders) {
  const std::uint32_t n = p.size();
  const std::uint64_t cnt = p.count;
  PlanStep st;
  switch (p.op) {
    case CollectiveOp::AllReduce:
    case CollectiveOp::ReduceScatter:
      for (std::uint32_t q = 0; q < n; ++q) {
        std::vector<std::uint32_t> order;
        if (q < orders.size() && !orders[q].empty()) {
          order = orders[q];
        } else {
          for (std::uint32_t i = 0; i < n; ++i) order.push_back(i);
        }
        p.exprs.push_back(n == 1 ? single_leaf(0) : fold(order, q));
        p.ranks[q].order = order;
        const std::uint64_t src = p.op == CollectiveOp::AllReduce ? 0 : q * cnt;
        p.ranks[q].chunks.push_back({src, 0, cnt, q});
        for (std::uint32_t from = 0; from < n; ++from) push(st, from, q, cnt, false);
      }
      break;
    case CollectiveOp::AllGather:
      for (std::uint32_t c = 0; c < n; ++c) p.exprs.push_back(single_leaf(c));
      for (std::uint32_t q = 0; q < n; ++q) {
        for (std::uint32_t c = 0; c < n; ++c) p.ranks[q].chunks.push_back({0, c * cnt, cnt, c});
        for (std::uint32_t from = 0; from < n; ++from) push(st, from, q, cnt, false);
      }
      break;
    case CollectiveOp::Broadcast:
      p.exprs.push_back(single_leaf(p.root_pos));
      for (std::uint32_t q = 0; q < n; ++q) {
        p.ranks[q].chunks.push_back({0, 0, cnt, 0});
        push(st, p.root_pos, q, cnt, false);
      }
      break;
  }
  if (!st.transfers.empty()) p.steps.push_back(std::move(st));
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

std::string ReductionExpr::to_string(const std::vector<std::uint16_t>& group) const {
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
  if (n > static_cast<std::size_t>(spec::kMaxCollectiveRanks))
    return fmt::format("group: {} ranks, at most {} supported", n, spec::kMaxCollectiveRanks);
  std::vector<std::uint16_t> sorted = r.group;
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
  p.ranks.resize(p.size());
  switch (req.algo) {
    case CollectiveAlgo::Ring: build_ring(p); break;
    case CollectiveAlgo::Tree: build_tree(p); break;
    case CollectiveAlgo::Direct: build_direct(p, req.direct_orders); break;
  }
  return p;
}

PlanRequest plan_request_from_args(const spec::CollectiveArgs& a, std::uint32_t job_size) {
  auto bad = [](const std::string& what) {
    return std::invalid_argument("CollectiveArgs." + what);
  };
  PlanRequest r;
  r.op = static_cast<CollectiveOp>(a.op);
  r.algo = static_cast<CollectiveAlgo>(a.algorithm);
  r.reduction = static_cast<spec::ReduceOp>(a.reduction);
  r.data_dtype = static_cast<graph::DType>(a.input.dtype);
  r.acc_dtype = static_cast<graph::DType>(a.acc_dtype);
  r.count = a.count;
  r.root = a.root;
  if (a.output.dtype != a.input.dtype)
    throw bad(fmt::format("output.dtype: {} differs from input.dtype {}", a.output.dtype, a.input.dtype));
  if (a.num_ranks > static_cast<std::uint32_t>(spec::kMaxCollectiveRanks))
    throw bad(fmt::format("num_ranks: {} exceeds {}", a.num_ranks, spec::kMaxCollectiveRanks));
  if (a.num_ranks == 0) {
    for (std::uint32_t i = 0; i < job_size; ++i) r.group.push_back(static_cast<std::uint16_t>(i));
  } else {
    r.group.assign(a.group, a.group + a.num_ranks);
  }
  for (auto g : r.group)
    if (g >= job_size) throw bad(fmt::format("group: chip rank {} outside the job of {} chips", g, job_size));
  if (static_cast<unsigned>(a.order_mode) > 2) throw bad("order_mode: expected arrival, group or explicit");
  if (auto err = validate_plan_request(r); !err.empty()) throw bad(err);
  return r;
}

}  // namespace probelab::chip
