// Linked into every executable that links mimalloc (an object the probelab_allocator target adds
// to each, not part of a library): an ELF pre-initializer (DT_PREINIT_ARRAY, honoured in
// executables only) that applies sim::prefer_huge_pages before any shared library's constructor
// runs, so the heap's first segment, which mimalloc maps for the libraries' own start-up
// allocations, gets huge pages like every later one.
#include "sim/run/heap_policy.h"

namespace {

void before_libraries(int /*argc*/, char** /*argv*/, char** /*envp*/) { probelab::sim::prefer_huge_pages(); }

[[gnu::section(".preinit_array"), gnu::used]] void (*const preinit)(int, char**, char**) = before_libraries;

}  // namespace
