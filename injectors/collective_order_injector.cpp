// `collective_order`: the mechanisms that make ranks of a data-parallel job disagree — a per-rank
// reduction order for the direct algorithm, seeded arrival jitter that changes the order from run
// to run, a forced algorithm, and FP16 accumulation in the communication buffer.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "chip_model/spec/collective_args.h"
#include "injectors/injector.h"
#include "injectors/site.h"

namespace probelab::inject {
namespace {


std::string override_str(const chip::CollectiveOverride& o) {
  std::string s;
  if (o.algorithm) s += fmt::format("algorithm={} ", spec::collective_algo_name(static_cast<spec::CollectiveAlgo>(*o.algorithm)));
  if (o.acc_dtype) s += fmt::format("acc={} ", graph::dtype_name(*o.acc_dtype));
  if (!o.reduction_order.empty()) s += fmt::format("order=[{}] ", fmt::join(o.reduction_order, ","));
  if (o.arrival_jitter_ps) s += fmt::format("jitter<={}ps seed={} ", o.arrival_jitter_ps, o.jitter_seed);
  if (s.empty()) return "task arguments";
  s.pop_back();
  return s;
}

class CollectiveOrderInjector final : public Injector {
 public:
  CollectiveOrderInjector(const Params& p, const InjectionEnv& env) : ranks_(env.ranks) {
    graph_ = env.executed;
    seed_ = read_seed(p, env);
    site_ = read_site(p, env.executed, env.ranks, env.steps, collective_op_types());
    const auto algo = p.choice("algorithm", {"keep", "ring", "tree", "direct"});
    // A ring or a tree adds in its own order: an imposed order needs the direct algorithm (as
    // training.allreduce refuses `order` with ring or tree). Their default order is arrival.
    const bool own_order = algo == "ring" || algo == "tree";
    // A fault that only adds arrival jitter (no order, accumulation or algorithm given) keeps the
    // arrival order: its point is the timing, and an imposed order would be a second fault.
    const bool jitter_only = p.has("arrival_jitter_ps") && !p.has("accumulation") && !p.has("algorithm");
    order_ = (own_order || jitter_only) && !p.has("order")
                 ? "arrival"
                 : p.choice("order", {"arrival", "reverse", "rotate", "random", "explicit"});
    if (own_order && order_ != "arrival")
      p.fail("order", fmt::format("algorithm {} adds in its own order: order {} needs algorithm direct (or keep), "
                                  "or leave order out",
                                  algo, order_));
    if (order_ == "explicit") {
      const auto n = p.node("orders");
      if (!n.IsSequence() || n.size() != env.ranks)
        p.fail("orders", fmt::format("expected one order (a permutation of 0..{}) per rank", env.ranks - 1));
      for (const auto& row : n) {
        std::vector<std::uint32_t> perm;
        for (const auto& x : row) perm.push_back(x.as<std::uint32_t>());
        auto sorted = perm;
        std::sort(sorted.begin(), sorted.end());
        std::vector<std::uint32_t> ident(env.ranks);
        std::iota(ident.begin(), ident.end(), 0u);
        if (sorted != ident)
          p.fail("orders", fmt::format("[{}] is not a permutation of the job's {} ranks 0..{} (each row orders every rank "
                                       "of the job; a smaller communicator takes its own members, in that order)",
                                       fmt::join(perm, ", "), env.ranks, env.ranks - 1));
        explicit_.push_back(std::move(perm));
      }
    } else if (p.has("orders")) {
      p.fail("orders", "only used with order: explicit");
    }
    if (algo == "ring") algorithm_ = static_cast<std::uint32_t>(spec::CollectiveAlgo::Ring);
    if (algo == "tree") algorithm_ = static_cast<std::uint32_t>(spec::CollectiveAlgo::Tree);
    if (algo == "direct" || (algo == "keep" && order_ != "arrival"))
      algorithm_ = static_cast<std::uint32_t>(spec::CollectiveAlgo::Direct);
    const auto acc = p.choice("accumulation", {"keep", "fp16", "fp32"});
    if (acc == "fp16") acc_ = graph::DType::F16;
    if (acc == "fp32") acc_ = graph::DType::F32;
    jitter_ps_ = p.uinteger("arrival_jitter_ps");
    // An AllGather or a Broadcast adds nothing: an order or an accumulation dtype leaves its
    // result as it is, and only a forced algorithm or arrival jitter changes how it runs.
    forced_ = algo != "keep";
    const bool moves_only = !forced_ && jitter_ps_ == 0;
    bool any_reduction = site_.any_op;
    for (std::uint32_t id : site_.op_ids) any_reduction = any_reduction || reduces(id);
    if (moves_only && !any_reduction)
      p.fail("op", "matches only AllGather and Broadcast ops, which add nothing: a reduction order or an "
                   "accumulation dtype has no effect on them (force an algorithm or set arrival_jitter_ps, or "
                   "target an AllReduce or ReduceScatter)");
  }

  std::uint32_t sites() const override { return chip::kFaultCollective; }

  void on_collective(const chip::FaultSite& s, chip::CollectiveOverride& o) override {
    if (!site_.matches_op(s.op_id) || !site_.steps.contains(s.step)) return;
    // A data movement takes only an algorithm asked for by name (not the direct one an order
    // implies) and the jitter; every member of the collective decides the same way.
    const bool adds = reduces(s.op_id);
    const std::optional<std::uint32_t> algorithm = adds || forced_ ? algorithm_ : std::nullopt;
    if (!site_.ranks.contains(s.rank)) {
      // Every member of a collective runs one algorithm: a rank outside `rank` takes the forced
      // one too (the targeted ranks' group may hold it), adding as the group agrees (a ring or
      // tree turned direct: in group order), with its own accumulation and timing. Not a fault
      // of this rank: nothing is recorded.
      if (algorithm) {
        o.algorithm = algorithm;
        o.follows_group = true;
      }
      return;
    }
    if (!adds && !algorithm && jitter_ps_ == 0) return;  // nothing to change in a data movement
    const auto before = override_str(o);
    if (algorithm) o.algorithm = algorithm;
    if (acc_ && adds) o.acc_dtype = acc_;
    // An arrival order imposes none: it leaves an order an earlier fault on this collective set.
    if (adds && order_ != "arrival") o.reduction_order = order_for(s);
    if (jitter_ps_) {
      o.arrival_jitter_ps = jitter_ps_;
      o.jitter_seed = splitmix64(seed_ ^ (std::uint64_t{s.step} << 32) ^ s.rank);
    }
    record({s, op_name(s.op_id), fmt::format("collective on rank {}", s.rank), before, override_str(o)});
  }

 private:
  bool reduces(std::uint32_t op_id) const {
    if (!graph_ || op_id >= graph_->ops().size()) return true;
    const std::string& t = graph_->op(op_id).type;
    return t != "AllGather" && t != "Broadcast";
  }
  std::vector<std::uint32_t> order_for(const chip::FaultSite& s) const {
    if (order_ == "arrival") return {};
    if (order_ == "explicit") return explicit_.at(s.rank);
    std::vector<std::uint32_t> v(ranks_);
    std::iota(v.begin(), v.end(), 0u);
    if (order_ == "reverse") {
      // Rank-dependent: even ranks add in rank order, odd ranks in reverse.
      if (s.rank % 2) std::reverse(v.begin(), v.end());
    } else if (order_ == "rotate") {
      std::rotate(v.begin(), v.begin() + s.rank % ranks_, v.end());
    } else {  // random: a seeded permutation per rank and step
      std::uint64_t state = splitmix64(seed_ ^ (std::uint64_t{s.step} << 20) ^ s.rank);
      for (std::size_t i = v.size(); i > 1; --i) {
        state = splitmix64(state);
        std::swap(v[i - 1], v[state % i]);
      }
    }
    return v;
  }

  std::uint32_t ranks_;
  SiteFilter site_;
  std::string order_;
  std::vector<std::vector<std::uint32_t>> explicit_;
  std::optional<std::uint32_t> algorithm_;
  bool forced_ = false;  // algorithm named, not implied by an order
  std::optional<graph::DType> acc_;
  std::uint64_t jitter_ps_ = 0;
};

}  // namespace

void register_collective_order_injector(InjectorRegistry& r) {
  auto ps = site_params("*", "all", "all");
  ps[0].doc = "collective op name glob (AllReduce/ReduceScatter/AllGather/Broadcast ops)";
  ps.push_back({"order", "arrival|reverse|rotate|random|explicit", "rotate",
                "per-rank reduction order of the direct algorithm: rotate starts at the rank itself, reverse flips odd "
                "ranks, random is a seeded permutation per rank and step, arrival keeps the timing model's order "
                "(the only one with algorithm ring or tree, and their default; also the default of a fault that "
                "gives only arrival_jitter_ps)"});
  ps.push_back({"orders", "list of permutations", "-", "order: explicit: one permutation of the ranks per rank"});
  ps.push_back({"algorithm", "keep|ring|tree|direct", "keep",
                "force an algorithm (keep: the task's, or direct when a reduction order is imposed); forced on every "
                "rank of the matched ops and steps, so that a collective's members agree, while order, accumulation "
                "and jitter apply to `rank` only"});
  ps.push_back({"accumulation", "keep|fp16|fp32", "keep", "accumulation dtype of the communication buffer"});
  ps.push_back({"arrival_jitter_ps", "int", "0", "maximum seeded extra delay per incoming transfer (0: none)"});
  ps.push_back(seed_param());
  r.add({"collective_order",
         "per-rank reduction order, arrival jitter, forced algorithm or FP16 accumulation in collectives",
         std::move(ps), [](const Params& p, const InjectionEnv& env) { return std::make_unique<CollectiveOrderInjector>(p, env); }});
}

}  // namespace probelab::inject
