// Recurrent layers as ONNX defines them (opset 14): RNN, GRU and LSTM. One cell loop serves the
// CPU reference and the chip kernel: the two matrix products of every step (inputs times W^T for
// the whole sequence, the hidden state times R^T per step) are callbacks, so the reference
// computes them with plain loops and the chip on the Cube; everything else (biases, peepholes,
// clip, activations, state updates, sequence lengths, directions, layouts) is this file.
//
// Gate order of W, R and B as ONNX stores them: RNN i; GRU z, r, h; LSTM i, o, f, c (peepholes P:
// i, o, f). Inputs: X, W, R, B?, sequence_lens?, initial_h?, (LSTM) initial_c?, P?. Outputs, any
// leading subset: Y, Y_h, (LSTM) Y_c. layout 0: X [seq, batch, input], Y [seq, dirs, batch, hidden],
// Y_h [dirs, batch, hidden]; layout 1: X [batch, seq, input], Y [batch, seq, dirs, hidden],
// Y_h [batch, dirs, hidden]. Steps at or beyond a batch element's sequence length leave its state
// unchanged and write zeros to Y; the reverse direction starts at the element's last step.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graph/op.h"
#include "graph/tensor.h"
#include "numerics/elementary.h"

namespace probelab::graph::ops {

enum class CellKind { Rnn, Gru, Lstm };

/// One activation of the `activations` attribute with its alpha and beta.
struct CellActivation {
  enum Kind { Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus };
  Kind kind = Sigmoid;
  double alpha = 0, beta = 0;
  template <class T> T operator()(T x) const {
    const T a = static_cast<T>(alpha), b = static_cast<T>(beta);
    switch (kind) {
      case Sigmoid: return T(1) / (T(1) + num::exp(-x));
      case Tanh: return num::tanh(x);
      case Relu: return std::max(x, T(0));
      case Affine: return a * x + b;
      case LeakyRelu: return x < T(0) ? a * x : x;
      case ThresholdedRelu: return x > a ? x : T(0);
      case ScaledTanh: return a * num::tanh(b * x);
      case HardSigmoid: return std::max(T(0), std::min(T(1), a * x + b));
      case Elu: return x < T(0) ? a * (num::exp(x) - T(1)) : x;
      case Softsign: return x / (T(1) + std::abs(x));
      case Softplus: break;
    }
    return num::log(T(1) + num::exp(x));
  }
};

/// Geometry and attributes of one recurrent op, checked against its input shapes.
struct CellSpec {
  CellKind kind = CellKind::Lstm;
  std::int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  int gates = 4;                // 1, 3, 4
  bool reverse_only = false;    // direction: reverse
  bool batch_first = false;     // layout 1
  bool input_forget = false;    // LSTM: f = 1 - i
  bool linear_before_reset = false;  // GRU
  bool has_clip = false;
  double clip = 0;
  std::vector<CellActivation> acts;  // per direction: 1 (RNN), 2 (GRU) or 3 (LSTM) functions
  std::int64_t gate_width() const { return gates * hidden; }
};

/// The recurrent kind of an op type ("RNN", "GRU", "LSTM").
CellKind cell_kind(const std::string& type);
/// Reads and checks the op's attributes and the shapes of X, W, R (and of the optional inputs
/// that are present); throws GraphError naming the op and what is wrong.
CellSpec cell_spec(const Op& op, const std::vector<Shape>& in_shapes);

/// The matrix products of a cell loop, computed by the caller, in T:
///  - input_proj(dir, xw): xw[(t * batch + b) * G*H + n] = sum_k X[t, b, k] * W[dir, n, k] for every
///    step t (in time order, whatever the layout);
///  - hidden_proj(dir, gate, count, h, out): out[b * count*H + n] = sum_k h[b * H + k] *
///    R[dir, gate*H + n, k] for n < count*H (the gates [gate, gate + count) of R).
template <class T>
struct CellProducts {
  std::function<void(std::int64_t dir, std::vector<T>& xw)> input_proj;
  std::function<void(std::int64_t dir, std::int64_t gate, std::int64_t count, const std::vector<T>& h,
                     std::vector<T>& out)>
      hidden_proj;
};

/// Values of the optional inputs in T (empty when absent) and the outputs the op asks for.
template <class T>
struct CellData {
  std::vector<T> bias, initial_h, initial_c, peephole;
  std::vector<std::int64_t> seq_lens;
  std::vector<T> y, y_h, y_c;  // sized by run_cell
};

/// Runs the cell equations. Output layouts as the op's (see above).
template <class T>
void run_cell(const CellSpec& s, const CellProducts<T>& p, CellData<T>& d) {
  const std::int64_t H = s.hidden, B = s.batch, S = s.seq, GH = s.gate_width();
  const auto at = [](std::int64_t i) { return static_cast<std::size_t>(i); };
  d.y.assign(at(S * s.dirs * B * H), T(0));
  d.y_h.assign(at(s.dirs * B * H), T(0));
  d.y_c.assign(at(s.dirs * B * H), T(0));
  // Y element (t, dir, b, h) and state element (dir, b, h) in the op's layout.
  const auto y_at = [&](std::int64_t t, std::int64_t dir, std::int64_t b, std::int64_t h) {
    return at(s.batch_first ? ((b * S + t) * s.dirs + dir) * H + h : ((t * s.dirs + dir) * B + b) * H + h);
  };
  const auto st_at = [&](std::int64_t dir, std::int64_t b, std::int64_t h) {
    return at(s.batch_first ? (b * s.dirs + dir) * H + h : (dir * B + b) * H + h);
  };
  const auto clip = [&](T v) {
    return s.has_clip ? std::clamp(v, static_cast<T>(-s.clip), static_cast<T>(s.clip)) : v;
  };
  const std::size_t nact = s.kind == CellKind::Lstm ? 3 : s.kind == CellKind::Gru ? 2 : 1;
  std::vector<T> xw, hr, hr2, rh;
  for (std::int64_t dir = 0; dir < s.dirs; ++dir) {
    const bool reverse = s.reverse_only || dir == 1;
    const CellActivation& f = s.acts.at(at(dir) * nact);
    const CellActivation& g = s.acts.at(std::min(at(dir) * nact + 1, s.acts.size() - 1));
    const CellActivation& hact = s.acts.at(std::min(at(dir) * nact + 2, s.acts.size() - 1));
    std::vector<T> h(at(B * H), T(0)), c(at(B * H), T(0));
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t k = 0; k < H; ++k) {
        if (!d.initial_h.empty()) h[at(b * H + k)] = d.initial_h[st_at(dir, b, k)];
        if (!d.initial_c.empty()) c[at(b * H + k)] = d.initial_c[st_at(dir, b, k)];
      }
    xw.assign(at(S * B * GH), T(0));
    p.input_proj(dir, xw);
    // Biases: Wb then Rb, per gate column.
    const T* wb = d.bias.empty() ? nullptr : d.bias.data() + at(dir * 2 * GH);
    const T* rb = wb ? wb + GH : nullptr;
    const T* pp = d.peephole.empty() ? nullptr : d.peephole.data() + at(dir * 3 * H);
    const auto len = [&](std::int64_t b) { return d.seq_lens.empty() ? S : std::clamp<std::int64_t>(d.seq_lens[at(b)], 0, S); };
    for (std::int64_t step = 0; step < S; ++step) {
      hr.assign(at(B * GH), T(0));
      if (s.kind == CellKind::Gru) {
        p.hidden_proj(dir, 0, 2, h, hr);  // z, r
        if (s.linear_before_reset) {
          hr2.assign(at(B * H), T(0));
          p.hidden_proj(dir, 2, 1, h, hr2);
        }
      } else {
        p.hidden_proj(dir, 0, s.gates, h, hr);
      }
      // Pre-activations of the gates, activations, and for GRU the reset product first.
      std::vector<T> gate(at(B * GH), T(0));
      std::vector<std::int64_t> time(at(B), -1);
      for (std::int64_t b = 0; b < B; ++b) {
        if (step >= len(b)) continue;
        time[at(b)] = reverse ? len(b) - 1 - step : step;
      }
      const std::int64_t hr_w = s.kind == CellKind::Gru ? 2 * H : GH;
      for (std::int64_t b = 0; b < B; ++b) {
        const std::int64_t t = time[at(b)];
        if (t < 0) continue;
        for (std::int64_t n = 0; n < GH; ++n) {
          T v = xw[at((t * B + b) * GH + n)];
          if (n < hr_w) v += hr[at(b * hr_w + n)];
          if (wb) v += wb[n];
          if (rb && !(s.kind == CellKind::Gru && n >= 2 * H)) v += rb[n];
          gate[at(b * GH + n)] = v;
        }
      }
      if (s.kind == CellKind::Gru) {
        // z and r first; then h~ with the reset gate applied before or after its product.
        rh.assign(at(B * H), T(0));
        for (std::int64_t b = 0; b < B; ++b) {
          if (time[at(b)] < 0) continue;
          for (std::int64_t n = 0; n < 2 * H; ++n) gate[at(b * GH + n)] = f(clip(gate[at(b * GH + n)]));
          for (std::int64_t k = 0; k < H; ++k) rh[at(b * H + k)] = gate[at(b * GH + H + k)] * h[at(b * H + k)];
        }
        std::vector<T> hh(at(B * H), T(0));
        if (!s.linear_before_reset) p.hidden_proj(dir, 2, 1, rh, hh);
        for (std::int64_t b = 0; b < B; ++b) {
          const std::int64_t t = time[at(b)];
          if (t < 0) continue;
          for (std::int64_t k = 0; k < H; ++k) {
            const std::size_t gi = at(b * GH + 2 * H + k);
            const T rbh = rb ? rb[2 * H + k] : T(0);
            T v = gate[gi];
            if (s.linear_before_reset) v += gate[at(b * GH + H + k)] * (hr2[at(b * H + k)] + rbh);
            else v += hh[at(b * H + k)] + rbh;
            const T htil = g(clip(v)), z = gate[at(b * GH + k)];
            T& hs = h[at(b * H + k)];
            hs = (T(1) - z) * htil + z * hs;
            d.y[y_at(t, dir, b, k)] = hs;
          }
        }
      } else if (s.kind == CellKind::Rnn) {
        for (std::int64_t b = 0; b < B; ++b) {
          const std::int64_t t = time[at(b)];
          if (t < 0) continue;
          for (std::int64_t k = 0; k < H; ++k) {
            h[at(b * H + k)] = f(clip(gate[at(b * GH + k)]));
            d.y[y_at(t, dir, b, k)] = h[at(b * H + k)];
          }
        }
      } else {
        for (std::int64_t b = 0; b < B; ++b) {
          const std::int64_t t = time[at(b)];
          if (t < 0) continue;
          for (std::int64_t k = 0; k < H; ++k) {
            const std::size_t o = at(b * GH);
            T& cs = c[at(b * H + k)];
            T pi = gate[o + at(k)], po = gate[o + at(H + k)], pf = gate[o + at(2 * H + k)];
            const T pc = gate[o + at(3 * H + k)];
            if (pp) {
              pi += pp[k] * cs;
              pf += pp[2 * H + k] * cs;
            }
            const T i = f(clip(pi));
            const T fg = s.input_forget ? T(1) - i : f(clip(pf));
            const T ct = g(clip(pc));
            cs = fg * cs + i * ct;
            if (pp) po += pp[H + k] * cs;
            const T og = f(clip(po));
            h[at(b * H + k)] = og * hact(cs);
            d.y[y_at(t, dir, b, k)] = h[at(b * H + k)];
          }
        }
      }
    }
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t k = 0; k < H; ++k) {
        d.y_h[st_at(dir, b, k)] = h[at(b * H + k)];
        d.y_c[st_at(dir, b, k)] = c[at(b * H + k)];
      }
  }
}

}  // namespace probelab::graph::ops
