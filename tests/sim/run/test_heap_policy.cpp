// The executables' heap: mimalloc serves every allocation of the process (PROBELAB_ALLOCATOR
// mimalloc, the default) from segments on transparent huge pages; with the C library's heap,
// freed multi-megabyte blocks stay in the heap for reuse.
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
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

/// The VmFlags of the mapping of this process that holds `p` ("" if none does).
std::string vm_flags_of(const void* p) {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= addr && addr < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

// Every heap segment is advised for transparent huge pages ("hg"), the first one (mapped before
// main() for the libraries' start-up allocations, where small blocks come from) included.
TEST(HeapPolicy, HeapSegmentsAreAdvisedForHugePages) {
  if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled"))
    GTEST_SKIP() << "this kernel has no transparent huge pages";
  EXPECT_TRUE(mi_option_is_enabled(mi_option_large_os_pages));
  EXPECT_TRUE(prefer_huge_pages());
  void* small = std::malloc(48);
  std::vector<std::byte> tensor(std::size_t{64} << 20);
  EXPECT_NE(vm_flags_of(small).find(" hg"), std::string::npos) << vm_flags_of(small);
  EXPECT_NE(vm_flags_of(tensor.data()).find(" hg"), std::string::npos) << vm_flags_of(tensor.data());
  int on_stack = 0;
  EXPECT_EQ(vm_flags_of(&on_stack).find(" hg"), std::string::npos) << "the stack is advised too, so this check tells nothing";
  std::free(small);
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
