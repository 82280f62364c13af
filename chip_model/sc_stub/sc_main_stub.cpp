// libsystemc.so references sc_main(); every probelab executable has its own main() and starts
// simulations itself, so this definition only satisfies the linker and is never called.
#include <cstdio>
#include <cstdlib>

int sc_main(int, char**) {
  std::fputs("probelab: sc_main must not be reached (executables provide their own main)\n", stderr);
  std::abort();
}
