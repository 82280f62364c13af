// .npy reading and writing.
#include <unistd.h>

#include <gtest/gtest.h>
#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "graph/format.h"
#include "graph/graph.h"
#include "graph/npy.h"

namespace probelab::graph {
namespace {

namespace fs = std::filesystem;

class Npy : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("probelab_npy_" + std::to_string(::getpid()) + "_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& f) const { return (dir_ / f).string(); }
  void write_raw(const std::string& f, const std::string& header, std::size_t body_bytes) const {
    std::string h = header;
    while ((10 + h.size() + 1) % 64) h += ' ';
    h += '\n';
    std::string data = std::string("\x93NUMPY\x01\x00", 8);
    data += static_cast<char>(h.size() & 0xFF);
    data += static_cast<char>(h.size() >> 8);
    data += h;
    data += std::string(body_bytes, '\0');
    std::ofstream(path(f), std::ios::binary) << data;
  }
  fs::path dir_;
};

Tensor random_tensor(DType t, const Shape& s, std::uint64_t seed) {
  Tensor x({t, s, Format::ND});
  std::mt19937_64 rng(seed);
  for (std::byte& b : x.bytes()) b = static_cast<std::byte>(rng());
  if (t == DType::Bool)
    for (std::byte& b : x.bytes()) b &= std::byte{1};
  return x;
}

TEST_F(Npy, RoundTripEveryDtypeAndRank) {
  std::uint64_t seed = 7;
  for (DType t : {DType::F32, DType::F16, DType::F64, DType::I32, DType::I64, DType::Bool, DType::I8, DType::U8})
    for (const Shape& s : {Shape{}, Shape{5}, Shape{2, 3}, Shape{2, 1, 3, 4}, Shape{0, 3}}) {
      const Tensor x = random_tensor(t, s, seed++);
      write_npy(path("x.npy"), x);
      EXPECT_EQ(fs::file_size(path("x.npy")) % 16, (x.nbytes()) % 16);
      const Tensor y = read_npy(path("x.npy"));
      EXPECT_EQ(y, x) << dtype_name(t) << shape_str(s);
    }
}

// Found by fuzz_npy (UBSan: memcpy from the null data pointer of an empty tensor): an array with
// a zero dimension decodes, converts and encodes again; an empty file is an error, not UB.
TEST_F(Npy, EmptyArraysRoundTripAndEmptyFilesAreErrors) {
  write_raw("e.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (0, 5), }", 0);
  const Tensor e = read_npy(path("e.npy"));
  EXPECT_EQ(e.shape(), (Shape{0, 5}));
  EXPECT_TRUE(e.to_f64().empty());
  EXPECT_EQ(decode_npy(encode_npy(e), "again"), e);
  const Tensor f = Tensor::from_f32({0, 2}, std::vector<float>{}, DType::F32);
  EXPECT_EQ(Tensor::from_f64({0}, std::vector<double>{}, DType::F64).numel(), 0);
  EXPECT_EQ(decode_npy(encode_npy(f), "f").shape(), (Shape{0, 2}));
  std::ofstream(path("zero.npy"), std::ios::binary).close();
  EXPECT_THROW(read_npy(path("zero.npy")), GraphError);
}

TEST_F(Npy, HeaderIsNumpyV1) {
  const Tensor x = Tensor::from_f32({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  const auto bytes = encode_npy(x);
  const std::string head(reinterpret_cast<const char*>(bytes.data()), 128);
  EXPECT_EQ(head.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_NE(head.find("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"), std::string::npos);
  const std::size_t header_len = static_cast<std::size_t>(bytes[8]) | static_cast<std::size_t>(bytes[9]) << 8;
  EXPECT_EQ((10 + header_len) % 64, 0u);
  EXPECT_EQ(static_cast<char>(bytes[10 + header_len - 1]), '\n');
  EXPECT_EQ(bytes.size(), 10 + header_len + 24);
  float first = 0;
  std::memcpy(&first, bytes.data() + 10 + header_len, 4);
  EXPECT_EQ(first, 1.0f);
  const std::string one(reinterpret_cast<const char*>(encode_npy(Tensor::from_f32({4}, std::vector<float>(4))).data()), 64);
  EXPECT_NE(one.find("'shape': (4,)"), std::string::npos);
}

TEST_F(Npy, Bf16IsWrittenAsFloat32AndPrivateFormatsLogically) {
  const std::vector<float> v{1.5f, -2.0f, 3.25f, 0.0f};
  write_npy(path("b.npy"), Tensor::from_f32({4}, v, DType::BF16));
  const Tensor b = read_npy(path("b.npy"));
  EXPECT_EQ(b.dtype(), DType::F32);
  EXPECT_EQ(b.to_f32(), v);
  std::vector<float> w(1 * 3 * 2 * 2);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
  write_npy(path("p.npy"), convert_format(Tensor::from_f32({1, 3, 2, 2}, w, DType::F16), Format::NC1HWC0));
  const Tensor p = read_npy(path("p.npy"));
  EXPECT_EQ(p.shape(), (Shape{1, 3, 2, 2}));
  EXPECT_EQ(p.to_f32(), w);
}

TEST_F(Npy, ReadsHeadersWrittenByOthers) {
  write_raw("native.npy", "{'descr': '=i8', 'fortran_order': False, 'shape': (3, ), }", 24);
  EXPECT_EQ(read_npy(path("native.npy")).shape(), (Shape{3}));
  write_raw("bool.npy", "{'descr': '|b1', 'shape': (2, 2), 'fortran_order': False}", 4);
  EXPECT_EQ(read_npy(path("bool.npy")).dtype(), DType::Bool);
}

std::string error_reading(const std::string& p) {
  try {
    read_npy(p);
  } catch (const GraphError& e) {
    return e.what();
  }
  return "";
}

TEST_F(Npy, ErrorsNameTheFile) {
  EXPECT_NE(error_reading(path("missing.npy")).find("missing.npy: cannot open"), std::string::npos);
  std::ofstream(path("junk.npy")) << "hello world, not numpy";
  EXPECT_NE(error_reading(path("junk.npy")).find("junk.npy: not a .npy file"), std::string::npos);
  write_raw("big.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8);
  EXPECT_NE(error_reading(path("big.npy")).find("big.npy: unsupported .npy dtype '>f4'"), std::string::npos);
  write_raw("u16.npy", "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }", 4);
  EXPECT_NE(error_reading(path("u16.npy")).find("u16.npy: unsupported .npy dtype '<u2'"), std::string::npos);
  write_raw("u8.npy", "{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", 2);  // uint8 reads
  EXPECT_EQ(read_npy(path("u8.npy")).dtype(), DType::U8);
  write_raw("fort.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16);
  EXPECT_NE(error_reading(path("fort.npy")).find("fort.npy: Fortran-ordered"), std::string::npos);
  write_raw("short.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", 12);
  EXPECT_NE(error_reading(path("short.npy")).find("short.npy: .npy data has 12 bytes"), std::string::npos)
      << error_reading(path("short.npy"));
  write_raw("noshape.npy", "{'descr': '<f4', 'fortran_order': False}", 4);
  EXPECT_NE(error_reading(path("noshape.npy")).find("noshape.npy: .npy header has no 'shape'"), std::string::npos);
  EXPECT_THROW(write_npy((dir_ / "no/such/dir/x.npy").string(), Tensor::from_f32({1}, std::vector<float>{1})),
               GraphError);
}

// The header is ASCII text by the format's definition: any other byte is bad input named by its
// offset, and no raw byte of the file reaches the message (a message is shown and written as JSON).
TEST_F(Npy, NonAsciiHeaderByteIsNamedNotQuoted) {
  const Tensor x = Tensor::from_f32({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  for (const unsigned char bad : {0xe2u, 0x80u, 0x01u, 0xffu}) {
    auto bytes = encode_npy(x);
    bytes[20] = static_cast<std::byte>(bad);  // inside "'descr': '<f4'"
    try {
      decode_npy(bytes, "t.npy");
      ADD_FAILURE() << "accepted byte " << static_cast<int>(bad);
    } catch (const GraphError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(fmt::format("not ASCII text (byte 0x{:02x} at offset 20)", bad)), std::string::npos) << m;
      for (const char c : m) EXPECT_LT(static_cast<unsigned char>(c), 0x80u) << m;
    }
  }
}

}  // namespace
}  // namespace probelab::graph
