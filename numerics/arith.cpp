// Scalar arithmetic (arith.h): thin typed wrappers over detail/ops.h.
#include "numerics/arith.h"

#include <bit>
#include <type_traits>

#include "numerics/detail/ops.h"

namespace probelab::num {
namespace {

using detail::BF16;
using detail::F16;
using detail::F32;

template <class T> struct FormatOf;
template <> struct FormatOf<f16> { using type = F16; };
template <> struct FormatOf<bf16> { using type = BF16; };
template <> struct FormatOf<float> { using type = F32; };

template <class T>
std::uint32_t bits_of(T x) noexcept {
  if constexpr (std::is_same_v<T, float>) return std::bit_cast<std::uint32_t>(x);
  else return x.bits;
}
template <class T, class F>
Result<T> wrap(detail::Rounded<F> r) noexcept {
  if constexpr (std::is_same_v<T, float>) return {std::bit_cast<float>(r.bits), r.flags};
  else return {T{static_cast<std::uint16_t>(r.bits)}, r.flags};
}

template <class T>
Result<T> add_t(T a, T b, const Mode& m, bool neg) {
  validate(m);
  return wrap<T>(detail::add_op<typename FormatOf<T>::type>(bits_of(a), bits_of(b), neg, m));
}
template <class T>
Result<T> mul_t(T a, T b, const Mode& m) {
  validate(m);
  return wrap<T>(detail::mul_op<typename FormatOf<T>::type>(bits_of(a), bits_of(b), m));
}
template <class T>
Result<T> div_t(T a, T b, const Mode& m) {
  validate(m);
  return wrap<T>(detail::div_op<typename FormatOf<T>::type>(bits_of(a), bits_of(b), m));
}
template <class T>
Result<T> sqrt_t(T a, const Mode& m) {
  validate(m);
  return wrap<T>(detail::sqrt_op<typename FormatOf<T>::type>(bits_of(a), m));
}
template <class T>
Result<T> fma_t(T a, T b, T c, const Mode& m) {
  validate(m);
  return wrap<T>(detail::fma_op<typename FormatOf<T>::type>(bits_of(a), bits_of(b), bits_of(c), m));
}
template <class T>
Result<T> minmax_t(T a, T b, const Mode& m, bool want_max, bool number_pref) {
  validate(m);
  return wrap<T>(detail::minmax_op<typename FormatOf<T>::type>(bits_of(a), bits_of(b), want_max, number_pref, m));
}
template <class T>
Result<Cmp> cmp_t(T a, T b, const Mode& m, bool signaling) {
  validate(m);
  return detail::compare_op<typename FormatOf<T>::type>(bits_of(a), bits_of(b), signaling, m);
}

}  // namespace

#define PROBELAB_NUM_ARITH(T)                                                                         \
  Result<T> add(T a, T b, const Mode& m) { return add_t(a, b, m, false); }                            \
  Result<T> sub(T a, T b, const Mode& m) { return add_t(a, b, m, true); }                             \
  Result<T> mul(T a, T b, const Mode& m) { return mul_t(a, b, m); }                                   \
  Result<T> div(T a, T b, const Mode& m) { return div_t(a, b, m); }                                   \
  Result<T> sqrt(T a, const Mode& m) { return sqrt_t(a, m); }                                         \
  Result<T> fma(T a, T b, T c, const Mode& m) { return fma_t(a, b, c, m); }                           \
  Result<T> min(T a, T b, const Mode& m) { return minmax_t(a, b, m, false, false); }                  \
  Result<T> max(T a, T b, const Mode& m) { return minmax_t(a, b, m, true, false); }                   \
  Result<T> min_num(T a, T b, const Mode& m) { return minmax_t(a, b, m, false, true); }               \
  Result<T> max_num(T a, T b, const Mode& m) { return minmax_t(a, b, m, true, true); }                \
  Result<Cmp> compare_quiet(T a, T b, const Mode& m) { return cmp_t(a, b, m, false); }                \
  Result<Cmp> compare_signaling(T a, T b, const Mode& m) { return cmp_t(a, b, m, true); }

PROBELAB_NUM_ARITH(f16)
PROBELAB_NUM_ARITH(bf16)
PROBELAB_NUM_ARITH(float)

#undef PROBELAB_NUM_ARITH

}  // namespace probelab::num
