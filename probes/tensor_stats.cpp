#include "probes/tensor_stats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "chip_model/spec/capture_math.h"

namespace probelab::probes {

spec::CaptureStats compute_stats(std::span<const double> v) {
  // the device's definition (spec/capture_math.h), so host and device statistics agree bit for bit
  return spec::detail::stats_impl(v.size(), [v](std::size_t i) { return v[i]; }, [v](std::size_t b, double* xs) {
    std::memcpy(xs, v.data() + b * spec::detail::kStatLanes, spec::detail::kStatLanes * sizeof(double));
  });
}

spec::CaptureStats compute_stats(const graph::Tensor& t) {
  // FP32/FP16/BF16 in row-major order: straight from the bytes, the same values as to_f64() gives
  const graph::Format f = t.desc().format;
  const graph::DType d = t.dtype();
  if ((f == graph::Format::ND || f == graph::Format::NCHW) &&
      (d == graph::DType::F32 || d == graph::DType::F16 || d == graph::DType::BF16))
    return spec::compute_stats(t.bytes(), static_cast<std::uint8_t>(d), static_cast<std::size_t>(t.numel()));
  std::vector<double> v = t.to_f64();
  return compute_stats(v);
}

namespace {
constexpr std::uint64_t P1 = 11400714785074694791ull, P2 = 14029467366897019727ull, P3 = 1609587929392839161ull,
                        P4 = 9650029242287828579ull, P5 = 2870177450012600261ull;

std::uint64_t rd64(const std::byte* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
std::uint32_t rd32(const std::byte* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
std::uint64_t round(std::uint64_t acc, std::uint64_t in) {
  acc += in * P2;
  acc = std::rotl(acc, 31);
  return acc * P1;
}
std::uint64_t merge(std::uint64_t acc, std::uint64_t v) {
  acc ^= round(0, v);
  return acc * P1 + P4;
}
}  // namespace

std::uint64_t xxh64(std::span<const std::byte> bytes, std::uint64_t seed) {
  const std::byte* p = bytes.data();
  const std::byte* end = p + bytes.size();
  std::uint64_t h;
  if (bytes.size() >= 32) {
    std::uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
    const std::byte* limit = end - 32;
    do {
      v1 = round(v1, rd64(p));
      v2 = round(v2, rd64(p + 8));
      v3 = round(v3, rd64(p + 16));
      v4 = round(v4, rd64(p + 24));
      p += 32;
    } while (p <= limit);
    h = std::rotl(v1, 1) + std::rotl(v2, 7) + std::rotl(v3, 12) + std::rotl(v4, 18);
    h = merge(h, v1);
    h = merge(h, v2);
    h = merge(h, v3);
    h = merge(h, v4);
  } else {
    h = seed + P5;
  }
  h += bytes.size();
  while (p + 8 <= end) {
    h ^= round(0, rd64(p));
    h = std::rotl(h, 27) * P1 + P4;
    p += 8;
  }
  if (p + 4 <= end) {
    h ^= static_cast<std::uint64_t>(rd32(p)) * P1;
    h = std::rotl(h, 23) * P2 + P3;
    p += 4;
  }
  while (p < end) {
    h ^= static_cast<std::uint64_t>(std::to_integer<std::uint8_t>(*p)) * P5;
    h = std::rotl(h, 11) * P1;
    ++p;
  }
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

}  // namespace probelab::probes
