// Owner of the precompiled header every test binary reuses (cmake/ProbelabHelpers.cmake,
// PROBELAB_PCH): built, never run.
int main() { return 0; }
