// GEMM operand packing: FP16/BF16 storage -> exact FP32 register-tile panels (read through the
// Mode), with the classification of each logical row of A / column of B that tells gemm.cpp which
// output elements need the scalar path.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <memory>
#include <vector>

#include "numerics/detail/format.h"
#include "numerics/detail/gemm_internal.h"
#include "numerics/detail/simd.h"

namespace probelab::num::detail {

FloatBuffer aligned_floats(std::int64_t n) {
  const auto bytes = static_cast<std::size_t>((std::max<std::int64_t>(n, 1) * 4 + 63) / 64 * 64);
  return FloatBuffer(static_cast<float*>(std::aligned_alloc(64, bytes)));
}

namespace {

// Tame BF16 operands: non-zero magnitudes with unbiased exponents in [-56, 62]. All their products
// are exact FP32 multiples of 2^-126 below 2^126, so FP32 accumulation of them never produces a
// subnormal, never underflows, and overflows only to a sticky infinity (see gemm.cpp).
constexpr int kBf16TameLo = 127 - 56;
constexpr int kBf16TameHi = 127 + 62;

std::uint8_t classify(std::uint16_t b, InType type, const Mode& m, float& value) {
  const bool ftz = m.denormal == DenormalMode::FlushToZero;
  const float signed_zero = (b & 0x8000u) ? -0.0f : 0.0f;
  if (type == InType::F16) {
    if (is_nan_bits<F16>(b) || is_inf_bits<F16>(b)) {
      value = 0;
      return kClsSlow;
    }
    value = static_cast<float>(decode_finite<F16>(b));
    if (!is_sub_bits<F16>(b)) return 0;
    if (ftz) value = signed_zero;
    return kClsDenormalIn;
  }
  value = std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
  if (is_nan_bits<BF16>(b) || is_inf_bits<BF16>(b)) {
    value = 0;
    return kClsSlow;
  }
  if (is_sub_bits<BF16>(b)) {
    if (!ftz) return kClsDenormalIn | kClsSlow;
    value = signed_zero;
    return kClsDenormalIn;
  }
  const int e = (b >> 7) & 0xFF;
  if ((b & 0x7FFFu) != 0 && (e < kBf16TameLo || e > kBf16TameHi)) return kClsSlow;
  return 0;
}

// Lanes of 16 patterns that are not plain for the input type (classify() decides for them): FP16
// NaN/Inf/subnormal; BF16 non-zero with a biased exponent outside the tame range.
template <InType T>
bool needs_classify(__m256i h) {
  const __m256i mag = _mm256_and_si256(h, _mm256_set1_epi16(0x7FFF));
  const __m256i nonzero = _mm256_xor_si256(_mm256_cmpeq_epi16(mag, _mm256_setzero_si256()), _mm256_set1_epi16(-1));
  __m256i bad;
  if constexpr (T == InType::F16) {
    const __m256i e = _mm256_and_si256(h, _mm256_set1_epi16(0x7C00));
    bad = _mm256_or_si256(_mm256_cmpeq_epi16(e, _mm256_set1_epi16(0x7C00)),
                          _mm256_and_si256(_mm256_cmpeq_epi16(e, _mm256_setzero_si256()), nonzero));
  } else {
    const __m256i e = _mm256_srli_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x7F80)), 7);
    bad = _mm256_and_si256(nonzero, _mm256_or_si256(_mm256_cmpgt_epi16(_mm256_set1_epi16(kBf16TameLo), e),
                                                    _mm256_cmpgt_epi16(e, _mm256_set1_epi16(kBf16TameHi))));
  }
  return !_mm256_testz_si256(bad, bad);
}

template <InType T>
__m256 widen8(__m128i h) {
  if constexpr (T == InType::F16) return _mm256_cvtph_ps(h);
  else return bf16_to_ps(h);
}

struct Packer {
  const GemmOperand& op;
  const Mode& mode;
  std::int64_t rows, cols;  // logical
  bool is_a;                // classify per logical row (A) or column (B)
  Packed& out;

  void mark(std::int64_t r, std::int64_t c, std::uint8_t cls, std::uint16_t bits) {
    out.cls[static_cast<std::size_t>(is_a ? r : c)] |= cls;
    const bool nan = op.type == InType::F16 ? is_nan_bits<F16>(bits) : is_nan_bits<BF16>(bits);
    if (nan && (out.first_nan < 0 || r * cols + c < out.first_nan)) out.first_nan = r * cols + c;
  }

  // Converts storage row s (scols elements) into `v` (exact values), classifying as needed.
  void convert_row(std::int64_t s, std::int64_t scols, float* v) { convert_range(s, 0, scols, v); }

  // Elements [lo, hi) of storage row s into v[0 .. hi - lo).
  void convert_range(std::int64_t s, std::int64_t lo, std::int64_t hi, float* v) {
    if (op.type == InType::F16) convert_range_t<InType::F16>(s, lo, hi, v);
    else convert_range_t<InType::BF16>(s, lo, hi, v);
  }

  // Elements [a, b) of storage row s (at src) classified one by one into v[t - lo].
  template <InType T>
  void slow(const std::uint16_t* src, std::int64_t s, std::int64_t a, std::int64_t b, std::int64_t lo, float* v) {
    for (std::int64_t t = a; t < b; ++t) {
      const std::uint8_t cls = classify(src[t], T, mode, v[t - lo]);
      if (cls) mark(op.trans ? t : s, op.trans ? s : t, cls, src[t]);
    }
  }

  // Storage row s (scols elements, running across panels of 16) straight into the panels: its
  // elements [16p, 16p + 16) to dst + p * stride (32-byte aligned), a last partial panel's lanes
  // beyond scols zero.
  void convert_row_panels(std::int64_t s, std::int64_t scols, float* dst, std::int64_t stride) {
    if (op.type == InType::F16) convert_row_panels_t<InType::F16>(s, scols, dst, stride);
    else convert_row_panels_t<InType::BF16>(s, scols, dst, stride);
  }

  template <InType T>
  void convert_row_panels_t(std::int64_t s, std::int64_t scols, float* dst, std::int64_t stride) {
    const std::uint16_t* src = op.data + s * op.ld;
    std::int64_t j = 0;
    for (; j + 16 <= scols; j += 16, dst += stride) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + j));
      _mm256_store_ps(dst, widen8<T>(_mm256_castsi256_si128(h)));
      _mm256_store_ps(dst + 8, widen8<T>(_mm256_extracti128_si256(h, 1)));
      if (needs_classify<T>(h)) slow<T>(src, s, j, j + 16, j, dst);
    }
    if (j < scols) {
      alignas(32) float tail[16] = {};
      convert_range_t<T>(s, j, scols, tail);
      _mm256_store_ps(dst, _mm256_load_ps(tail));
      _mm256_store_ps(dst + 8, _mm256_load_ps(tail + 8));
    }
  }

  template <InType T>
  void convert_range_t(std::int64_t s, std::int64_t lo, std::int64_t hi, float* v) {
    const std::uint16_t* src = op.data + s * op.ld;
    auto slow = [&](std::int64_t a, std::int64_t b) { this->slow<T>(src, s, a, b, lo, v); };
    std::int64_t j = lo;
    for (; j + 16 <= hi; j += 16) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + j));
      _mm256_storeu_ps(v + (j - lo), widen8<T>(_mm256_castsi256_si128(h)));
      _mm256_storeu_ps(v + (j - lo) + 8, widen8<T>(_mm256_extracti128_si256(h, 1)));
      if (needs_classify<T>(h)) slow(j, j + 16);
    }
    if (j + 8 <= hi) {  // eight more (the upper lanes of the check are zeros: plain)
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + j));
      _mm256_storeu_ps(v + (j - lo), widen8<T>(h));
      if (needs_classify<T>(_mm256_zextsi128_si256(h))) slow(j, j + 8);
      j += 8;
    }
    slow(j, hi);
  }
};

// Storage rows that run along k (A not transposed, B transposed): storage row r is panel lane
// r % width of panel r / width; lanes beyond `count` are zero. A panel is filled a chunk of k at
// a time: its lanes' chunks converted into a cache-resident buffer (width x chunk floats), then
// written out in panel order, so every destination line is written once, in sequence.
constexpr std::int64_t kPackChunk = 256;
void pack_k_contiguous(Packer& pk, float* dst, std::int64_t K, std::int64_t width, std::int64_t panels,
                       std::int64_t count) {
  const std::int64_t chunk = std::min(K, kPackChunk);
  const std::unique_ptr<float[]> buf(new float[static_cast<std::size_t>(std::max<std::int64_t>(1, width * chunk))]);
  float* rows = buf.get();
  for (std::int64_t p = 0; p < panels; ++p) {
    float* panel = dst + p * K * width;
    for (std::int64_t k0 = 0; k0 < K; k0 += chunk) {
      const std::int64_t kc = std::min(chunk, K - k0);
      for (std::int64_t i = 0; i < width; ++i) {
        const std::int64_t r = p * width + i;
        if (r < count) pk.convert_range(r, k0, k0 + kc, rows + i * chunk);
        else std::fill_n(rows + i * chunk, kc, 0.0f);
      }
      float* d = panel + k0 * width;
      for (std::int64_t k = 0; k < kc; ++k)
        for (std::int64_t i = 0; i < width; ++i) d[k * width + i] = rows[i * chunk + k];
    }
  }
}

void ensure(FloatBuffer& storage, std::int64_t& capacity, std::int64_t n) {
  if (n > capacity) {
    storage = aligned_floats(n);
    capacity = n;
  }
}

}  // namespace

Packed pack_a(const GemmOperand& a, std::int64_t M, std::int64_t K, const Mode& mode, FloatBuffer& storage,
              std::int64_t& capacity) {
  const std::int64_t panels = (M + kPanelA - 1) / kPanelA;
  ensure(storage, capacity, panels * kPanelA * K);
  float* dst = storage.get();
  Packed out;
  out.data = dst;
  out.K = K;
  out.width = kPanelA;
  out.cls.assign(static_cast<std::size_t>(M), 0);
  Packer pk{a, mode, M, K, true, out};
  if (!a.trans) {
    pack_k_contiguous(pk, dst, K, kPanelA, panels, M);
  } else {
    std::vector<float> row(static_cast<std::size_t>(M));
    for (std::int64_t k = 0; k < K; ++k) {
      pk.convert_row(k, M, row.data());
      for (std::int64_t p = 0; p < panels; ++p) {
        float* d = dst + p * K * kPanelA + k * kPanelA;
        for (std::int64_t i = 0; i < kPanelA; ++i) {
          const std::int64_t m = p * kPanelA + i;
          d[i] = m < M ? row[static_cast<std::size_t>(m)] : 0.0f;
        }
      }
    }
  }
  return out;
}

Packed pack_b(const GemmOperand& b, std::int64_t K, std::int64_t N, const Mode& mode, FloatBuffer& storage,
              std::int64_t& capacity) {
  const std::int64_t panels = (N + kPanelB - 1) / kPanelB;
  ensure(storage, capacity, panels * kPanelB * K);
  float* dst = storage.get();
  Packed out;
  out.data = dst;
  out.K = K;
  out.width = kPanelB;
  out.cls.assign(static_cast<std::size_t>(N), 0);
  Packer pk{b, mode, K, N, false, out};
  if (!b.trans) {
    for (std::int64_t k = 0; k < K; ++k) pk.convert_row_panels(k, N, dst + k * kPanelB, K * kPanelB);
  } else {
    pack_k_contiguous(pk, dst, K, kPanelB, panels, N);
  }
  return out;
}

}  // namespace probelab::num::detail
