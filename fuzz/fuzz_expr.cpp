// The condition/rule expression language: text -> Expr, then what the runtime does with one
// (evaluation, the device predicate, copies).
#include "fuzz/fuzz_util.h"
#include "probes/expr.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace probelab;
  try {
    const probes::Expr e = probes::Expr::parse(fuzz::text(data, size));
    probes::EvalContext ctx;
    spec::CaptureStats s{};
    s.count = 16;
    s.max_abs = 65504;
    s.nan_count = 1;
    ctx.set_stats(s);
    ctx.set(probes::Var::Step, 3);
    (void)e.eval(ctx);
    (void)e.vars();
    if (const auto p = e.to_device_predicate()) (void)probes::predicate_holds(p->clauses, p->any, s);
    const probes::Expr copy = e;
    (void)copy.test(ctx);
  } catch (const probes::ExprError&) {
    // the only error a malformed expression may give
  }
  return 0;
}
