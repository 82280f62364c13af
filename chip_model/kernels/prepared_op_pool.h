// The prepared ops (op_runner.h: PreparedOp) of a simulation's chips, by args block: a
// PreparedOp is a pure function of the block's bytes, so the chips of a data-parallel job, whose
// runtimes write the same blocks, share one op and its tile plans, and one copy of the block to
// recognise it by, instead of each keeping its own (at hundreds of ranks the copies are what the
// AI cores' working set is made of). Single threaded, like the SystemC kernel that calls it;
// bounded (a full pool starts over; the entries already handed out stay valid).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "chip_model/kernels/op_runner.h"

namespace probelab::chip::kernels {

class PreparedOpPool {
 public:
  static constexpr std::size_t kMaxOps = 16384;

  /// An args block and its op. Immutable.
  struct Entry {
    std::vector<std::byte> bytes;
    std::shared_ptr<const PreparedOp> op;
  };
  /// `block` decoded and validated (spec::decode_op_args), without a pool. Throws spec::OpArgsError.
  static std::shared_ptr<const Entry> make(std::span<const std::byte> block);

  /// The entry of `block`: made on first sight, then shared. Throws spec::OpArgsError for a bad
  /// block (nothing is kept).
  std::shared_ptr<const Entry> get(std::span<const std::byte> block);
  std::size_t size() const { return entries_.size(); }

 private:
  /// Lexicographic order of byte strings.
  struct ByBytes {
    bool operator()(std::span<const std::byte> a, std::span<const std::byte> b) const;
  };
  std::map<std::span<const std::byte>, std::shared_ptr<const Entry>, ByBytes> entries_;  // keys: the entries' bytes
};

}  // namespace probelab::chip::kernels
