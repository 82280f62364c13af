// The executables' heap: mimalloc serves every allocation of the process (PROBELAB_ALLOCATOR
// mimalloc, the default); with the C library's heap, freed multi-megabyte blocks stay in the heap
// for reuse.
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#ifdef PROBELAB_MIMALLOC
#include <mimalloc.h>
#endif

#include "sim/run/heap_policy.h"

namespace probelab::sim {
namespace {

#ifdef PROBELAB_MIMALLOC
// Linked as the executables are: malloc, operator new and the C++ library's containers get their
// memory from mimalloc, small and tensor-sized alike.
TEST(HeapPolicy, MimallocServesMallocAndNew) {
  void* small = std::malloc(48);
  void* large = std::malloc(std::size_t{8} << 20);
  auto object = std::make_unique<std::string>(100, 'x');
  std::vector<float> tensor(1 << 20);
  EXPECT_TRUE(mi_is_in_heap_region(small));
  EXPECT_TRUE(mi_is_in_heap_region(large));
  EXPECT_TRUE(mi_is_in_heap_region(object.get()));
  EXPECT_TRUE(mi_is_in_heap_region(object->data()));
  EXPECT_TRUE(mi_is_in_heap_region(tensor.data()));
  int on_stack = 0;
  EXPECT_FALSE(mi_is_in_heap_region(&on_stack));
  std::free(small);
  std::free(large);
}
#endif

TEST(HeapPolicy, TensorSizedBlocksComeFromTheHeapAndStayThere) {
  ASSERT_TRUE(keep_freed_memory());
#ifdef PROBELAB_MIMALLOC
  GTEST_SKIP() << "mimalloc serves this process: the C library's heap settings do not apply";
#endif
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
