// The fast FP16-accumulation tile (gemm_f16acc_tile.h) compiled for AVX-512VL (this file's own
// compile options, numerics/CMakeLists.txt): the same 256-bit operations with 32 registers, so that
// midpoint steps are redone inside the step loop. Called only when the CPU has AVX-512 (gemm_isa()).
#include "numerics/detail/gemm_f16acc_tile.h"

namespace probelab::num::detail {

const F16accTiles& f16acc_tiles_avx512() {
  static const F16accTiles tiles = make_tiles<true>();
  return tiles;
}

}  // namespace probelab::num::detail
