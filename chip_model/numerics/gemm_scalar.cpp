// GEMM operand conversion/classification and the scalar definition of one output element
// (gemm.h documents the semantics; the fast kernels must agree with element_scalar bit for bit).
#include <immintrin.h>

#include <algorithm>
#include <bit>

#include "chip_model/numerics/detail/gemm_internal.h"
#include "chip_model/numerics/detail/ops.h"
#include "chip_model/numerics/detail/simd.h"

namespace probelab::num::detail {
namespace {

// Tame BF16 operands: non-zero magnitudes with unbiased exponents in [-56, 62]. All their products
// are exact FP32 multiples of 2^-126 below 2^126, so FP32 accumulation of them never produces a
// subnormal, never underflows, and overflows only to a sticky infinity (see gemm.cpp).
constexpr int kBf16TameLo = 127 - 56;
constexpr int kBf16TameHi = 127 + 62;

std::uint8_t classify(std::uint16_t b, InType type, const Mode& m, float& value) {
  if (type == InType::F16) {
    if (is_nan_bits<F16>(b) || is_inf_bits<F16>(b)) {
      value = 0;
      return kClsSlow;
    }
    if (is_sub_bits<F16>(b)) {
      value = m.denormal == DenormalMode::FlushToZero ? ((b & 0x8000u) ? -0.0f : 0.0f)
                                                      : static_cast<float>(decode_finite<F16>(b));
      return kClsDenormalIn;
    }
    value = static_cast<float>(decode_finite<F16>(b));
    return 0;
  }
  value = std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
  if (is_nan_bits<BF16>(b) || is_inf_bits<BF16>(b)) {
    value = 0;
    return kClsSlow;
  }
  if (is_sub_bits<BF16>(b)) {
    if (m.denormal == DenormalMode::FlushToZero) {
      value = (b & 0x8000u) ? -0.0f : 0.0f;
      return kClsDenormalIn;
    }
    return kClsDenormalIn | kClsSlow;
  }
  const int e = (b >> 7) & 0xFF;
  if ((b & 0x7FFFu) != 0 && (e < kBf16TameLo || e > kBf16TameHi)) return kClsSlow;
  return 0;
}

// Lanes of 8 patterns that are not plain for the given input type (need classify()).
int needs_classify(__m128i h, InType type) {
  if (type == InType::F16) return special16(h, 0x7C00);
  const __m128i e = _mm_srli_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7F80)), 7);
  const __m128i bad = _mm_or_si128(_mm_cmpgt_epi16(_mm_set1_epi16(kBf16TameLo), e),
                                   _mm_cmpgt_epi16(e, _mm_set1_epi16(kBf16TameHi)));
  const __m128i zero = _mm_cmpeq_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7FFF)), _mm_setzero_si128());
  return _mm_movemask_epi8(_mm_andnot_si128(zero, bad));
}

__m256 widen8(__m128i h, InType type) { return type == InType::F16 ? _mm256_cvtph_ps(h) : bf16_to_ps(h); }

}  // namespace

Operand32 convert_operand(const GemmOperand& op, std::int64_t rows, std::int64_t cols, const Mode& mode) {
  Operand32 out;
  out.data.resize(static_cast<std::size_t>(rows * cols));
  out.row_cls.assign(static_cast<std::size_t>(rows), 0);
  out.col_cls.assign(static_cast<std::size_t>(cols), 0);
  // Storage rows: logical rows (not transposed) or logical columns (transposed).
  const std::int64_t srows = op.trans ? cols : rows;
  const std::int64_t scols = op.trans ? rows : cols;
  std::vector<float> tmp(op.trans ? static_cast<std::size_t>(scols) : 0);
  for (std::int64_t s = 0; s < srows; ++s) {
    const std::uint16_t* src = op.data + s * op.ld;
    float* dst = op.trans ? tmp.data() : out.data.data() + s * cols;
    auto mark = [&](std::int64_t j, std::uint8_t cls, std::uint16_t bits) {
      const std::int64_t r = op.trans ? j : s;
      const std::int64_t c = op.trans ? s : j;
      out.row_cls[static_cast<std::size_t>(r)] |= cls;
      out.col_cls[static_cast<std::size_t>(c)] |= cls;
      const bool nan = op.type == InType::F16 ? is_nan_bits<F16>(bits) : is_nan_bits<BF16>(bits);
      if (nan && (out.first_nan < 0 || r * cols + c < out.first_nan)) out.first_nan = r * cols + c;
    };
    std::int64_t j = 0;
    for (; j + 8 <= scols; j += 8) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + j));
      if (needs_classify(h, op.type) == 0) {
        _mm256_storeu_ps(dst + j, widen8(h, op.type));
        continue;
      }
      for (std::int64_t t = j; t < j + 8; ++t) {
        const std::uint8_t cls = classify(src[t], op.type, mode, dst[t]);
        if (cls) mark(t, cls, src[t]);
      }
    }
    for (; j < scols; ++j) {
      const std::uint8_t cls = classify(src[j], op.type, mode, dst[j]);
      if (cls) mark(j, cls, src[j]);
    }
    if (op.trans) {
      for (std::int64_t t = 0; t < scols; ++t) out.data[static_cast<std::size_t>(t * cols + s)] = tmp[static_cast<std::size_t>(t)];
    }
  }
  return out;
}

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
