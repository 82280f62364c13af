// .npy encoding and decoding, see npy.h.
#include "graph/npy.h"

#include <cstring>
#include <fstream>
#include <regex>

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
    case DType::BF16: break;
  }
  throw GraphError("npy: no NumPy dtype for bfloat16");
}

std::optional<DType> dtype_of(const std::string& descr) {
  // '<' little-endian, '=' native (little-endian here), '|' not applicable (one-byte types)
  if (descr.size() != 3 || (descr[0] != '<' && descr[0] != '=' && descr[0] != '|')) return std::nullopt;
  for (DType t : {DType::F16, DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool})
    if (descr_of(t).substr(1) == std::string_view(descr).substr(1)) return t;
  return std::nullopt;
}

// Value of `key` in the header dict: the text after "'key':" up to the matching delimiter.
std::string dict_value(const std::string& header, const std::string& key, const std::string& what) {
  const std::regex re("['\"]" + key + "['\"]\\s*:\\s*('[^']*'|\"[^\"]*\"|\\([^)]*\\)|True|False)");
  std::smatch m;
  if (!std::regex_search(header, m, re))
    throw GraphError(fmt::format("{}: .npy header has no '{}' entry: {}", what, key, header));
  return m[1].str();
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
  std::memcpy(out.data() + 10 + header.size(), t.bytes().data(), t.nbytes());
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
  if (data.size() < start + header_len) throw GraphError(fmt::format("{}: truncated .npy header", what));
  const std::string header(reinterpret_cast<const char*>(data.data() + start), header_len);

  std::string descr = dict_value(header, "descr", what);
  descr = descr.substr(1, descr.size() - 2);
  const auto dtype = dtype_of(descr);
  if (!dtype)
    throw GraphError(fmt::format("{}: unsupported .npy dtype '{}' (expected one of <f2 <f4 <f8 <i4 <i8 |b1, "
                                 "little-endian)", what, descr));
  if (dict_value(header, "fortran_order", what) != "False")
    throw GraphError(fmt::format("{}: Fortran-ordered .npy arrays are not supported (expected C order)", what));
  const std::string shape_txt = dict_value(header, "shape", what);
  Shape shape;
  const std::regex num("\\d+");
  for (auto it = std::sregex_iterator(shape_txt.begin(), shape_txt.end(), num); it != std::sregex_iterator(); ++it)
    shape.push_back(std::stoll(it->str()));

  const std::size_t body = start + header_len;
  const auto need = static_cast<std::size_t>(numel(shape)) * dtype_size(*dtype);
  if (data.size() - body != need)
    throw GraphError(fmt::format("{}: .npy data has {} bytes, {} {} needs {}", what, data.size() - body,
                                 dtype_name(*dtype), shape_str(shape), need));
  std::vector<std::byte> bytes(data.begin() + static_cast<std::ptrdiff_t>(body), data.end());
  return Tensor(TensorDesc{*dtype, shape, Format::ND}, std::move(bytes));
}

Tensor read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw GraphError(fmt::format("{}: cannot open .npy file", path));
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> data(raw.size());
  std::memcpy(data.data(), raw.data(), raw.size());
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
