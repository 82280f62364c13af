// `bitflip`: single or multi-bit flips in HBM (a tensor's element at a cycle), in an AI core's
// on-chip buffers (L1, L0A, L0B, UB) or in the Cube accumulator (L0C) while an op runs.
#include <fmt/format.h>

#include "chip_model/spec/registers.h"
#include "injectors/injector.h"
#include "injectors/site.h"

namespace probelab::inject {
namespace {

const std::vector<std::string> kTargets = {"hbm", "l1", "l0a", "l0b", "l0c", "accumulator", "ub"};

chip::CoreBuffer buffer_of(const std::string& t) {
  if (t == "l1") return chip::CoreBuffer::L1;
  if (t == "l0a") return chip::CoreBuffer::L0A;
  if (t == "l0b") return chip::CoreBuffer::L0B;
  if (t == "ub") return chip::CoreBuffer::UB;
  return chip::CoreBuffer::L0C;  // l0c, accumulator
}

class BitflipInjector final : public Injector {
 public:
  BitflipInjector(const Params& p, const InjectionEnv& env) : env_(env) {
    graph_ = env.executed;
    seed_ = read_seed(p, env);
    target_ = p.choice("target", kTargets);
    for (auto b : p.int_list("bits")) {
      if (b < 0 || b > 63) p.fail("bits", fmt::format("bit {} is outside 0..63", b));
      bits_.push_back(static_cast<unsigned>(b));
    }
    if (bits_.empty()) p.fail("bits", "name at least one bit");
    if (target_ == "hbm") {
      if (!p.has("tensor")) p.fail("tensor", "target hbm needs the tensor whose element is flipped");
      if (!p.has("cycle")) p.fail("cycle", "target hbm needs the device cycle of the flip");
      tensor_ = p.str("tensor");
      if (env.executed && !env.executed->find_tensor(tensor_))
        p.fail("tensor", fmt::format("no tensor '{}' in the executed graph", tensor_));
      element_ = p.uinteger("element");
      if (env.executed) {
        const auto n = static_cast<std::uint64_t>(graph::numel(env.executed->tensor(tensor_).desc.shape));
        if (element_ >= n) p.fail("element", fmt::format("tensor '{}' has {} elements", tensor_, n));
      }
      cycle_ = p.uinteger("cycle");
      ranks_ = p.index_set("rank");
      if (p.str("op") != "*") p.fail("op", "target hbm is located by tensor and cycle, not by op");
    } else {
      site_ = read_site(p, env.executed, env.ranks, env.steps);
      byte_ = p.uinteger("byte");
      if (p.has("tensor") || p.has("cycle")) p.fail(p.has("tensor") ? "tensor" : "cycle", "only used with target hbm");
    }
  }

  std::uint32_t sites() const override {
    return target_ == "hbm" ? chip::kFaultHbmWord : chip::kFaultCoreBuffer;
  }

  std::vector<chip::HbmFaultPoint> hbm_fault_schedule(std::uint32_t rank) override {
    if (target_ != "hbm" || !ranks_.contains(rank)) return {};
    std::optional<TensorPlacement> where;
    if (env_.placement) where = env_.placement(rank, tensor_);
    if (!where) throw InjectorError(fmt::format("bitflip: placement of tensor '{}' on rank {} is unknown", tensor_, rank));
    const auto esize = graph::dtype_size(where->desc.dtype);
    for (auto b : bits_) {
      if (b >= esize * 8)
        throw InjectorError(fmt::format("bitflip: bit {} is outside a {} element of '{}'", b,
                                        graph::dtype_name(where->desc.dtype), tensor_));
    }
    const std::uint64_t addr = where->addr + element_ * esize;
    const std::uint64_t word = addr & ~std::uint64_t{7};
    shift_[rank] = static_cast<unsigned>((addr - word) * 8);
    dtype_[rank] = where->desc.dtype;
    return {{cycle_, word}};
  }

  void on_hbm_word(const chip::FaultSite& s, std::uint64_t addr, std::uint64_t& word) override {
    auto it = shift_.find(s.rank);
    if (it == shift_.end()) return;
    const auto before = word;
    for (auto b : bits_) word ^= std::uint64_t{1} << (it->second + b);
    const auto dt = dtype_[s.rank];
    const auto mask = graph::dtype_size(dt) == 8 ? ~std::uint64_t{0} : ((std::uint64_t{1} << (graph::dtype_size(dt) * 8)) - 1);
    record({s, "", fmt::format("hbm 0x{:x} tensor {} element {} bits [{}]", addr, tensor_, element_, fmt::join(bits_, ", ")),
            hex_bits((before >> it->second) & mask, dt), hex_bits((word >> it->second) & mask, dt)});
  }

  void on_core_buffer(const chip::FaultSite& s, chip::CoreBuffer which, std::span<std::byte> bytes) override {
    if (target_ == "hbm" || which != buffer_of(target_) || bytes.empty() || !site_.matches(s)) return;
    const auto key = std::make_tuple(s.rank, s.step, s.op_id);
    if (done_.count(key)) return;  // once per op execution
    done_.insert(key);
    const std::size_t at = byte_ % bytes.size();
    std::uint64_t before = 0, after = 0;
    const std::size_t n = std::min<std::size_t>(8, bytes.size() - at);
    std::memcpy(&before, bytes.data() + at, n);
    after = before;
    for (auto b : bits_) {
      if (b < n * 8) after ^= std::uint64_t{1} << b;
    }
    std::memcpy(bytes.data() + at, &after, n);
    record({s, op_name(s.op_id), fmt::format("{} byte {} bits [{}]", target_, at, fmt::join(bits_, ", ")),
            fmt::format("0x{:0{}x}", before, n * 2), fmt::format("0x{:0{}x}", after, n * 2)});
  }

 private:
  InjectionEnv env_;
  std::string target_;
  std::vector<unsigned> bits_;
  // hbm
  std::string tensor_;
  std::uint64_t element_ = 0, cycle_ = 0;
  IndexSet ranks_;
  std::map<std::uint32_t, unsigned> shift_;
  std::map<std::uint32_t, graph::DType> dtype_;
  // buffers
  SiteFilter site_;
  std::uint64_t byte_ = 0;
  std::set<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> done_;
};

}  // namespace

void register_bitflip_injector(InjectorRegistry& r) {
  auto ps = site_params("*", "0", "0");
  ps[0].doc = "op name glob whose execution sees the flipped buffer (buffer targets)";
  ps.push_back({"target", "hbm|l1|l0a|l0b|l0c|accumulator|ub", "", "where the bits flip"});
  ps.push_back({"bits", "int | list of int", "[0]", "bit positions within the element (hbm) or the 8-byte word at `byte`"});
  ps.push_back({"tensor", "tensor name", "required (hbm)", "hbm: tensor whose element is flipped"});
  ps.push_back({"element", "int", "0", "hbm: row-major element index in the tensor"});
  ps.push_back({"cycle", "int", "required (hbm)",
                "hbm: device cycle at which the word is flipped (campaigns draw it: `cycle: live|any`)"});
  ps.push_back({"byte", "int", "0", "buffers: byte offset in the buffer contents (modulo their size)"});
  ps.push_back(seed_param());
  r.add({"bitflip", "single or multi-bit flips in HBM, on-chip buffers (L1/L0/UB) or the Cube accumulator",
         std::move(ps), [](const Params& p, const InjectionEnv& env) { return std::make_unique<BitflipInjector>(p, env); }});
}

}  // namespace probelab::inject
