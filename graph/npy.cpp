// .npy encoding and decoding, see npy.h.
#include "graph/npy.h"

#include <charconv>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "graph/format.h"
#include "graph/graph.h"

namespace probelab::graph {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;

std::string_view descr_of(DType t) {
  switch (t) {
    case DType::F16: return "<f2";
    case DType::F32: return "<f4";
    case DType::F64: return "<f8";
    case DType::I32: return "<i4";
    case DType::I64: return "<i8";
    case DType::Bool: return "|b1";
    case DType::I8: return "|i1";
    case DType::U8: return "|u1";
    case DType::BF16: break;
  }
  throw GraphError("npy: no NumPy dtype for bfloat16");
}

std::optional<DType> dtype_of(const std::string& descr) {
  // '<' little-endian, '=' native (little-endian here), '|' not applicable (one-byte types)
  if (descr.size() != 3 || (descr[0] != '<' && descr[0] != '=' && descr[0] != '|')) return std::nullopt;
  for (DType t : {DType::F16, DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool, DType::I8, DType::U8})
    if (descr_of(t).substr(1) == std::string_view(descr).substr(1)) return t;
  return std::nullopt;
}

// numpy refuses headers above 10000 bytes by default (numpy.lib.format, max_header_size); so do we.
constexpr std::size_t kMaxHeaderBytes = 10000;

// Value of `key` in the header dict: the text after "'key':" up to the matching delimiter (a
// quoted string, a parenthesised tuple, True or False). A plain scan, no regex: the header is
// untrusted input.
std::string dict_value(const std::string& header, const std::string& key, const std::string& what) {
  for (const char q : {'\'', '"'}) {
    const std::string quoted = std::string(1, q) + key + q;
    for (std::size_t at = header.find(quoted); at != std::string::npos; at = header.find(quoted, at + 1)) {
      std::size_t i = at + quoted.size();
      while (i < header.size() && (header[i] == ' ' || header[i] == '\t')) ++i;
      if (i >= header.size() || header[i] != ':') continue;
      ++i;
      while (i < header.size() && (header[i] == ' ' || header[i] == '\t')) ++i;
      if (i >= header.size()) break;
      const char c = header[i];
      const char close = c == '(' ? ')' : c;
      if (c == '\'' || c == '"' || c == '(') {
        const std::size_t end = header.find(close, i + 1);
        if (end == std::string::npos) break;
        return header.substr(i, end - i + 1);
      }
      for (const char* word : {"True", "False"})
        if (header.compare(i, std::strlen(word), word) == 0) return word;
      break;
    }
  }
  throw GraphError(fmt::format("{}: .npy header has no '{}' entry: {}", what, key,
                               header.size() > 200 ? header.substr(0, 200) + "..." : header));
}

// "(2, 3)", "(4,)", "()": non-negative decimal dimensions, checked for overflow.
Shape parse_shape(const std::string& tuple, const std::string& what) {
  Shape shape;
  const std::string body = tuple.substr(1, tuple.size() - 2);
  std::size_t begin = 0;
  while (begin <= body.size()) {
    std::size_t end = body.find(',', begin);
    if (end == std::string::npos) end = body.size();
    std::string item = body.substr(begin, end - begin);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    const bool last = end == body.size();
    if (item.empty()) {
      // only "()" and the trailing comma of "(4,)" leave an empty item
      if (!(last && (shape.size() == 1 || body.find_first_not_of(" \t") == std::string::npos)))
        throw GraphError(fmt::format("{}: .npy shape {} is not a tuple of dimensions", what, tuple));
      break;
    }
    std::int64_t d = 0;
    const auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), d);
    if (ec == std::errc::result_out_of_range || (ec == std::errc() && p == item.data() + item.size() && d > kMaxElements))
      throw GraphError(fmt::format("{}: .npy shape {}: dimension {} is too large", what, tuple, item));
    if (ec != std::errc() || p != item.data() + item.size() || d < 0)
      throw GraphError(fmt::format("{}: .npy shape {}: dimension '{}' is not a non-negative integer", what, tuple, item));
    shape.push_back(d);
    if (last) break;
    begin = end + 1;
  }
  numel(shape);  // throws when the element count overflows
  return shape;
}

}  // namespace

std::vector<std::byte> encode_npy(const Tensor& t_in) {
  Tensor t = to_logical(t_in);
  if (t.dtype() == DType::BF16) {
    const auto f = t.to_f32();
    t = Tensor::from_f32(t.shape(), f, DType::F32);
  }
  // "(2, 3)", "(4,)" and "()" as Python writes tuples
  const std::string shape = t.shape().size() == 1 ? fmt::format("{},", t.shape()[0])
                                                  : fmt::format("{}", fmt::join(t.shape(), ", "));
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr_of(t.dtype()), shape);
  const std::size_t unpadded = kMagicLen + 4 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::vector<std::byte> out(kMagicLen + 4 + header.size() + t.nbytes());
  std::memcpy(out.data(), kMagic, kMagicLen);
  out[6] = std::byte{1};
  out[7] = std::byte{0};
  out[8] = static_cast<std::byte>(header.size() & 0xFF);
  out[9] = static_cast<std::byte>(header.size() >> 8);
  std::memcpy(out.data() + 10, header.data(), header.size());
  if (t.nbytes()) std::memcpy(out.data() + 10 + header.size(), t.bytes().data(), t.nbytes());  // empty: no data pointer
  return out;
}

Tensor decode_npy(const std::vector<std::byte>& data, const std::string& what) {
  if (data.size() < 10 || std::memcmp(data.data(), kMagic, kMagicLen) != 0)
    throw GraphError(fmt::format("{}: not a .npy file (bad magic)", what));
  const int major = static_cast<int>(data[6]);
  std::size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = static_cast<std::size_t>(data[8]) | static_cast<std::size_t>(data[9]) << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (data.size() < 12) throw GraphError(fmt::format("{}: truncated .npy header", what));
    for (int i = 0; i < 4; ++i) header_len |= static_cast<std::size_t>(data[8 + static_cast<std::size_t>(i)]) << (8 * i);
    start = 12;
  } else {
    throw GraphError(fmt::format("{}: unsupported .npy format version {}", what, major));
  }
  if (header_len > kMaxHeaderBytes)
    throw GraphError(fmt::format("{}: .npy header of {} bytes (at most {} are accepted, as numpy does)", what,
                                 header_len, kMaxHeaderBytes));
  if (data.size() < start + header_len) throw GraphError(fmt::format("{}: truncated .npy header", what));
  const std::string header(reinterpret_cast<const char*>(data.data() + start), header_len);
  // The format's header is ASCII text (a Python dict literal padded with spaces and a newline); a
  // byte outside it is not a .npy header, and must not reach a message as raw bytes.
  for (std::size_t i = 0; i < header.size(); ++i) {
    const auto c = static_cast<unsigned char>(header[i]);
    if ((c < 0x20 || c > 0x7e) && c != '\n' && c != '\t')
      throw GraphError(fmt::format("{}: .npy header is not ASCII text (byte 0x{:02x} at offset {})", what, c, start + i));
  }

  std::string descr = dict_value(header, "descr", what);
  if (descr.front() != '\'' && descr.front() != '"')
    throw GraphError(fmt::format("{}: .npy descr {} is not a string", what, descr));
  descr = descr.substr(1, descr.size() - 2);
  const auto dtype = dtype_of(descr);
  if (!dtype)
    throw GraphError(fmt::format("{}: unsupported .npy dtype '{}' (expected one of <f2 <f4 <f8 <i4 <i8 |b1, "
                                 "little-endian)", what, descr));
  if (dict_value(header, "fortran_order", what) != "False")
    throw GraphError(fmt::format("{}: Fortran-ordered .npy arrays are not supported (expected C order)", what));
  const std::string shape_txt = dict_value(header, "shape", what);
  if (shape_txt.front() != '(') throw GraphError(fmt::format("{}: .npy shape {} is not a tuple", what, shape_txt));
  const Shape shape = parse_shape(shape_txt, what);

  const std::size_t body = start + header_len;
  const auto need = static_cast<std::size_t>(numel(shape)) * dtype_size(*dtype);
  if (data.size() - body != need)
    throw GraphError(fmt::format("{}: .npy data has {} bytes, {} {} needs {}", what, data.size() - body,
                                 dtype_name(*dtype), shape_str(shape), need));
  std::vector<std::byte> bytes(data.begin() + static_cast<std::ptrdiff_t>(body), data.end());
  return Tensor(TensorDesc{*dtype, shape, Format::ND}, bytes);
}

Tensor read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw GraphError(fmt::format("{}: cannot open .npy file", path));
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> data(raw.size());
  if (!raw.empty()) std::memcpy(data.data(), raw.data(), raw.size());
  return decode_npy(data, path);
}

void write_npy(const std::string& path, const Tensor& t) {
  const auto data = encode_npy(t);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw GraphError(fmt::format("{}: cannot open for writing", path));
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (!out) throw GraphError(fmt::format("{}: write failed", path));
}

}  // namespace probelab::graph
