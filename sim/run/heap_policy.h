// Process-wide heap settings of the probelab executables (the CLI and the benchmarks) for the C
// library's heap, when it is the process's allocator (CMake PROBELAB_ALLOCATOR=system, and the
// sanitizer builds); by default mimalloc serves them and keeps freed segments for reuse itself,
// and these settings go to a heap nothing allocates from. A library embedded in another process
// (the Python module) leaves that process's heap alone.
#pragma once

#ifdef PROBELAB_MIMALLOC
#include <mimalloc.h>
#endif

namespace probelab::sim {

/// Keeps freed memory in the process for reuse instead of handing it back to the kernel after each
/// large tensor. A simulated step allocates and frees every operand and result of every op
/// (megabytes each at the bundled models' sizes); with glibc's defaults, blocks above an adaptive
/// threshold are mapped and unmapped one by one and a freed heap top is trimmed, so each step pays
/// page faults and page zeroing for memory it has just released, and how much depends on the
/// order of earlier frees. Sets M_MMAP_THRESHOLD to 32 MiB (glibc's upper limit; larger blocks are
/// still mapped) and M_TRIM_THRESHOLD to 256 MiB. Changes no result. Returns false when the C
/// library refused a setting (its defaults then stay in force).
bool keep_freed_memory();

/// Asks mimalloc, where it serves the process (PROBELAB_MIMALLOC: defined for the executables that
/// link it, so this is inline and compiled there; sim/heap_preinit.cpp calls it before the shared
/// libraries start), to back the heap segments it maps from then on with 2 MiB transparent huge
/// pages (madvise; an explicit hugetlbfs page is tried first and silently given up where none is
/// reserved). A job of hundreds of ranks touches hundreds of megabytes of small objects, operands
/// and HBM pages per step, spread over far more 4 KiB pages than the TLB holds: on huge pages a
/// 256-rank step (BM_RankScaling) takes a sixth less host time, its setup a fifth less. Costs a
/// few megabytes of resident memory. Changes no result. Returns whether the option is in force
/// (false with the C library's heap, whose settings are keep_freed_memory's).
inline bool prefer_huge_pages() {
#ifdef PROBELAB_MIMALLOC
  mi_option_enable(mi_option_large_os_pages);
  return mi_option_is_enabled(mi_option_large_os_pages);
#else
  return false;
#endif
}

}  // namespace probelab::sim
