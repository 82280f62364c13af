// A simulation's result crosses from the child process as MessagePack (sim/run/result_codec.h)
// and must read back as its JSON text would: the same values and types, numbers JSON has no text
// for as null, a binary value as the object the text shows, and bytes that are not a result are
// an error, not a partial result.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "sim/run/result_codec.h"

namespace probelab::sim {
namespace {

using nlohmann::json;

json sample_result() {
  json r = {{"status", "ok"},
            {"loss", {0.5, -0.0, 2.0, 1e300, 4.9e-324, 0.1, std::numeric_limits<double>::quiet_NaN(),
                      std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()}},
            {"counts", {std::int64_t{-5}, std::int64_t{7}, std::uint64_t{18'446'744'073'709'551'615u}, 0}},
            {"name", "r\xc3\xa9sum\xc3\xa9 \"quoted\"\n"},
            {"nested", {{"empty_object", json::object()}, {"empty_array", json::array()}, {"null", nullptr},
                        {"flag", true}}},
            {"blob", json::binary({1, 2, 3})}};
  std::mt19937_64 gen(7);
  json many = json::array();
  for (int i = 0; i < 2000; ++i) {
    const std::uint64_t bits = gen();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    many.push_back(i % 2 ? json(d) : json(static_cast<std::int64_t>(bits)));
  }
  r["many"] = many;
  return r;
}

TEST(ResultCodec, ReadsBackAsItsTextWould) {
  const json r = sample_result();
  const json expected = json::parse(r.dump());
  const json got = decode_result(encode_result(r));
  EXPECT_EQ(got.dump(), expected.dump());
  EXPECT_EQ(got, expected);
  // Types, not only text: a positive integer reads back unsigned, a float stays a float.
  EXPECT_TRUE(got["loss"][2].is_number_float());
  EXPECT_TRUE(got["counts"][1].is_number_unsigned());
  EXPECT_TRUE(got["counts"][0].is_number_integer());
  EXPECT_TRUE(got["loss"][6].is_null());
  EXPECT_TRUE(std::signbit(got["loss"][1].get<double>()));
  EXPECT_TRUE(got["blob"].is_object());
}

TEST(ResultCodec, InPlaceFormIsTheSame) {
  json r = sample_result();
  as_text_would_read(r);
  EXPECT_EQ(r.dump(), json::parse(sample_result().dump()).dump());
}

TEST(ResultCodec, BytesThatAreNotAResultAreAnError) {
  std::vector<std::uint8_t> bytes = encode_result(sample_result());
  bytes.resize(bytes.size() / 2);
  EXPECT_THROW(decode_result(bytes), json::exception);
  EXPECT_THROW(decode_result(std::vector<std::uint8_t>{}), json::exception);
}

}  // namespace
}  // namespace probelab::sim
