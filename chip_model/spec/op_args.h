// Argument block of a compute Kernel task (TaskKind::Kernel): which op to run, its attributes,
// operand tensors in HBM, the Cube accumulation mode and, for a fused op, its body. The host
// writes encode_op_args(...) into HBM and points TaskDescriptor::args_addr/args_size at it; the
// AI core reads the bytes back and calls decode_op_args(...), which validates everything and throws
// OpArgsError naming the field and byte offset on a bad block. Header-only, no SystemC, no graph.
//
// Byte layout (little endian, version 1):
//   u32 magic 'OPA1' | u16 version | u16 reserved(0) | u32 total_bytes (whole block)
//   str op_type | str op_name | u8 accum (AccumDType) | u8[3] reserved(0) | u32 split_k_chunk
//   attrs | u32 n_in, n_in x TensorRef (80 raw bytes) | u32 n_out, n_out x TensorRef
//   u32 n_internal | u32 n_body, n_body x { str type | str name | attrs |
//                                            u32 n, n x i32 inputs | u32 n, n x i32 outputs }
//   u32 n_partial (0 or n_internal), n_partial x TensorRef: debug partial dumps of a fused op —
//   intermediate i is also stored (rounded to the ref's dtype) at partial_outputs[i] unless that
//   ref's dtype is kAbsentTensor
//   str   = u32 length + bytes;  attrs = u32 count, count x { str key | u8 tag | value },
//   tag 0 i64, 1 f64, 2 str, 3 u32 n + n x i64, 4 u32 n + n x f64, 5 u32 n + n x str;
//   attribute keys strictly increasing (std::map order).
//
// Fused body tensor indices: [0, n_in) are the op's inputs, [n_in, n_in + n_out) its outputs,
// [n_in + n_out, n_in + n_out + n_internal) intermediates (kept in FP32 on the core), -1 an
// omitted optional input. Inner ops run in list order; every input must be an op input or written
// by an earlier inner op; every op output and intermediate is written exactly once.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "chip_model/spec/kernel_args.h"

namespace probelab::spec {

static_assert(std::endian::native == std::endian::little, "op args are encoded little endian");

/// TaskDescriptor::kernel of a compute Kernel task whose args block is an OpArgs block (the
/// device kernel is chosen by OpArgs::op_type). The only kernel id defined so far.
inline constexpr std::uint32_t kKernelOpArgs = 0;

inline constexpr std::uint32_t kOpArgsMagic = 0x3141504F;  // "OPA1"
inline constexpr std::uint16_t kOpArgsVersion = 1;
/// Number of graph::DType / graph::Format enumerators (values are checked against these).
inline constexpr std::uint8_t kNumDTypeValues = 9;
inline constexpr std::uint8_t kNumFormatValues = 5;
/// TensorRef::dtype of an omitted optional input.
inline constexpr std::uint8_t kAbsentTensor = 0xFF;
/// Upper bound on list lengths and string sizes accepted by the decoder (sanity, not a feature).
inline constexpr std::uint32_t kOpArgsMaxCount = 1u << 24;

/// Accumulator of Cube (GEMM/Conv) ops. Vector ops ignore it.
enum class AccumDType : std::uint8_t {
  FP32 = 0,         // FP32 accumulation in L0C (the hardware default)
  FP16_RN = 1,      // FP16 accumulator, correctly rounded RN16(acc + a*b) at every step
  FP16_VIA_FP32 = 2 // FP16 accumulator, acc + a*b computed in FP32 then rounded to FP16 (double rounding)
};
inline constexpr std::uint8_t kNumAccumValues = 3;

/// Same alternatives (and order) as graph::AttrValue, so the two are the same type.
using OpAttrValue = std::variant<std::int64_t, double, std::string, std::vector<std::int64_t>,
                                 std::vector<double>, std::vector<std::string>>;
using OpAttrs = std::map<std::string, OpAttrValue>;

/// One inner op of a fused op's body.
struct FusedInner {
  std::string type;
  std::string name;                  // for diagnostics (the original op's name)
  OpAttrs attrs;
  std::vector<std::int32_t> inputs;  // body tensor indices, -1 = omitted optional input
  std::vector<std::int32_t> outputs;
  bool operator==(const FusedInner&) const = default;
};

struct OpArgs {
  std::string op_type;               // registered op type, e.g. "MatMul", "FusedConvRelu"
  std::string op_name;               // for diagnostics
  OpAttrs attrs;
  std::vector<TensorRef> inputs;     // dtype == kAbsentTensor: omitted optional input
  std::vector<TensorRef> outputs;
  AccumDType accum = AccumDType::FP32;
  /// Cube ops, FP32 accumulation only: 0 = K reduced in one pass; n > 0 = K cut into chunks of n
  /// elements, each chunk accumulated in FP32 from +0, its partial rounded to FP16 and the partials
  /// summed in FP16 in chunk order (split-K with FP16 partial buffers, numerics/gemm.h).
  std::uint32_t split_k_chunk = 0;
  std::uint32_t num_internal = 0;    // intermediates of the fused body
  std::vector<FusedInner> fused_body;  // empty for a plain op
  std::vector<TensorRef> partial_outputs;  // empty, or one per intermediate (debug partial dumps)

  bool is_fused() const { return !fused_body.empty(); }
  bool operator==(const OpArgs& o) const {
    auto refs_eq = [](const std::vector<TensorRef>& a, const std::vector<TensorRef>& b) {
      return a.size() == b.size() &&
             (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(TensorRef)) == 0);
    };
    return op_type == o.op_type && op_name == o.op_name && attrs == o.attrs &&
           refs_eq(inputs, o.inputs) && refs_eq(outputs, o.outputs) && accum == o.accum &&
           split_k_chunk == o.split_k_chunk && num_internal == o.num_internal && fused_body == o.fused_body &&
           refs_eq(partial_outputs, o.partial_outputs);
  }
};

/// A malformed argument block or an inconsistent OpArgs.
class OpArgsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Logical element count of a tensor reference. Throws OpArgsError for a negative dimension or
/// a count above 2^48 (an argument block read back from memory may hold anything).
inline std::int64_t tensor_numel(const TensorRef& t) {
  constexpr std::int64_t kMax = std::int64_t{1} << 48;
  const int rank = t.rank > kMaxDims ? kMaxDims : t.rank;
  std::int64_t n = 1;
  for (int i = 0; i < rank; ++i) {
    const std::int64_t d = t.dims[i];
    if (d < 0) throw OpArgsError("op args: negative tensor dimension " + std::to_string(d));
    if (d == 0) return 0;
    if (n > kMax / d) throw OpArgsError("op args: tensor element count above 2^48");
    n *= d;
  }
  return n;
}

inline TensorRef make_tensor_ref(std::uint64_t addr, std::uint8_t dtype, std::uint8_t format,
                                 const std::vector<std::int64_t>& dims) {
  if (dims.size() > static_cast<std::size_t>(kMaxDims))
    throw OpArgsError("op args: tensor rank " + std::to_string(dims.size()) + " exceeds " +
                      std::to_string(kMaxDims));
  TensorRef t;
  t.addr = addr;
  t.dtype = dtype;
  t.format = format;
  t.rank = static_cast<std::uint8_t>(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) t.dims[i] = dims[i];
  return t;
}

namespace detail {

class OpArgsWriter {
 public:
  std::vector<std::byte> bytes;
  template <class T> void pod(const T& v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(T));
  }
  void u32(std::size_t v) {
    if (v > kOpArgsMaxCount) throw OpArgsError("op args: count " + std::to_string(v) + " too large");
    pod(static_cast<std::uint32_t>(v));
  }
  void str(const std::string& s) {
    u32(s.size());
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    bytes.insert(bytes.end(), p, p + s.size());
  }
  void attrs(const OpAttrs& a) {
    u32(a.size());
    for (const auto& [key, value] : a) {
      str(key);
      pod(static_cast<std::uint8_t>(value.index()));
      std::visit([this](const auto& v) { attr_value(v); }, value);
    }
  }

 private:
  void attr_value(std::int64_t v) { pod(v); }
  void attr_value(double v) { pod(v); }
  void attr_value(const std::string& v) { str(v); }
  template <class T> void attr_value(const std::vector<T>& v) {
    u32(v.size());
    for (const auto& e : v) attr_value(e);
  }
};

class OpArgsReader {
 public:
  OpArgsReader(const std::byte* data, std::size_t size) : data_(data), size_(size) {}
  std::size_t offset() const { return off_; }
  std::size_t remaining() const { return size_ - off_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw OpArgsError("op args: " + what + " (at byte offset " + std::to_string(off_) + ")");
  }
  template <class T> T pod(const char* field) {
    if (remaining() < sizeof(T)) fail(std::string("truncated reading ") + field);
    T v;
    std::memcpy(&v, data_ + off_, sizeof(T));
    off_ += sizeof(T);
    return v;
  }
  std::uint32_t count(const char* field, std::size_t min_elem_bytes) {
    auto n = pod<std::uint32_t>(field);
    if (n > kOpArgsMaxCount || (min_elem_bytes && n > remaining() / min_elem_bytes))
      fail(std::string("count ") + std::to_string(n) + " of " + field + " exceeds the block");
    return n;
  }
  std::string str(const char* field) {
    auto n = count(field, 1);
    std::string s(reinterpret_cast<const char*>(data_ + off_), n);
    off_ += n;
    return s;
  }
  OpAttrs attrs(const char* owner) {
    OpAttrs a;
    auto n = count("attribute count", 6);
    for (std::uint32_t i = 0; i < n; ++i) {
      std::string key = str("attribute key");
      if (!a.empty() && !(a.rbegin()->first < key))
        fail(std::string("attribute keys of ") + owner + " not strictly increasing at '" + key + "'");
      auto tag = pod<std::uint8_t>("attribute tag");
      switch (tag) {
        case 0: a.emplace(key, pod<std::int64_t>("int attribute")); break;
        case 1: a.emplace(key, pod<double>("float attribute")); break;
        case 2: a.emplace(key, str("string attribute")); break;
        case 3: a.emplace(key, list<std::int64_t>("int list attribute")); break;
        case 4: a.emplace(key, list<double>("float list attribute")); break;
        case 5: {
          std::vector<std::string> v(count("string list attribute", 4));
          for (auto& s : v) s = str("string list element");
          a.emplace(key, std::move(v));
          break;
        }
        default:
          fail("attribute '" + key + "' has unknown type tag " + std::to_string(tag) + " (expected 0..5)");
      }
    }
    return a;
  }
  template <class T> std::vector<T> list(const char* field) {
    std::vector<T> v(count(field, sizeof(T)));
    for (auto& e : v) e = pod<T>(field);
    return v;
  }

 private:
  const std::byte* data_;
  std::size_t size_;
  std::size_t off_ = 0;
};

inline void validate_ref(const TensorRef& t, const std::string& what, bool may_be_absent) {
  if (t.dtype == kAbsentTensor) {
    if (!may_be_absent) throw OpArgsError("op args: " + what + " is marked absent; outputs must exist");
    return;
  }
  if (t.dtype >= kNumDTypeValues)
    throw OpArgsError("op args: " + what + " has dtype value " + std::to_string(t.dtype) +
                      " (expected 0.." + std::to_string(kNumDTypeValues - 1) + ")");
  if (t.format >= kNumFormatValues)
    throw OpArgsError("op args: " + what + " has format value " + std::to_string(t.format) +
                      " (expected 0.." + std::to_string(kNumFormatValues - 1) + ")");
  if (t.rank > kMaxDims)
    throw OpArgsError("op args: " + what + " has rank " + std::to_string(t.rank) + " (expected <= " +
                      std::to_string(kMaxDims) + ")");
  for (int i = 0; i < t.rank; ++i)
    if (t.dims[i] < 0)
      throw OpArgsError("op args: " + what + " has negative dim " + std::to_string(t.dims[i]));
}

}  // namespace detail

/// Checks an OpArgs for consistency (operands, enums, fused body dataflow); throws OpArgsError.
inline void validate_op_args(const OpArgs& a) {
  if (a.op_type.empty()) throw OpArgsError("op args: empty op type");
  const std::string who = "op '" + a.op_name + "' (" + a.op_type + ")";
  if (static_cast<std::uint8_t>(a.accum) >= kNumAccumValues)
    throw OpArgsError("op args: " + who + " has accumulation mode " +
                      std::to_string(static_cast<int>(a.accum)) + " (expected 0..2)");
  if (a.split_k_chunk != 0 && a.accum != AccumDType::FP32)
    throw OpArgsError("op args: " + who + " has split_k_chunk " + std::to_string(a.split_k_chunk) +
                      " with FP16 accumulation (split-K needs accum FP32)");
  if (a.outputs.empty()) throw OpArgsError("op args: " + who + " has no outputs");
  for (std::size_t i = 0; i < a.inputs.size(); ++i)
    detail::validate_ref(a.inputs[i], who + " input " + std::to_string(i), true);
  for (std::size_t i = 0; i < a.outputs.size(); ++i)
    detail::validate_ref(a.outputs[i], who + " output " + std::to_string(i), false);
  if (!a.partial_outputs.empty() && a.partial_outputs.size() != a.num_internal)
    throw OpArgsError("op args: " + who + " has " + std::to_string(a.partial_outputs.size()) +
                      " partial outputs (expected none or one per intermediate: " + std::to_string(a.num_internal) + ")");
  for (std::size_t i = 0; i < a.partial_outputs.size(); ++i)
    detail::validate_ref(a.partial_outputs[i], who + " partial output " + std::to_string(i), true);
  if (a.fused_body.empty()) {
    if (a.num_internal != 0)
      throw OpArgsError("op args: " + who + " declares intermediates but has no fused body");
    return;
  }
  const std::size_t n_in = a.inputs.size(), n_out = a.outputs.size();
  const std::size_t total = n_in + n_out + a.num_internal;
  std::vector<char> defined(total, 0);
  for (std::size_t i = 0; i < n_in; ++i) defined[i] = a.inputs[i].dtype != kAbsentTensor;
  for (std::size_t k = 0; k < a.fused_body.size(); ++k) {
    const FusedInner& f = a.fused_body[k];
    const std::string inner = who + " body op " + std::to_string(k) + " '" + f.name + "' (" + f.type + ")";
    if (f.type.empty()) throw OpArgsError("op args: " + inner + " has an empty type");
    for (std::int32_t t : f.inputs) {
      if (t == -1) continue;
      if (t < 0 || static_cast<std::size_t>(t) >= total)
        throw OpArgsError("op args: " + inner + " reads tensor index " + std::to_string(t) +
                          " (expected -1 or 0.." + std::to_string(total - 1) + ")");
      if (!defined[t])
        throw OpArgsError("op args: " + inner + " reads tensor index " + std::to_string(t) +
                          " before it is written");
    }
    if (f.outputs.empty()) throw OpArgsError("op args: " + inner + " has no outputs");
    for (std::int32_t t : f.outputs) {
      if (t < static_cast<std::int32_t>(n_in) || static_cast<std::size_t>(t) >= total)
        throw OpArgsError("op args: " + inner + " writes tensor index " + std::to_string(t) +
                          " (expected " + std::to_string(n_in) + ".." + std::to_string(total - 1) + ")");
      if (defined[t])
        throw OpArgsError("op args: " + inner + " writes tensor index " + std::to_string(t) + " twice");
      defined[t] = 1;
    }
  }
  for (std::size_t i = n_in; i < total; ++i)
    if (!defined[i])
      throw OpArgsError("op args: " + who + " fused body never writes tensor index " + std::to_string(i));
}

/// Serializes (after validate_op_args) into the version-1 byte layout above.
inline std::vector<std::byte> encode_op_args(const OpArgs& a) {
  validate_op_args(a);
  detail::OpArgsWriter w;
  w.pod(kOpArgsMagic);
  w.pod(kOpArgsVersion);
  w.pod(std::uint16_t{0});
  w.pod(std::uint32_t{0});  // total_bytes, patched below
  w.str(a.op_type);
  w.str(a.op_name);
  w.pod(static_cast<std::uint8_t>(a.accum));
  w.pod(std::uint8_t{0});
  w.pod(std::uint16_t{0});
  w.pod(a.split_k_chunk);
  w.attrs(a.attrs);
  w.u32(a.inputs.size());
  for (const auto& t : a.inputs) w.pod(t);
  w.u32(a.outputs.size());
  for (const auto& t : a.outputs) w.pod(t);
  w.u32(a.num_internal);
  w.u32(a.fused_body.size());
  for (const auto& f : a.fused_body) {
    w.str(f.type);
    w.str(f.name);
    w.attrs(f.attrs);
    w.u32(f.inputs.size());
    for (auto i : f.inputs) w.pod(i);
    w.u32(f.outputs.size());
    for (auto i : f.outputs) w.pod(i);
  }
  w.u32(a.partial_outputs.size());
  for (const auto& t : a.partial_outputs) w.pod(t);
  const auto total = static_cast<std::uint32_t>(w.bytes.size());
  std::memcpy(w.bytes.data() + 8, &total, sizeof(total));
  return std::move(w.bytes);
}

/// Parses and validates a block; `size` may exceed the block (e.g. a padded HBM read) but not fall
/// short of total_bytes. Throws OpArgsError naming the field and byte offset.
inline OpArgs decode_op_args(const std::byte* data, std::size_t size) {
  detail::OpArgsReader r(data, size);
  if (r.pod<std::uint32_t>("magic") != kOpArgsMagic)
    throw OpArgsError("op args: bad magic (expected 'OPA1'; is args_addr pointing at an op args block?)");
  auto version = r.pod<std::uint16_t>("version");
  if (version != kOpArgsVersion)
    r.fail("unsupported version " + std::to_string(version) + " (expected " +
           std::to_string(kOpArgsVersion) + ")");
  if (r.pod<std::uint16_t>("reserved") != 0) r.fail("reserved header field is not zero");
  auto total = r.pod<std::uint32_t>("total_bytes");
  if (total > size)
    r.fail("block declares " + std::to_string(total) + " bytes but only " + std::to_string(size) +
           " are available");
  detail::OpArgsReader body(data, total);
  (void)body.pod<std::uint64_t>("header");
  (void)body.pod<std::uint32_t>("header");
  OpArgs a;
  a.op_type = body.str("op type");
  a.op_name = body.str("op name");
  a.accum = static_cast<AccumDType>(body.pod<std::uint8_t>("accum"));
  (void)body.pod<std::uint8_t>("reserved");
  (void)body.pod<std::uint16_t>("reserved");
  a.split_k_chunk = body.pod<std::uint32_t>("split_k_chunk");
  a.attrs = body.attrs("the op");
  a.inputs.resize(body.count("input count", sizeof(TensorRef)));
  for (auto& t : a.inputs) t = body.pod<TensorRef>("input tensor");
  a.outputs.resize(body.count("output count", sizeof(TensorRef)));
  for (auto& t : a.outputs) t = body.pod<TensorRef>("output tensor");
  a.num_internal = body.pod<std::uint32_t>("internal tensor count");
  if (a.num_internal > kOpArgsMaxCount) body.fail("internal tensor count too large");
  a.fused_body.resize(body.count("fused body count", 16));
  for (auto& f : a.fused_body) {
    f.type = body.str("body op type");
    f.name = body.str("body op name");
    f.attrs = body.attrs("a body op");
    f.inputs = body.list<std::int32_t>("body op inputs");
    f.outputs = body.list<std::int32_t>("body op outputs");
  }
  a.partial_outputs.resize(body.count("partial output count", sizeof(TensorRef)));
  for (auto& t : a.partial_outputs) t = body.pod<TensorRef>("partial output tensor");
  if (body.remaining() != 0)
    body.fail(std::to_string(body.remaining()) + " trailing bytes after the last field");
  validate_op_args(a);
  return a;
}

inline OpArgs decode_op_args(const std::vector<std::byte>& bytes) {
  return decode_op_args(bytes.data(), bytes.size());
}

}  // namespace probelab::spec
