// `fp16_accumulation`: make chosen Cube ops accumulate in FP16 instead of FP32 (either named
// rounding variant), round split-K partial sums to FP16, and/or scale the inputs as a bad loss
// scale would — so that real FP16 accumulators overflow, or small addends are swamped.
#include <fmt/format.h>

#include "injectors/injector.h"
#include "injectors/site.h"

namespace probelab::inject {
namespace {

std::string mode_str(const chip::AccumulationMode& m) {
  std::string s = fmt::format("acc={}", graph::dtype_name(m.acc_dtype));
  if (m.acc_dtype == graph::DType::F16) s += m.f16_double_rounding ? " (fp32 add then round)" : " (RN16 each step)";
  if (m.split_k_chunk) s += fmt::format(" split_k={} partial={}", m.split_k_chunk, graph::dtype_name(m.partial_dtype));
  if (m.input_scale != 1.0) s += fmt::format(" input_scale={}", m.input_scale);
  return s;
}

class AccumulationInjector final : public Injector {
 public:
  AccumulationInjector(const Params& p, const InjectionEnv& env) {
    graph_ = env.executed;
    seed_ = read_seed(p, env);
    site_ = read_site(p, env.executed, env.ranks, env.steps);
    const auto acc = p.choice("accumulator", {"fp16", "fp32"});
    mode_.acc_dtype = acc == "fp16" ? graph::DType::F16 : graph::DType::F32;
    mode_.f16_double_rounding = p.choice("rounding", {"rn16", "fp32_then_round"}) == "fp32_then_round";
    mode_.split_k_chunk = static_cast<std::uint32_t>(p.uinteger("split_k"));
    const auto partial = p.choice("partial_dtype", {"fp16", "bf16", "fp32"});
    mode_.partial_dtype = partial == "fp16" ? graph::DType::F16 : partial == "bf16" ? graph::DType::BF16 : graph::DType::F32;
    mode_.input_scale = p.number("input_scale");
    if (!(mode_.input_scale > 0)) p.fail("input_scale", "must be a positive number");
    if (mode_.acc_dtype == graph::DType::F32 && mode_.split_k_chunk == 0 && mode_.input_scale == 1.0)
      p.fail("accumulator", "with fp32 accumulation, no split_k and input_scale 1 the injection changes nothing");
  }

  std::uint32_t sites() const override { return chip::kFaultGemmAccumulation; }

  void on_gemm_accumulation(const chip::FaultSite& s, chip::AccumulationMode& m) override {
    if (!site_.matches(s)) return;
    const auto before = mode_str(m);
    m.acc_dtype = mode_.acc_dtype;
    m.f16_double_rounding = mode_.f16_double_rounding;
    if (mode_.split_k_chunk) {
      m.split_k_chunk = mode_.split_k_chunk;
      m.partial_dtype = mode_.partial_dtype;
    }
    m.input_scale *= mode_.input_scale;
    record({s, op_name(s.op_id), "cube accumulation", before, mode_str(m)});
  }

 private:
  SiteFilter site_;
  chip::AccumulationMode mode_;
};

}  // namespace

void register_accumulation_injector(InjectorRegistry& r) {
  auto ps = site_params("", "all", "all");
  ps.push_back({"accumulator", "fp16|fp32", "fp16", "accumulator dtype of the Cube GEMM"});
  ps.push_back({"rounding", "rn16|fp32_then_round", "rn16",
                "FP16 accumulation variant: correctly rounded RN16(acc + a*b) each step, or FP32 add then round"});
  ps.push_back({"split_k", "int", "0", "K chunk size whose partial sums are rounded to partial_dtype (0: off)"});
  ps.push_back({"partial_dtype", "fp16|bf16|fp32", "fp16", "dtype split-K partial sums are rounded to"});
  ps.push_back({"input_scale", "number", "1", "factor applied to the GEMM inputs (a bad loss scale)"});
  ps.push_back(seed_param());
  r.add({"fp16_accumulation",
         "accumulate chosen MatMul/Conv ops in FP16, round split-K partials, or scale inputs so FP16 overflows or swamps",
         std::move(ps), [](const Params& p, const InjectionEnv& env) { return std::make_unique<AccumulationInjector>(p, env); }});
}

}  // namespace probelab::inject
