// The scalar definition of one GEMM output element (gemm.h documents the semantics; the fast
// kernels must agree with element_scalar bit for bit).

#include "numerics/detail/gemm_internal.h"
#include "numerics/detail/ops.h"

namespace probelab::num::detail {
namespace {

std::uint16_t at(const GemmOperand& op, std::int64_t r, std::int64_t c) {
  return op.trans ? op.data[c * op.ld + r] : op.data[r * op.ld + c];
}

Operand read_in(std::uint16_t bits, InType type, const Mode& m, std::uint8_t& fl) {
  return type == InType::F16 ? read<F16>(bits, m, fl) : read<BF16>(bits, m, fl);
}

constexpr std::uint8_t kAccMask = static_cast<std::uint8_t>(~(fbit(Flag::Inexact) | fbit(Flag::DenormalIn)));

}  // namespace

ElementResult element_scalar(const GemmOperand& a, const GemmOperand& b, std::int64_t m, std::int64_t n,
                             std::int64_t k0, std::int64_t k1, Accum accum, const Mode& mode) {
  constexpr Mode kIeee{};
  std::uint32_t acc = 0;  // +0 in the accumulator format
  std::uint8_t fl = 0;
  for (std::int64_t k = k0; k < k1; ++k) {
    std::uint8_t in_fl = 0;
    const Operand x = read_in(at(a, m, k), a.type, mode, in_fl);
    const Operand y = read_in(at(b, k, n), b.type, mode, in_fl);
    fl |= in_fl & fbit(Flag::Invalid);
    // A NaN accumulator stays the default NaN whatever follows (fma_core and the FP16 rounding
    // return F::default_nan for a NaN operand); only Invalid (0 * Inf, a signaling NaN input) can
    // still be raised. Once it is, nothing more can change: stop.
    const bool acc_nan = accum == Accum::Fp32 ? is_nan_bits<F32>(acc) : is_nan_bits<F16>(static_cast<std::uint16_t>(acc));
    if (acc_nan) {
      if ((x.inf && !y.nan && y.v == 0) || (y.inf && !x.nan && x.v == 0)) fl |= fbit(Flag::Invalid);
      if (fl & fbit(Flag::Invalid)) break;
      continue;
    }
    std::uint8_t ignored = 0;
    if (accum == Accum::Fp32) {
      const Operand c = read<F32>(acc, kIeee, ignored);
      const Rounded<F32> r = fma_core<F32>(x, y, c, 0, kIeee);
      acc = r.bits;
      fl |= r.flags.bits & kAccMask;
    } else if (accum == Accum::Fp16Rn) {
      const Operand c = read<F16>(acc, mode, ignored);
      const Rounded<F16> r = fma_core<F16>(x, y, c, 0, mode);
      acc = r.bits;
      fl |= r.flags.bits & kAccMask;
    } else {
      const Operand c = read<F16>(acc, mode, ignored);
      const Rounded<F32> t = fma_core<F32>(x, y, c, 0, kIeee);
      // The FP32 sum is an internal value: rounded to FP16 through the Mode, never flushed as input.
      const Operand tv = read<F32>(t.bits, kIeee, ignored);
      const Rounded<F16> r = tv.nan ? nan_out<F16>(0, mode) : finish<F16>(tv.v, 0, mode);
      acc = r.bits;
      fl |= (t.flags.bits | r.flags.bits) & kAccMask;
    }
  }
  return {acc, Flags(fl)};
}

}  // namespace probelab::num::detail
