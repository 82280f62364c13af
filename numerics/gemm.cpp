// GEMM entry point (gemm.h): validation, operand conversion, kernel selection, per-element fix-ups
// and the flag report.
//
// Why the fast FP32-accumulation kernel needs no per-step flag logic: an element whose row of A and
// column of B are tame (finite; for BF16 also exponents in [-56, 62], see gemm_pack.cpp) has only
// finite, exactly representable products that are multiples of 2^-48 (FP16) or 2^-126 (BF16), so
// every partial sum is zero or a normal number: no Invalid, Underflow or DenormalOut can occur, and
// an overflow turns the accumulator into an infinity that no later finite product can change. So
// the element overflowed iff its final value is infinite. Every other element is recomputed by the
// scalar definition (element_scalar), which also yields its exact flags.
#include "numerics/gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "numerics/bulk.h"
#include "numerics/detail/bulk_internal.h"
#include "numerics/detail/gemm_internal.h"
#include "numerics/detail/simd.h"
#include "numerics/fp16.h"

namespace probelab::num {
namespace {

using detail::kClsDenormalIn;
using detail::kClsSlow;

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument("probelab::num::gemm: " + msg); }

void validate_args(std::int64_t M, std::int64_t N, std::int64_t K, const GemmOperand& a, const GemmOperand& b,
                   const GemmOutput& c, const GemmOptions& o) {
  validate(o.mode);
  if (M < 0 || N < 0 || K < 0) {
    bad("negative size M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K));
  }
  if (a.type != InType::F16 && a.type != InType::BF16) bad("A.type: invalid InType value " + std::to_string(int(a.type)));
  if (b.type != InType::F16 && b.type != InType::BF16) bad("B.type: invalid InType value " + std::to_string(int(b.type)));
  if (a.type != b.type) bad("A and B must have the same input type");
  if (c.type != OutType::F32 && c.type != OutType::F16 && c.type != OutType::BF16) {
    bad("C.type: invalid OutType value " + std::to_string(int(c.type)));
  }
  if (o.accum != Accum::Fp32 && o.accum != Accum::Fp16Rn && o.accum != Accum::Fp16ViaFp32) {
    bad("options.accum: invalid Accum value " + std::to_string(int(o.accum)));
  }
  if (o.split_k < 0) bad("options.split_k must be >= 0, got " + std::to_string(o.split_k));
  if (o.split_k > 0 && o.accum != Accum::Fp32) bad("options.split_k requires Accum::Fp32");
  auto check = [](const char* name, const void* data, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                  bool trans) {
    if (rows == 0 || cols == 0) return;
    if (data == nullptr) bad(std::string(name) + ".data is null for a " + std::to_string(rows) + "x" +
                             std::to_string(cols) + " operand");
    const std::int64_t need = trans ? rows : cols;
    if (ld < need) {
      bad(std::string(name) + ".ld = " + std::to_string(ld) + " is smaller than the stored row length " +
          std::to_string(need));
    }
  };
  check("A", a.data, M, K, a.ld, a.trans);
  check("B", b.data, K, N, b.ld, b.trans);
  check("C", c.data, M, N, c.ld, false);
}

// Keeps only the flags in `keep` of a report.
BulkReport masked(BulkReport r, Flags keep) {
  r.flags &= keep;
  for (int k = 0; k < kFlagCount; ++k) {
    if (!keep.has(static_cast<Flag>(k))) r.first[k] = -1;
  }
  return r;
}

std::int64_t first_set(const std::vector<std::uint8_t>& cls, std::uint8_t bit) {
  for (std::size_t i = 0; i < cls.size(); ++i) {
    if (cls[i] & bit) return static_cast<std::int64_t>(i);
  }
  return -1;
}

// Scratch memory reused between calls on the same thread (grow-only).
struct Workspace {
  detail::FloatBuffer a, b;
  std::int64_t cap_a = 0, cap_b = 0;
  std::vector<float> acc;
  std::vector<std::uint16_t> acc16;
};
Workspace& workspace() {
  thread_local Workspace w;
  return w;
}

struct Ctx {
  std::int64_t M, N, K;
  const GemmOperand& a;
  const GemmOperand& b;
  const GemmOptions& o;
  const detail::Packed& A;
  const detail::Packed& B;
  bool any_slow_col;
  BulkReport& acc;  // accumulation flags, index m*N + n
};

bool col_slow(const Ctx& x, std::int64_t n) { return (x.B.cls[static_cast<std::size_t>(n)] & kClsSlow) != 0; }
bool row_slow(const Ctx& x, std::int64_t m) { return (x.A.cls[static_cast<std::size_t>(m)] & kClsSlow) != 0; }

// True if the row holds a NaN, an infinity or a subnormal.
bool has_special(const float* row, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (detail::special32(_mm256_loadu_ps(row + i)) != 0) return true;
  }
  for (; i < n; ++i) {
    if (!std::isnormal(row[i]) && row[i] != 0.0f) return true;
  }
  return false;
}

// FP32 accumulation over k in [k0, k1) into acc (row stride ld), then the scalar fix-ups.
// Returns whether any accumulator is NaN, infinite or subnormal.
bool accumulate_f32(const Ctx& x, std::int64_t k0, std::int64_t k1, float* acc, std::int64_t ld) {
  const std::int64_t M = x.M, N = x.N;
  if (k1 > k0) {
    detail::gemm_f32_kernel(M, N, k0, k1, x.A, x.B, acc, ld);
  } else {
    for (std::int64_t m = 0; m < M; ++m) std::fill(acc + m * ld, acc + m * ld + N, 0.0f);
  }
  // Elements with NaN/Inf operands: by vector code for FP16 inputs, by the scalar definition else.
  const bool vector_special = x.a.type == InType::F16 && k1 > k0;
  if (vector_special) {
    std::vector<std::uint8_t> rows(static_cast<std::size_t>(M)), cols(static_cast<std::size_t>(N));
    bool any = false;
    for (std::int64_t m = 0; m < M; ++m) any |= (rows[static_cast<std::size_t>(m)] = row_slow(x, m));
    for (std::int64_t n = 0; n < N; ++n) any |= (cols[static_cast<std::size_t>(n)] = col_slow(x, n));
    if (any) detail::gemm_special(x.a, x.b, Accum::Fp32, x.o.mode, M, N, k0, k1, x.A, rows, cols, acc, ld, x.acc);
  }
  bool any_special = false;
  for (std::int64_t m = 0; m < M; ++m) {
    float* row = acc + m * ld;
    const bool rs = row_slow(x, m);
    if (!vector_special && (rs || x.any_slow_col)) {
      for (std::int64_t n = 0; n < N; ++n) {
        if (!rs && !col_slow(x, n)) continue;
        const detail::ElementResult r = detail::element_scalar(x.a, x.b, m, n, k0, k1, Accum::Fp32, x.o.mode);
        row[n] = std::bit_cast<float>(r.bits);
        if (r.flags.any()) x.acc.raise(r.flags, m * N + n);
      }
    }
    if (!has_special(row, N)) continue;
    any_special = true;
    if (rs) continue;
    for (std::int64_t n = 0; n < N; ++n) {  // tame elements: overflowed iff infinite
      if (!col_slow(x, n) && std::isinf(row[n])) x.acc.raise(Flags(Flag::Overflow), m * N + n);
    }
  }
  return any_special;
}

// Split-K with FP16 partial sums: S (FP16 patterns, M x N) = sum over chunks of RN16(chunk).
void accumulate_split_k(const Ctx& x, std::vector<std::uint16_t>& S) {
  const std::int64_t M = x.M, N = x.N, ks = x.o.split_k;
  const Flags keep = ~Flags(Flag::Inexact) & ~Flags(Flag::DenormalIn);
  S.assign(static_cast<std::size_t>(M * N), 0);
  std::vector<float> P(static_cast<std::size_t>(M * N));
  std::vector<f16> P16(static_cast<std::size_t>(N));
  for (std::int64_t k0 = 0; k0 < x.K; k0 += ks) {
    accumulate_f32(x, k0, std::min(x.K, k0 + ks), P.data(), N);
    for (std::int64_t m = 0; m < M; ++m) {
      const auto n = static_cast<std::size_t>(N);
      auto* srow = reinterpret_cast<f16*>(S.data() + m * N);
      x.acc.merge(masked(convert(std::span<const float>(P.data() + m * N, n), std::span<f16>(P16), x.o.mode), keep),
                  m * N);
      const BulkReport r = elementwise(BinaryOp::Add, std::span<const f16>(srow, n), std::span<const f16>(P16),
                                       std::span<f16>(srow, n), x.o.mode);
      x.acc.merge(masked(r, keep), m * N);
    }
  }
}

// FP16 accumulation into S (FP16 patterns, M x N).
void accumulate_f16(const Ctx& x, std::vector<std::uint16_t>& S) {
  const std::int64_t M = x.M, N = x.N;
  S.assign(static_cast<std::size_t>(M * N), 0);
  if (x.K == 0) return;
  std::vector<std::uint8_t> flags;
  const bool vector = x.a.type == InType::F16;
  if (!vector) {
    for (std::int64_t m = 0; m < M; ++m) {
      for (std::int64_t n = 0; n < N; ++n) {
        const detail::ElementResult r = detail::element_scalar(x.a, x.b, m, n, 0, x.K, x.o.accum, x.o.mode);
        S[static_cast<std::size_t>(m * N + n)] = static_cast<std::uint16_t>(r.bits);
        if (r.flags.any()) x.acc.raise(r.flags, m * N + n);
      }
    }
    return;
  }
  detail::gemm_f16acc_kernel(M, N, x.A, x.B, x.o.accum, x.o.mode, S.data(), flags);
  std::vector<std::uint8_t> rows(static_cast<std::size_t>(M)), cols(static_cast<std::size_t>(N));
  bool any = false;
  for (std::int64_t m = 0; m < M; ++m) any |= (rows[static_cast<std::size_t>(m)] = row_slow(x, m));
  for (std::int64_t n = 0; n < N; ++n) any |= (cols[static_cast<std::size_t>(n)] = col_slow(x, n));
  if (any) {  // elements with NaN/Inf operands (the kernel's values there are meaningless)
    std::vector<float> v(static_cast<std::size_t>(M * N));
    detail::gemm_special(x.a, x.b, x.o.accum, x.o.mode, M, N, 0, x.K, x.A, rows, cols, v.data(), N, x.acc);
    for (std::int64_t m = 0; m < M; ++m) {
      for (std::int64_t n = 0; n < N; ++n) {
        const auto i = static_cast<std::size_t>(m * N + n);
        if (!rows[static_cast<std::size_t>(m)] && !cols[static_cast<std::size_t>(n)]) continue;
        flags[i] = 0;
        S[i] = to_f16(v[i]).value.bits;  // exact: an FP16 number (or the default NaN)
      }
    }
  }
  for (std::int64_t m = 0; m < M; ++m) {  // the kernel's elements
    const std::uint8_t* f = flags.data() + m * N;
    for (const std::uint8_t* p = f; (p = std::find_if(p, f + N, [](std::uint8_t b) { return b != 0; })) != f + N; ++p) {
      x.acc.raise(Flags(*p), m * N + (p - f));
    }
  }
}

// Writes FP32 accumulators (row stride ld; may be C itself) to C through the Mode.
void write_f32(std::int64_t M, std::int64_t N, float* acc, std::int64_t ld, const GemmOutput& c, const Mode& mode,
               BulkReport& out) {
  const auto n = static_cast<std::size_t>(N);
  for (std::int64_t m = 0; m < M; ++m) {
    float* row = acc + m * ld;
    if (c.type == OutType::F32) {
      out.merge(detail::deliver_inplace(std::span<float>(row, n), mode), m * N);
    } else if (c.type == OutType::F16) {
      auto* dst = static_cast<f16*>(c.data) + m * c.ld;
      out.merge(convert(std::span<const float>(row, n), std::span<f16>(dst, n), mode), m * N);
    } else {
      auto* dst = static_cast<bf16*>(c.data) + m * c.ld;
      out.merge(convert(std::span<const float>(row, n), std::span<bf16>(dst, n), mode), m * N);
    }
  }
}

// Writes FP16-valued results to C (exact for F32/F16 outputs, rounded through the Mode for BF16).
void write_f16(std::int64_t M, std::int64_t N, const std::vector<std::uint16_t>& S, const GemmOutput& c,
               const Mode& mode, BulkReport& out) {
  const auto n = static_cast<std::size_t>(N);
  std::vector<float> tmp(n);
  for (std::int64_t m = 0; m < M; ++m) {
    const auto* src = reinterpret_cast<const f16*>(S.data() + m * N);
    if (c.type == OutType::F16) {
      std::copy(src, src + N, static_cast<f16*>(c.data) + m * c.ld);
      continue;
    }
    float* dst = c.type == OutType::F32 ? static_cast<float*>(c.data) + m * c.ld : tmp.data();
    (void)convert(std::span<const f16>(src, n), std::span<float>(dst, n), Mode{});  // exact widening
    if (c.type == OutType::BF16) {
      auto* out_row = static_cast<bf16*>(c.data) + m * c.ld;
      out.merge(convert(std::span<const float>(tmp), std::span<bf16>(out_row, n), mode), m * N);
    }
  }
}

template <class T>
void scan_output(std::int64_t M, std::int64_t N, const GemmOutput& c, GemmReport& rep) {
  for (std::int64_t m = 0; m < M && (rep.first_nan_out < 0 || rep.first_inf_out < 0); ++m) {
    const ScanReport s = scan(std::span<const T>(static_cast<const T*>(c.data) + m * c.ld, static_cast<std::size_t>(N)));
    if (rep.first_nan_out < 0 && s.first_nan >= 0) rep.first_nan_out = m * N + s.first_nan;
    if (rep.first_inf_out < 0 && s.first_inf >= 0) rep.first_inf_out = m * N + s.first_inf;
  }
}

// The kernels assume the default MXCSR (round to nearest, no flush to zero, no DAZ); a caller's
// setting is put aside for the call and restored.
class DefaultMxcsr {
 public:
  DefaultMxcsr() : saved_(_mm_getcsr()) {
    if ((saved_ & ~0x3Fu) != 0x1F80u) _mm_setcsr(0x1F80u | (saved_ & 0x3Fu));
  }
  ~DefaultMxcsr() { _mm_setcsr(saved_ | (_mm_getcsr() & 0x3Fu)); }
  DefaultMxcsr(const DefaultMxcsr&) = delete;
  DefaultMxcsr& operator=(const DefaultMxcsr&) = delete;

 private:
  unsigned saved_;
};

}  // namespace

GemmReport gemm(std::int64_t M, std::int64_t N, std::int64_t K, const GemmOperand& a, const GemmOperand& b,
                const GemmOutput& c, const GemmOptions& o) {
  validate_args(M, N, K, a, b, c, o);
  GemmReport rep;
  if (M == 0 || N == 0) return rep;
  const DefaultMxcsr mxcsr;
  Workspace& ws = workspace();
  const detail::Packed A = detail::pack_a(a, M, K, o.mode, ws.a, ws.cap_a);
  detail::Packed fresh;
  const detail::Packed& B = detail::packed_b(b, K, N, o.mode, ws.b, ws.cap_b, fresh);
  rep.first_nan_a = A.first_nan;
  rep.first_nan_b = B.first_nan;

  BulkReport acc;
  const std::int64_t row_den = first_set(A.cls, kClsDenormalIn);
  const std::int64_t col_den = first_set(B.cls, kClsDenormalIn);
  if (row_den >= 0 || col_den >= 0) {
    const std::int64_t idx = row_den < 0 ? col_den : (col_den < 0 ? row_den * N : std::min(row_den * N, col_den));
    acc.raise(Flags(Flag::DenormalIn), idx);
  }
  const Ctx ctx{M, N, K, a, b, o, A, B, first_set(B.cls, kClsSlow) >= 0, acc};
  BulkReport out;
  bool may_have_specials = true;
  if (o.accum == Accum::Fp32 && o.split_k == 0) {
    float* dst = nullptr;
    std::int64_t ld = N;
    if (c.type == OutType::F32) {
      dst = static_cast<float*>(c.data);
      ld = c.ld;
    } else {
      ws.acc.resize(static_cast<std::size_t>(M * N));
      dst = ws.acc.data();
    }
    may_have_specials = accumulate_f32(ctx, 0, K, dst, ld);
    write_f32(M, N, dst, ld, c, o.mode, out);
    may_have_specials = may_have_specials || out.flags.has(Flag::Overflow);
  } else {
    if (o.split_k > 0) accumulate_split_k(ctx, ws.acc16);
    else accumulate_f16(ctx, ws.acc16);
    write_f16(M, N, ws.acc16, c, o.mode, out);
  }
  acc.merge(out);
  rep.flags = acc.flags;
  rep.first = acc.first;
  if (!may_have_specials) return rep;  // no NaN or infinity can have been delivered
  if (c.type == OutType::F32) scan_output<float>(M, N, c, rep);
  else if (c.type == OutType::F16) scan_output<f16>(M, N, c, rep);
  else scan_output<bf16>(M, N, c, rep);
  return rep;
}

GemmReport gemm(std::int64_t M, std::int64_t N, std::int64_t K, const f16* a, const f16* b, float* c,
                const GemmOptions& options) {
  return gemm(M, N, K, GemmOperand{reinterpret_cast<const std::uint16_t*>(a), InType::F16, K, false},
              GemmOperand{reinterpret_cast<const std::uint16_t*>(b), InType::F16, N, false},
              GemmOutput{c, OutType::F32, N}, options);
}

GemmReport gemm(std::int64_t M, std::int64_t N, std::int64_t K, const f16* a, const f16* b, f16* c,
                const GemmOptions& options) {
  return gemm(M, N, K, GemmOperand{reinterpret_cast<const std::uint16_t*>(a), InType::F16, K, false},
              GemmOperand{reinterpret_cast<const std::uint16_t*>(b), InType::F16, N, false},
              GemmOutput{c, OutType::F16, N}, options);
}

}  // namespace probelab::num
