#include "chip_model/kernels/prepared_op_pool.h"

#include <algorithm>

#include "chip_model/spec/op_args.h"

namespace probelab::chip::kernels {

bool PreparedOpPool::ByBytes::operator()(std::span<const std::byte> a, std::span<const std::byte> b) const {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
}

std::shared_ptr<const PreparedOpPool::Entry> PreparedOpPool::make(std::span<const std::byte> block) {
  auto op = std::make_shared<const PreparedOp>(spec::decode_op_args(block.data(), block.size()));
  return std::make_shared<const Entry>(Entry{std::vector<std::byte>(block.begin(), block.end()), std::move(op)});
}

std::shared_ptr<const PreparedOpPool::Entry> PreparedOpPool::get(std::span<const std::byte> block) {
  if (const auto it = entries_.find(block); it != entries_.end()) return it->second;
  std::shared_ptr<const Entry> e = make(block);
  if (entries_.size() >= kMaxOps) entries_.clear();
  entries_.emplace(std::span<const std::byte>(e->bytes), e);
  return e;
}

}  // namespace probelab::chip::kernels
