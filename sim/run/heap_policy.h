// Process-wide heap settings of the probelab executables (the CLI and the benchmarks) for the C
// library's heap, when it is the process's allocator (CMake PROBELAB_ALLOCATOR=system, and the
// sanitizer builds); by default mimalloc serves them and keeps freed segments for reuse itself,
// and these settings go to a heap nothing allocates from. A library embedded in another process
// (the Python module) leaves that process's heap alone.
#pragma once

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

}  // namespace probelab::sim
