// Entry point of every test binary. Defined here (not taken from gtest_main) so that the
// main() exported by the SystemC shared library can never be picked by the linker instead.
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
