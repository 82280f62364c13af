// libsystemc.so references sc_main(); every probelab executable has its own main() and starts
// simulations itself, so this definition only satisfies the linker and is never called.
#include <cstdio>
#include <cstdlib>

// SystemC declares it extern "C" (sysc/kernel/sc_externs.h); a C++-linkage definition would not
// resolve libsystemc.so's reference. Default visibility: in a shared module built with hidden
// visibility (the Python extension) libsystemc.so must still find it when the module is loaded.
extern "C" __attribute__((visibility("default"))) int sc_main(int, char**) {
  std::fputs("probelab: sc_main must not be reached (executables provide their own main)\n", stderr);
  std::abort();
}
