// Chip kernel of RNN, GRU and LSTM: a composition of Cube GEMMs and Vector work, step by step.
//  - Cube: X @ W^T for the whole sequence of each direction (one GEMM, k ascending from +0, the
//    op's accumulation mode), then per step H(t-1) @ R^T (timed as a chain: work() below). The Cube reads the hidden state in the
//    operands' dtype: H is rounded to it (through the Mode) before each product, as a separate
//    MatMul op reading the previous step's stored output would.
//  - Vector, in FP32: biases, peepholes, clip, activations and the state updates; the cell state C
//    stays in FP32 in the Unified Buffer. Outputs Y, Y_h, Y_c leave through the output conversion.
// The cell equations are graph's (graph/ops/recurrent.h), so the chip and the CPU reference differ
// only in the products' arithmetic and the hidden state's rounding. Accumulation flags of every
// GEMM are reported at the Y element of the same step, batch row and hidden unit.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <stdexcept>

#include "chip_model/kernels/cube_gemm.h"
#include "chip_model/kernels/kernel.h"
#include "chip_model/kernels/op_args_graph.h"
#include "chip_model/kernels/op_runner.h"
#include "graph/format.h"
#include "graph/ops/op_util.h"
#include "graph/ops/recurrent.h"
#include "numerics/bf16.h"
#include "numerics/fp16.h"

namespace probelab::chip::kernels {
namespace {

using graph::ops::CellKind;
using graph::ops::CellSpec;

std::vector<graph::Shape> input_shapes(const KernelCall& c) {
  std::vector<graph::Shape> s;
  for (const graph::Tensor* t : c.inputs) s.push_back(t ? t->shape() : graph::Shape{});
  return s;
}

const graph::Tensor& required(const KernelCall& c, std::size_t i) {
  if (i >= c.inputs.size() || !c.inputs[i])
    throw std::runtime_error(fmt::format("{} '{}': input {} is missing", c.op.type, c.op.name, i));
  return *c.inputs[i];
}

std::vector<float> f32_or_empty(const KernelCall& c, std::size_t i) {
  if (i >= c.inputs.size() || !c.inputs[i]) return {};
  return to_f32(*c.inputs[i], c.mode).to_f32();
}

/// The flags of a GEMM whose element index e maps to `index(e)`.
void merge_mapped(num::BulkReport& into, const num::BulkReport& r, const std::function<std::int64_t(std::int64_t)>& index) {
  for (int f = 0; f < num::kFlagCount; ++f)
    if (r.first[static_cast<std::size_t>(f)] >= 0)
      into.raise(num::Flags{static_cast<std::uint8_t>(1u << f)}, index(r.first[static_cast<std::size_t>(f)]));
}

class RecurrentKernel final : public Kernel {
 public:
  bool uses_cube(const spec::OpArgs&) const override { return true; }

  Computed compute(const KernelCall& c) const override {
    const CellSpec s = graph::ops::cell_spec(c.op, input_shapes(c));
    // The accumulation mode's input scaling applies to X, as to a MatMul's first operand.
    graph::Tensor scaled;
    if (c.accum.input_scale != 1.0) scaled = scale_tensor(required(c, 0), c.accum.input_scale, c.mode);
    const graph::Tensor& x = c.accum.input_scale != 1.0 ? scaled : required(c, 0);
    const graph::Tensor &w = required(c, 1), &r = required(c, 2);
    const graph::DType dt = w.dtype();
    const std::int64_t H = s.hidden, I = s.input, GH = s.gate_width(), B = s.batch, S = s.seq;
    // Y element of gate element (t, b, n) of direction dir (layouts as graph/ops/recurrent.h).
    auto y_index = [&](std::int64_t t, std::int64_t dir, std::int64_t b, std::int64_t n) {
      const std::int64_t h = n % H;
      return s.batch_first ? ((b * S + t) * s.dirs + dir) * H + h : ((t * s.dirs + dir) * B + b) * H + h;
    };
    num::BulkReport acc_flags;
    std::int64_t step_of_dir[2] = {0, 0};  // steps taken so far by each direction (hidden products)
    graph::ops::CellProducts<float> p;
    p.input_proj = [&](std::int64_t dir, std::vector<float>& xw) {
      std::vector<float> tmp(static_cast<std::size_t>(S * B * GH));
      const num::BulkReport rep = cube_gemm(S * B, GH, I, operand_of(x, 0, I, false), operand_of(w, dir * GH * I, I, true),
                                            tmp.data(), GH, c.accum, c.mode);
      // Rows of X are (t, b) with layout 0 and (b, t) with layout 1; xw wants (t, b).
      for (std::int64_t row = 0; row < S * B; ++row) {
        const std::int64_t t = s.batch_first ? row % S : row / B, b = s.batch_first ? row / S : row % B;
        std::copy_n(tmp.begin() + row * GH, GH, xw.begin() + (t * B + b) * GH);
      }
      merge_mapped(acc_flags, rep, [&](std::int64_t e) {
        const std::int64_t row = e / GH;
        const std::int64_t t = s.batch_first ? row % S : row / B, b = s.batch_first ? row / S : row % B;
        return y_index(t, dir, b, e % GH);
      });
      step_of_dir[dir] = 0;
    };
    p.hidden_proj = [&](std::int64_t dir, std::int64_t gate, std::int64_t count, const std::vector<float>& h,
                        std::vector<float>& out) {
      // The Cube reads H in the weights' dtype.
      std::vector<std::uint16_t> h16;
      CubeOperand a{dt, h.data(), H, false};
      if (dt == graph::DType::F16) {
        h16.resize(h.size());
        num::convert(h, std::span<num::f16>(reinterpret_cast<num::f16*>(h16.data()), h16.size()), c.mode);
        a.data = h16.data();
      } else if (dt == graph::DType::BF16) {
        h16.resize(h.size());
        num::convert(h, std::span<num::bf16>(reinterpret_cast<num::bf16*>(h16.data()), h16.size()), c.mode);
        a.data = h16.data();
      }
      const num::BulkReport rep = cube_gemm(B, count * H, H, a, operand_of(r, (dir * GH + gate * H) * H, H, true),
                                            out.data(), count * H, c.accum, c.mode);
      const std::int64_t step = step_of_dir[dir];
      if (gate + count == s.gates || (s.kind == CellKind::Gru && gate == 2)) ++step_of_dir[dir];
      merge_mapped(acc_flags, rep, [&](std::int64_t e) {
        const std::int64_t t = s.reverse_only || dir == 1 ? S - 1 - step : step;
        return y_index(std::clamp<std::int64_t>(t, 0, S - 1), dir, e / (count * H), e % (count * H));
      });
    };
    graph::ops::CellData<float> d;
    d.bias = f32_or_empty(c, 3);
    if (c.inputs.size() > 4 && c.inputs[4]) d.seq_lens = graph::ops::read_indices(*c.inputs[4]);
    d.initial_h = f32_or_empty(c, 5);
    if (s.kind == CellKind::Lstm) {
      d.initial_c = f32_or_empty(c, 6);
      d.peephole = f32_or_empty(c, 7);
    }
    graph::ops::run_cell(s, p, d);
    Computed out;
    std::vector<float>* res[] = {&d.y, &d.y_h, &d.y_c};
    for (std::size_t o = 0; o < c.outputs.size() && o < 3; ++o) out.values.emplace_back(res[o]->begin(), res[o]->end());
    out.flags.resize(out.values.size());
    if (!out.flags.empty()) out.flags[0] = acc_flags;
    return out;
  }

  OpWork work(const KernelCall& c) const override {
    const CellSpec s = graph::ops::cell_spec(c.op, input_shapes(c));
    const std::int64_t GH = s.gate_width();
    OpWork w;
    GemmWork xw;  // the input products of every direction
    xw.count = s.dirs;
    xw.m = s.seq * s.batch, xw.n = GH, xw.k = s.input;
    // The hidden products form a chain (step t reads the state step t-1 wrote): timed as one
    // accumulation per direction over K = seq * hidden, whose K steps the Cube runs in sequence,
    // while the gate columns still spread over the cores.
    GemmWork hr = xw;
    hr.count = s.dirs;
    hr.m = s.batch, hr.k = s.seq * s.hidden;
    for (GemmWork* g : {&xw, &hr}) {
      g->in_bytes = static_cast<std::uint32_t>(graph::dtype_size(required(c, 1).dtype()));
      g->b_distinct = s.dirs;
    }
    xw.a_unique_bytes = graph::physical_nbytes(stored_desc(c.args.inputs[0]));
    xw.b_unique_bytes = graph::physical_nbytes(stored_desc(c.args.inputs[1]));
    xw.a_addr = c.args.inputs[0].addr, xw.b_addr = c.args.inputs[1].addr;
    hr.a_unique_bytes = static_cast<std::uint64_t>(s.batch * s.hidden) * hr.in_bytes;
    hr.b_unique_bytes = graph::physical_nbytes(stored_desc(c.args.inputs[2]));
    hr.a_addr = c.args.outputs.at(0).addr, hr.b_addr = c.args.inputs[2].addr;
    w.gemms = {xw, hr};
    w.flops = 2ull * static_cast<std::uint64_t>(xw.count * xw.m * xw.n * xw.k + hr.count * hr.m * hr.n * hr.k);  // same MACs
    // Gate arithmetic and activations: about four Vector passes per gate element.
    w.vector_elems = static_cast<std::uint64_t>(s.dirs * s.seq * s.batch * GH);
    w.vector_passes = 4;
    for (std::size_t i = 0; i < c.args.inputs.size(); ++i)
      if (c.args.inputs[i].dtype != spec::kAbsentTensor) w.in_bytes += graph::physical_nbytes(stored_desc(c.args.inputs[i]));
    for (const auto& o : c.args.outputs) w.out_bytes += graph::physical_nbytes(stored_desc(o));
    w.in_addr = c.args.inputs.at(0).addr;
    w.out_addr = c.args.outputs.at(0).addr;
    w.out_elem_bytes = static_cast<std::uint32_t>(graph::dtype_size(c.outputs[0].dtype));
    return w;
  }
};

}  // namespace

void register_recurrent_kernels(KernelRegistry& r) {
  for (const char* type : {"RNN", "GRU", "LSTM"}) r.add(type, std::make_unique<RecurrentKernel>());
}

}  // namespace probelab::chip::kernels
