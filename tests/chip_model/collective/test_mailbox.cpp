// The mailbox of messages that arrived before their receive: lookup by key in any order, a
// duplicate key rejected, storage reused without disturbing a message just taken.
#include <gtest/gtest.h>

#include <cstdint>

#include "chip_model/collective/mailbox.h"

namespace probelab::chip {
namespace {

Message message(std::uint32_t seq, std::uint32_t step, std::uint32_t src_pos, std::uint32_t marker) {
  Message m;
  m.key = {7, seq, step, src_pos};
  m.src = marker;
  return m;
}

TEST(Mailbox, TakesInOrderAndOutOfOrder) {
  Mailbox box;
  EXPECT_TRUE(box.empty());
  EXPECT_EQ(box.take({7, 0, 0, 1}), nullptr);
  ASSERT_TRUE(box.put(message(0, 2, 1, 102)));
  ASSERT_TRUE(box.put(message(0, 0, 1, 100)));  // arrives after a later key
  ASSERT_TRUE(box.put(message(1, 0, 1, 200)));
  ASSERT_TRUE(box.put(message(0, 1, 1, 101)));
  EXPECT_EQ(box.take({7, 0, 3, 1}), nullptr);
  Message* a = box.take({7, 0, 0, 1});
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->src, 100u);
  Message* c = box.take({7, 1, 0, 1});  // not the front
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->src, 200u);
  EXPECT_EQ(box.take({7, 1, 0, 1}), nullptr);  // taken once
  Message* b = box.take({7, 0, 1, 1});
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->src, 101u);
  EXPECT_FALSE(box.empty());
  Message* d = box.take({7, 0, 2, 1});
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->src, 102u);
  EXPECT_TRUE(box.empty());
}

TEST(Mailbox, RejectsADuplicateKey) {
  Mailbox box;
  ASSERT_TRUE(box.put(message(0, 0, 1, 1)));
  ASSERT_TRUE(box.put(message(0, 1, 1, 2)));
  Message dup = message(0, 0, 1, 3);
  EXPECT_FALSE(box.put(std::move(dup)));
  EXPECT_EQ(dup.src, 3u);  // untouched
  EXPECT_EQ(box.take({7, 0, 0, 1})->src, 1u);
}

TEST(Mailbox, ManyWaitingThenTakenInOrder) {
  Mailbox box;
  for (std::uint32_t step = 0; step < 200; ++step) ASSERT_TRUE(box.put(message(0, step, 3, step)));
  for (std::uint32_t step = 0; step < 200; ++step) {
    Message* m = box.take({7, 0, step, 3});
    ASSERT_NE(m, nullptr) << step;
    EXPECT_EQ(m->src, step);
    // A message taken stays intact while the next one waits in another slot.
    if (step + 1 < 200) {
      EXPECT_EQ(box.take({7, 0, step, 3}), nullptr);
    }
  }
  EXPECT_TRUE(box.empty());
  ASSERT_TRUE(box.put(message(2, 0, 3, 9)));
  EXPECT_EQ(box.take({7, 2, 0, 3})->src, 9u);
}

}  // namespace
}  // namespace probelab::chip
