// probelab command-line entry point (placeholder until the CLI lands).
#include <cstdio>
int main() {
  std::puts("probelab: no subcommands yet");
  return 0;
}
