// The CLI's heap settings: freed multi-megabyte blocks stay in the heap for reuse.
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstddef>
#include <memory>

#include "sim/run/heap_policy.h"

namespace probelab::sim {
namespace {

TEST(HeapPolicy, TensorSizedBlocksComeFromTheHeapAndStayThere) {
  ASSERT_TRUE(keep_freed_memory());
  const std::size_t mapped_before = mallinfo2().hblkhd;
  constexpr std::size_t kBlock = std::size_t{8} << 20;  // above glibc's default 128 KiB .. 32 MiB threshold
  auto block = std::make_unique_for_overwrite<std::byte[]>(kBlock);
  block[0] = std::byte{1};
  EXPECT_EQ(mallinfo2().hblkhd, mapped_before) << "an 8 MiB block was mapped on its own";
  block.reset();
  // Freed, it stays with the process: the heap does not shrink below what the block occupied.
  EXPECT_GE(mallinfo2().arena, kBlock);
}

}  // namespace
}  // namespace probelab::sim
