// Bulk paths are bit-identical to the scalar paths: values, flag unions and first indices.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "numerics/arith.h"
#include "numerics/bf16.h"
#include "numerics/bulk.h"
#include "numerics/fp16.h"
#include "tests/numerics/common.h"

namespace probelab::num {
namespace {

using testing::kModes;
using testing::mode_name;

// Accumulates the scalar results into the report a bulk call must produce.
struct Expect {
  BulkReport rep;
  void add(Flags f, std::size_t i) {
    if (f.any()) rep.raise(f, static_cast<std::int64_t>(i));
  }
};

void expect_same(const BulkReport& got, const BulkReport& want, const std::string& what) {
  EXPECT_EQ(got.flags, want.flags) << what << ": " << to_string(got.flags) << " vs " << to_string(want.flags);
  for (Flag f : kAllFlags) EXPECT_EQ(got.first_index(f), want.first_index(f)) << what << " " << flag_name(f);
}

// Mostly plain FP32 values in the FP16 range (vector path) with rare specials, so that both the
// vector blocks and the scalar fallback run.
std::vector<float> mixed_f32(std::size_t n, std::uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) {
    x = u(rng) * scale;
    const auto r = rng() % 1000;
    if (r == 0) x = NAN;
    else if (r == 1) x = -INFINITY;
    else if (r == 2) x = 1e-6f;     // FP16 subnormal result
    else if (r == 3) x = 7e4f;      // FP16 overflow
    else if (r == 4) x = 1e-40f;    // FP32 subnormal
    else if (r == 5) x = std::bit_cast<float>(0x7F800001u);  // signaling NaN
    else if (r == 6) x = 0.0f;
    else if (r == 7) x = 3e38f;     // BF16 overflow after rounding
  }
  return v;
}

template <class T>
std::vector<T> to16(const std::vector<float>& v) {
  std::vector<T> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_same_v<T, f16>) out[i] = to_f16(v[i]).value;
    else out[i] = to_bf16(v[i]).value;
  }
  return out;
}

// x to FP16 and BF16 and back, against the scalar conversions.
void convert_case(const std::vector<float>& x, const Mode& m) {
      const std::size_t n = x.size();
      std::vector<f16> h(n);
      std::vector<bf16> b(n);
      const BulkReport rh = convert(x, std::span<f16>(h), m);
      const BulkReport rb = convert(x, std::span<bf16>(b), m);
      Expect eh, eb;
      for (std::size_t i = 0; i < n; ++i) {
        const Result<f16> sh = to_f16(x[i], m);
        const Result<bf16> sb = to_bf16(x[i], m);
        ASSERT_EQ(h[i].bits, sh.value.bits) << i << " " << x[i] << " " << mode_name(m);
        ASSERT_EQ(b[i].bits, sb.value.bits) << i << " " << x[i] << " " << mode_name(m);
        eh.add(sh.flags, i);
        eb.add(sb.flags, i);
      }
      expect_same(rh, eh.rep, "f32->f16 " + mode_name(m));
      expect_same(rb, eb.rep, "f32->bf16 " + mode_name(m));
      // and back
      std::vector<float> wh(n), wb(n);
      const BulkReport rwh = convert(std::span<const f16>(h), std::span<float>(wh), m);
      const BulkReport rwb = convert(std::span<const bf16>(b), std::span<float>(wb), m);
      Expect ewh, ewb;
      for (std::size_t i = 0; i < n; ++i) {
        const Result<float> sh = to_f32(h[i], m);
        const Result<float> sb = to_f32(b[i], m);
        ASSERT_EQ(std::bit_cast<std::uint32_t>(wh[i]), std::bit_cast<std::uint32_t>(sh.value)) << i;
        ASSERT_EQ(std::bit_cast<std::uint32_t>(wb[i]), std::bit_cast<std::uint32_t>(sb.value)) << i;
        ewh.add(sh.flags, i);
        ewb.add(sb.flags, i);
      }
      expect_same(rwh, ewh.rep, "f16->f32 " + mode_name(m));
      expect_same(rwb, ewb.rep, "bf16->f32 " + mode_name(m));
}

TEST(Bulk, ConvertMatchesScalar) {
  for (const Mode& m : kModes) {
    for (std::size_t n : {std::size_t{0}, std::size_t{7}, std::size_t{8}, std::size_t{1001}, std::size_t{65541}}) {
      convert_case(mixed_f32(n, n + 3, n % 2 ? 1000.0f : 1e-3f), m);
    }
  }
}

// Every tail length (converted in a padded block), plain and with a special value in the tail.
TEST(Bulk, ConvertTailsMatchScalar) {
  const std::vector<float> specials = {NAN, -INFINITY, 1e-6f, 7e4f, 1e-40f, std::bit_cast<float>(0x7F800001u), 3e38f};
  for (const Mode& m : kModes) {
    for (std::size_t n = 1; n <= 17; ++n) {
      for (std::size_t s = 0; s <= specials.size(); ++s) {
        std::vector<float> x(n);
        for (std::size_t i = 0; i < n; ++i) x[i] = (static_cast<float>(i) - 7.3f) * 0.37f;
        if (s < specials.size()) x[n - 1 - (n - 1) % 5] = specials[s];
        SCOPED_TRACE("n=" + std::to_string(n) + " special=" + std::to_string(s));
        convert_case(x, m);
      }
    }
  }
}

template <class T>
Result<T> scalar(BinaryOp op, T a, T b, const Mode& m) {
  switch (op) {
    case BinaryOp::Add: return add(a, b, m);
    case BinaryOp::Sub: return sub(a, b, m);
    case BinaryOp::Mul: return mul(a, b, m);
    case BinaryOp::Div: return div(a, b, m);
    case BinaryOp::Min: return min(a, b, m);
    default: return max(a, b, m);
  }
}
template <class T>
std::uint32_t bits(T x) {
  if constexpr (std::is_same_v<T, float>) return std::bit_cast<std::uint32_t>(x);
  else return x.bits;
}

template <class T>
void elementwise_case(const std::vector<T>& a, const std::vector<T>& b, const Mode& m, const std::string& what) {
  for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Min, BinaryOp::Max}) {
    std::vector<T> out(a.size());
    const BulkReport rep = elementwise(op, std::span<const T>(a), std::span<const T>(b), std::span<T>(out), m);
    Expect e;
    for (std::size_t i = 0; i < a.size(); ++i) {
      const Result<T> s = scalar(op, a[i], b[i], m);
      ASSERT_EQ(bits(out[i]), bits(s.value)) << what << " " << to_string(op) << " at " << i << " " << mode_name(m);
      e.add(s.flags, i);
    }
    expect_same(rep, e.rep, what + " " + to_string(op) + " " + mode_name(m));
  }
}

// Blocks full of specials (the vector conversion of every case): every FP16 pattern to FP32, and
// FP32 values around every FP16 boundary (NaNs with payloads, infinities, overflow, subnormal
// inputs and results, midpoints) to FP16, against the scalar conversion in every Mode.
TEST(Bulk, ConvertDenseSpecialsMatchesScalar) {
  std::vector<f16> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i].bits = static_cast<std::uint16_t>(i);
  std::vector<float> x;
  for (std::uint32_t b : {0x7F800000u, 0x7F800001u, 0x7FC00000u, 0x7FBFFFFFu, 0x7FA00000u, 0x00000001u, 0x007FFFFFu,
                          0x00400000u, 0x477FF000u, 0x477FEFFFu, 0x477FE000u, 0x47800000u, 0x7F7FFFFFu, 0x38800000u,
                          0x387FF000u, 0x387FEFFFu, 0x33800000u, 0x33000000u, 0x33000001u, 0x32FFFFFFu, 0x3F801000u,
                          0x3F803000u, 0x00000000u}) {
    for (std::uint32_t s : {0u, 0x80000000u}) x.push_back(std::bit_cast<float>(b | s));
  }
  std::mt19937_64 rng(5);
  while (x.size() % 8 != 0 || x.size() < 4096) {  // subnormal FP16 results and near-overflow values
    const std::uint32_t e = static_cast<std::uint32_t>(rng() % 32) + 97;
    x.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(((rng() & 1) << 31) | (e << 23) | (rng() & 0x7FFFFF))));
  }
  for (const Mode& m : kModes) {
    std::vector<float> w(all.size());
    const BulkReport rw = convert(std::span<const f16>(all), std::span<float>(w), m);
    Expect ew;
    for (std::size_t i = 0; i < all.size(); ++i) {
      const Result<float> r = to_f32(all[i], m);
      ASSERT_EQ(std::bit_cast<std::uint32_t>(w[i]), std::bit_cast<std::uint32_t>(r.value)) << std::hex << i << " " << mode_name(m);
      ew.add(r.flags, i);
    }
    expect_same(rw, ew.rep, "dense f16->f32 " + mode_name(m));
    std::vector<f16> h(x.size());
    const BulkReport rh = convert(std::span<const float>(x), std::span<f16>(h), m);
    Expect eh;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const Result<f16> r = to_f16(x[i], m);
      ASSERT_EQ(h[i].bits, r.value.bits) << std::hex << std::bit_cast<std::uint32_t>(x[i]) << " " << mode_name(m);
      eh.add(r.flags, i);
    }
    expect_same(rh, eh.rep, "dense f32->f16 " + mode_name(m));
  }
}

TEST(Bulk, ElementwiseMatchesScalar) {
  const std::size_t n = 20'003;
  for (const Mode& m : kModes) {
    for (float scale : {1.0f, 300.0f, 1e-4f}) {
      const std::vector<float> x = mixed_f32(n, 11, scale);
      std::vector<float> y = mixed_f32(n, 12, scale);
      for (std::size_t i = 0; i < n; i += 97) y[i] = -x[i];  // exact cancellations
      elementwise_case(to16<f16>(x), to16<f16>(y), m, "f16");
      elementwise_case(to16<bf16>(x), to16<bf16>(y), m, "bf16");
      elementwise_case(x, y, m, "f32");
    }
  }
}

// Normal-only 16-bit patterns over the whole exponent range: many blocks are plain, others have
// results at the overflow/underflow boundaries.
TEST(Bulk, ElementwiseNormalPatterns) {
  std::mt19937_64 rng(77);
  for (const int ebits : {5, 8}) {
    const int fbits = 15 - ebits;
    const std::uint32_t emax = (1u << ebits) - 2;
    auto gen = [&](std::size_t n, std::uint32_t elo, std::uint32_t ehi) {
      std::vector<std::uint16_t> v(n);
      for (auto& x : v) {
        const auto u = rng();
        const std::uint32_t e = elo + static_cast<std::uint32_t>(u % (ehi - elo + 1));
        x = static_cast<std::uint16_t>(((u >> 20) & 0x8000u) | (e << fbits) | ((u >> 32) & ((1u << fbits) - 1)));
      }
      return v;
    };
    for (const auto& range : {std::pair<std::uint32_t, std::uint32_t>{1, emax}, {1, 4}, {emax - 3, emax}}) {
      const auto a = gen(4096, range.first, range.second);
      const auto b = gen(4096, range.first, range.second);
      for (const Mode& m : kModes) {
        if (ebits == 5) {
          std::vector<f16> x(a.size()), y(b.size());
          for (std::size_t i = 0; i < a.size(); ++i) { x[i].bits = a[i]; y[i].bits = b[i]; }
          elementwise_case(x, y, m, "f16 normals");
        } else {
          std::vector<bf16> x(a.size()), y(b.size());
          for (std::size_t i = 0; i < a.size(); ++i) { x[i].bits = a[i]; y[i].bits = b[i]; }
          elementwise_case(x, y, m, "bf16 normals");
          std::vector<float> fx(a.size()), fy(b.size());
          for (std::size_t i = 0; i < a.size(); ++i) {
            fx[i] = std::bit_cast<float>((static_cast<std::uint32_t>(a[i]) << 16) | static_cast<std::uint32_t>(rng() & 0xFFFF));
            fy[i] = std::bit_cast<float>((static_cast<std::uint32_t>(b[i]) << 16) | static_cast<std::uint32_t>(rng() & 0xFFFF));
          }
          elementwise_case(fx, fy, m, "f32 normals");
        }
      }
    }
  }
}

// Every length up to three blocks, so that each tail length (vectorised in a padded block) is
// checked against the scalar operation, plain and with a NaN, an infinity, a subnormal or a zero
// divisor in the tail (the fallback), and in place.
TEST(Bulk, ElementwiseTailsMatchScalar) {
  const std::vector<float> specials = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                                       1e-41f, 0.0f, 65504.0f};
  for (std::size_t n = 0; n <= 24; ++n) {
    for (std::size_t s = 0; s <= specials.size(); ++s) {
      std::vector<float> x = mixed_f32(n, 40 + n, 3.0f), y = mixed_f32(n, 80 + n, 3.0f);
      for (std::size_t i = 0; i < n; ++i) {  // plain values (mixed_f32 may hold specials)
        if (!std::isnormal(x[i])) x[i] = 1.5f + static_cast<float>(i);
        if (!std::isnormal(y[i])) y[i] = -0.75f - static_cast<float>(i);
      }
      if (s < specials.size() && n > 0) y[n - 1 - (n - 1) % 3] = specials[s];
      for (const Mode& m : kModes) {
        const std::string what = "n=" + std::to_string(n) + " special=" + std::to_string(s);
        elementwise_case(to16<f16>(x), to16<f16>(y), m, "f16 tail " + what);
        elementwise_case(to16<bf16>(x), to16<bf16>(y), m, "bf16 tail " + what);
        elementwise_case(x, y, m, "f32 tail " + what);
      }
      std::vector<float> in_place = x, want(n);
      (void)elementwise(BinaryOp::Div, std::span<const float>(x), std::span<const float>(y), std::span<float>(want));
      (void)elementwise(BinaryOp::Div, std::span<const float>(in_place), std::span<const float>(y), std::span<float>(in_place));
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(std::bit_cast<std::uint32_t>(in_place[i]), std::bit_cast<std::uint32_t>(want[i]));
    }
  }
}

TEST(Bulk, ElementwiseInPlace) {
  std::vector<f16> a = to16<f16>(mixed_f32(1000, 5, 10.0f));
  const std::vector<f16> b = to16<f16>(mixed_f32(1000, 6, 10.0f));
  std::vector<f16> want(a.size());
  (void)elementwise(BinaryOp::Mul, std::span<const f16>(a), std::span<const f16>(b), std::span<f16>(want));
  (void)elementwise(BinaryOp::Mul, std::span<const f16>(a), std::span<const f16>(b), std::span<f16>(a));
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i].bits, want[i].bits);
}

TEST(Bulk, ScanCountsAndFirstIndices) {
  std::vector<float> x = mixed_f32(10'007, 21, 1.0f);
  const std::vector<f16> h = to16<f16>(x);
  const std::vector<bf16> b = to16<bf16>(x);
  auto check = [](const ScanReport& r, auto&& is_nan, auto&& is_inf, auto&& is_sub, std::size_t n) {
    ScanReport e;
    for (std::size_t i = 0; i < n; ++i) {
      const auto idx = static_cast<std::int64_t>(i);
      if (is_nan(i)) { ++e.nan_count; if (e.first_nan < 0) e.first_nan = idx; }
      if (is_inf(i)) { ++e.inf_count; if (e.first_inf < 0) e.first_inf = idx; }
      if (is_sub(i)) { ++e.subnormal_count; if (e.first_subnormal < 0) e.first_subnormal = idx; }
    }
    EXPECT_GT(e.nan_count, 0);
    EXPECT_EQ(r.nan_count, e.nan_count);
    EXPECT_EQ(r.inf_count, e.inf_count);
    EXPECT_EQ(r.subnormal_count, e.subnormal_count);
    EXPECT_EQ(r.first_nan, e.first_nan);
    EXPECT_EQ(r.first_inf, e.first_inf);
    EXPECT_EQ(r.first_subnormal, e.first_subnormal);
  };
  check(scan(std::span<const float>(x)), [&](std::size_t i) { return std::isnan(x[i]); },
        [&](std::size_t i) { return std::isinf(x[i]); },
        [&](std::size_t i) { return std::fpclassify(x[i]) == FP_SUBNORMAL; }, x.size());
  check(scan(std::span<const f16>(h)), [&](std::size_t i) { return is_nan(h[i]); },
        [&](std::size_t i) { return is_inf(h[i]); }, [&](std::size_t i) { return is_subnormal(h[i]); }, h.size());
  check(scan(std::span<const bf16>(b)), [&](std::size_t i) { return is_nan(b[i]); },
        [&](std::size_t i) { return is_inf(b[i]); }, [&](std::size_t i) { return is_subnormal(b[i]); }, b.size());
  EXPECT_TRUE(scan(std::span<const float>()).clean());
}

void expect_same_scan(const ScanReport& got, const ScanReport& want, const std::string& what) {
  EXPECT_EQ(got.nan_count, want.nan_count) << what;
  EXPECT_EQ(got.inf_count, want.inf_count) << what;
  EXPECT_EQ(got.subnormal_count, want.subnormal_count) << what;
  EXPECT_EQ(got.first_nan, want.first_nan) << what;
  EXPECT_EQ(got.first_inf, want.first_inf) << what;
  EXPECT_EQ(got.first_subnormal, want.first_subnormal) << what;
}

// The conversion with its scans is the conversion plus the two scans, in every Mode, at every
// tail length, on data where blocks are plain, special in the input only (a subnormal FP32, an
// FP16-subnormal result) or special on both sides (NaN, Inf, overflow).
TEST(Bulk, ConvertScannedIsConvertPlusScans) {
  for (const Mode& m : kModes) {
    for (std::size_t n = 0; n <= 50; ++n) {
      for (const float scale : {1.0f, 70000.0f, 1e-5f}) {
        const std::vector<float> x = mixed_f32(n * 7 + 3, 41 + n, scale);
        std::vector<f16> want(x.size()), got(x.size());
        const BulkReport want_flags = convert(std::span<const float>(x), std::span<f16>(want), m);
        const ConvertScan cs = convert_scanned(std::span<const float>(x), std::span<f16>(got), m);
        const std::string what = mode_name(m) + " n " + std::to_string(x.size()) + " scale " + std::to_string(scale);
        for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i].bits, want[i].bits) << what << " element " << i;
        expect_same(cs.flags, want_flags, what);
        const LimitScan in = scan(std::span<const float>(x), 65520.0f);
        expect_same_scan(cs.in.scan, in.scan, what + " input");
        EXPECT_EQ(cs.in.beyond_count, in.beyond_count) << what;
        EXPECT_EQ(cs.in.first_beyond, in.first_beyond) << what;
        expect_same_scan(cs.out, scan(std::span<const f16>(want)), what + " output");
      }
    }
  }
}

// The limit scan: the plain scan's report, plus the finite elements at or beyond the limit,
// at every tail length and around both limits the output conversion uses (FP16, BF16).
TEST(Bulk, LimitScanMatchesScanAndScalarCount) {
  const float f16_limit = 65520.0f, bf16_limit = std::bit_cast<float>(0x7F7F8000u);
  for (const float limit : {f16_limit, bf16_limit}) {
    const float below = std::nextafter(limit, 0.0f), above = std::nextafter(limit, 2 * limit);
    const float specials[] = {limit, -limit, below, -below, above, -std::numeric_limits<float>::max(),
                              std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                              std::bit_cast<float>(0xFFC00001u), 1e-40f, 0.0f, -0.0f, 3.0f};
    for (std::size_t n = 0; n <= 40; ++n) {
      for (std::size_t seed = 0; seed < 6; ++seed) {
        std::vector<float> x = mixed_f32(n, 31 + seed, 70000.0f);
        for (std::size_t i = 0; i < n; ++i)
          if ((i * 7 + seed) % 5 == 0) x[i] = specials[(i + seed) % std::size(specials)];
        const LimitScan got = scan(std::span<const float>(x), limit);
        const ScanReport plain = scan(std::span<const float>(x));
        EXPECT_EQ(got.scan.nan_count, plain.nan_count);
        EXPECT_EQ(got.scan.inf_count, plain.inf_count);
        EXPECT_EQ(got.scan.subnormal_count, plain.subnormal_count);
        EXPECT_EQ(got.scan.first_nan, plain.first_nan);
        EXPECT_EQ(got.scan.first_inf, plain.first_inf);
        EXPECT_EQ(got.scan.first_subnormal, plain.first_subnormal);
        std::int64_t count = 0, first = -1;
        for (std::size_t i = 0; i < n; ++i) {
          const float a = std::fabs(x[i]);
          if (a >= limit && std::isfinite(a)) {
            ++count;
            if (first < 0) first = static_cast<std::int64_t>(i);
          }
        }
        ASSERT_EQ(got.beyond_count, count) << "n " << n << " seed " << seed << " limit " << limit;
        ASSERT_EQ(got.first_beyond, first) << "n " << n << " seed " << seed << " limit " << limit;
      }
    }
  }
}

TEST(Bulk, BadArgumentsThrow) {
  std::vector<float> x(8);
  std::vector<f16> h(7);
  EXPECT_THROW(convert(x, std::span<f16>(h)), std::invalid_argument);
  std::vector<f16> a(8), b(8), o(8);
  EXPECT_THROW(elementwise(static_cast<BinaryOp>(9), std::span<const f16>(a), std::span<const f16>(b), std::span<f16>(o)),
               std::invalid_argument);
  EXPECT_THROW(elementwise(BinaryOp::Add, std::span<const f16>(a), std::span<const f16>(h), std::span<f16>(o)),
               std::invalid_argument);
  const Mode bad{static_cast<OverflowMode>(5), DenormalMode::Preserve};
  EXPECT_THROW(convert(x, std::span<f16>(o), bad), std::invalid_argument);
  EXPECT_THROW(add(f16{}, f16{}, bad), std::invalid_argument);
}

}  // namespace
}  // namespace probelab::num
