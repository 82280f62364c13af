// JsonMembers (sim/run/json_members.h) builds the report's per-op, per-step and per-rank objects:
// the object it makes must be the one an initializer list makes, whatever order the members come
// in, with nested objects and arrays moved in intact.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/run/json_members.h"

namespace probelab::sim {
namespace {

using nlohmann::json;

TEST(JsonMembers, MakesTheObjectAnInitializerListMakes) {
  const json nested = {{"b", 2}, {"a", {1.5, "x", nullptr}}};
  const json expected = {{"bound", "memory"}, {"cycles", 12}, {"nested", nested}, {"op", "fc1/matmul"}, {"rank", 3}};
  JsonMembers m;
  m.put("bound", "memory").put("cycles", 12).put("nested", nested).put("op", "fc1/matmul").put("rank", 3);
  const json got = m.done();
  EXPECT_EQ(got, expected);
  EXPECT_EQ(got.dump(), expected.dump());
  EXPECT_TRUE(m.done().empty());  // left empty
}

TEST(JsonMembers, MembersOutOfKeyOrderStillLandInPlace) {
  std::vector<std::string> keys;
  for (int i = 0; i < 40; ++i) keys.push_back("k" + std::to_string(i * 37 % 101));
  std::mt19937 gen(5);
  for (int trial = 0; trial < 20; ++trial) {
    std::shuffle(keys.begin(), keys.end(), gen);
    json expected = json::object();
    JsonMembers m;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      expected[keys[i]] = i;
      m.put(keys[i].c_str(), i);
    }
    const json got = m.done();
    ASSERT_EQ(got.dump(), expected.dump()) << "trial " << trial;
  }
}

}  // namespace
}  // namespace probelab::sim
