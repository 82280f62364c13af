#!/usr/bin/env python3
"""Generates the bundled real-size ONNX models in scenarios/models/ with onnx.helper, in the form
PyTorch's exporter emits them (decomposed LayerNorm, tanh-GELU written out, causal mask through
Where, Reshape shapes computed by Shape -> Gather -> Unsqueeze -> Concat subgraphs, ReLU6 as Clip
with min/max inputs, BatchNormalization in eval mode):

  gpt2_block.onnx         one GPT-2 decoder block, d_model 768, 12 heads, MLP 3072; input
                          x [batch, seq, 768] with symbolic batch and seq
  llama_block.onnx        one LLaMA-style decoder block as torch.onnx writes it: RMSNorm decomposed
                          (Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul), grouped-query attention (8
                          query heads on 2 key/value heads repeated by Unsqueeze -> Expand ->
                          Reshape), rotary embeddings (cached cos/sin tables sliced to the sequence
                          by a Slice whose end is the input's shape, rotate_half as Slice, Neg and
                          Concat), a causal mask from ConstantOfShape -> Trilu -> Equal applied by
                          Where with float32's lowest value, SwiGLU MLP (Sigmoid, Mul); d_model 256,
                          head_dim 32, MLP 688; input x [batch, seq, 256] with symbolic batch and seq
  mobilenetv2_stack.onnx  MobileNetV2 inverted-residual blocks (expand 1x1, depthwise 3x3,
                          ReLU6, project 1x1, residual) on [batch, 16, 112, 112], then a pooled
                          10-way classifier head
  resnet50_stage.onnx     the conv2_x stage of ResNet-50: three bottlenecks (1x1, 3x3, 1x1 with
                          BatchNormalization and Relu, projection shortcut) on [batch, 64, 56, 56]
  rnn_encoder.onnx        a speech-style sequence encoder as torch.onnx writes nn.LSTM and nn.GRU
                          with batch_first: features [batch, seq, 80] -> bidirectional LSTM (hidden
                          128) -> GRU (hidden 128) -> per-frame 32-way classifier; the zero initial
                          states are built from the input's shape (Shape -> Gather -> Concat ->
                          Expand) and fold at import
  qdq_cnn.onnx            a quantized CNN in the QDQ form ONNX Runtime's static quantization and
                          PyTorch's quantized export write: uint8 activations through
                          QuantizeLinear -> DequantizeLinear pairs, int8 weights with per-channel
                          scales read through DequantizeLinear; four convs (one depthwise) with
                          Relu, pooling and a 10-way classifier on [batch, 3, 32, 32]
  qlinear_cnn.onnx        the operator form ONNX Runtime's quantizer writes: QuantizeLinear, three
                          QLinearConv (int8 per-channel weights, int32 bias, a uint8 output range
                          from 0 that is the ReLU; one depthwise), DequantizeLinear, pooling, a
                          QLinearMatMul layer, and a classifier as dynamic quantization writes it
                          (DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul) on [batch, 3, 16, 16]

It also writes the small models of the importer's bad-input tests to tests/graph/data/onnx_import/
(opset too new, unsupported ops, an initializer whose graph-input shape disagrees, external data
present and missing). The weights are seeded (numpy), so the files are reproducible. The generated files are committed:
building and running probelab needs no Python. Needs Debian's python3-onnx and python3-numpy.

    python3 scripts/gen_models.py [OUT_DIR]     (default: scenarios/models)
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class Builder:
    """Collects nodes and initializers; names intermediates like torch.onnx does (/scope/Op_output_0)."""

    def __init__(self, seed):
        self.nodes, self.inits, self.rng, self.count = [], [], np.random.default_rng(seed), {}

    def name(self, scope, op):
        key = f"{scope}/{op}"
        n = self.count.get(key, 0)
        self.count[key] = n + 1
        return key if n == 0 else f"{key}_{n}"

    def node(self, op, inputs, scope, n_out=1, **attrs):
        name = self.name(scope, op)
        outs = [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, value, scope, dtype=np.float32):
        name = self.name(scope, "Constant")
        out = f"{name}_output_0"
        t = numpy_helper.from_array(np.asarray(value, dtype=dtype), out)
        self.nodes.append(helper.make_node("Constant", [], [out], name=name, value=t))
        return out

    def weight(self, name, shape, std=0.02, mean=0.0):
        w = (self.rng.standard_normal(shape) * std + mean).astype(np.float32)
        self.inits.append(numpy_helper.from_array(w, name))
        return name

    def fixed(self, name, value):
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), name))
        return name

    def model(self, graph_name, inputs, outputs):
        g = helper.make_graph(self.nodes, graph_name, inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="probelab-gen")
        onnx.checker.check_model(m)
        return m


# --- GPT-2 decoder block ---------------------------------------------------------------------------

def layer_norm(b, x, scope, d):
    """x -> (x - mean) / sqrt(var + eps) * gamma + beta, as torch.onnx decomposes LayerNorm."""
    mean = b.node("ReduceMean", [x], scope, axes=[-1], keepdims=1)
    diff = b.node("Sub", [x, mean], scope)
    sq = b.node("Pow", [diff, b.const(2.0, scope)], scope)
    var = b.node("ReduceMean", [sq], scope, axes=[-1], keepdims=1)
    std = b.node("Sqrt", [b.node("Add", [var, b.const(1e-5, scope)], scope)], scope)
    norm = b.node("Div", [diff, std], scope)
    g = b.weight(f"{scope}.weight", [d], std=0.02, mean=1.0)
    beta = b.weight(f"{scope}.bias", [d], std=0.02)
    return b.node("Add", [b.node("Mul", [norm, g], scope), beta], scope)


def linear(b, x, scope, d_in, d_out):
    w = b.weight(f"{scope}.weight", [d_in, d_out])
    bias = b.weight(f"{scope}.bias", [d_out])
    return b.node("Add", [b.node("MatMul", [x, w], scope), bias], scope)


def dim_of(b, x, axis, scope):
    """Unsqueeze(Gather(Shape(x), axis)): one dim of x as a 1-element int64 tensor."""
    shape = b.node("Shape", [x], scope)
    g = b.node("Gather", [shape, b.const(axis, scope, np.int64)], scope, axis=0)
    return b.node("Unsqueeze", [g, b.const([0], scope, np.int64)], scope)


def gpt2_block(d=768, heads=12, mlp=3072):
    b = Builder(seed=2)
    hd = d // heads
    x = "x"
    # attention
    h = layer_norm(b, x, "/h.0/ln_1", d)
    qkv = linear(b, h, "/h.0/attn/c_attn", d, 3 * d)
    q, k, v = b.node("Split", [qkv, b.const([d, d, d], "/h.0/attn", np.int64)], "/h.0/attn", n_out=3, axis=2)
    batch = dim_of(b, x, 0, "/h.0/attn")
    seq = dim_of(b, x, 1, "/h.0/attn")
    head_shape = b.node("Concat", [batch, seq, b.const([heads], "/h.0/attn", np.int64),
                                   b.const([hd], "/h.0/attn", np.int64)], "/h.0/attn", axis=0)

    def split_heads(t, perm):
        r = b.node("Reshape", [t, head_shape], "/h.0/attn")
        return b.node("Transpose", [r], "/h.0/attn", perm=perm)

    qh = split_heads(q, [0, 2, 1, 3])
    kh = split_heads(k, [0, 2, 3, 1])
    vh = split_heads(v, [0, 2, 1, 3])
    scores = b.node("MatMul", [qh, kh], "/h.0/attn")
    scores = b.node("Div", [scores, b.const(float(np.sqrt(hd)), "/h.0/attn")], "/h.0/attn")
    # causal mask: a lower-triangular [seq, seq] of ones from the input's shape, as bool
    sq2 = b.node("Concat", [seq, seq], "/h.0/attn/mask", axis=0)
    ones = b.node("ConstantOfShape", [sq2], "/h.0/attn/mask",
                  value=numpy_helper.from_array(np.array([1.0], dtype=np.float32)))
    tril = b.node("Trilu", [ones], "/h.0/attn/mask", upper=0)
    mask = b.node("Cast", [tril], "/h.0/attn/mask", to=TensorProto.BOOL)
    masked = b.node("Where", [mask, scores, b.const(-3.4028234663852886e38, "/h.0/attn/mask")], "/h.0/attn")
    probs = b.node("Softmax", [masked], "/h.0/attn", axis=-1)
    ctx = b.node("MatMul", [probs, vh], "/h.0/attn")
    ctx = b.node("Transpose", [ctx], "/h.0/attn", perm=[0, 2, 1, 3])
    merged_shape = b.node("Concat", [batch, seq, b.const([d], "/h.0/attn", np.int64)], "/h.0/attn", axis=0)
    ctx = b.node("Reshape", [ctx, merged_shape], "/h.0/attn")
    attn = linear(b, ctx, "/h.0/attn/c_proj", d, d)
    x1 = b.node("Add", [x, attn], "/h.0")
    # MLP with tanh-GELU written out: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    h2 = layer_norm(b, x1, "/h.0/ln_2", d)
    fc = linear(b, h2, "/h.0/mlp/c_fc", d, mlp)
    s = "/h.0/mlp/act"
    cube = b.node("Pow", [fc, b.const(3.0, s)], s)
    inner = b.node("Add", [fc, b.node("Mul", [cube, b.const(0.044715, s)], s)], s)
    t = b.node("Tanh", [b.node("Mul", [inner, b.const(float(np.sqrt(2.0 / np.pi)), s)], s)], s)
    gelu = b.node("Mul", [b.node("Mul", [fc, b.const(0.5, s)], s), b.node("Add", [t, b.const(1.0, s)], s)], s)
    proj = linear(b, gelu, "/h.0/mlp/c_proj", mlp, d)
    y = b.node("Add", [x1, proj], "/h.0")
    b.nodes.append(helper.make_node("Identity", [y], ["hidden_states"], name="/h.0/output"))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", d])]
    outputs = [helper.make_tensor_value_info("hidden_states", TensorProto.FLOAT, ["batch", "seq", d])]
    return b.model("gpt2_block", inputs, outputs)


# --- LLaMA-style decoder block ---------------------------------------------------------------------

def rms_norm(b, x, scope, d):
    """x * 1 / sqrt(mean(x^2) + eps) * weight, as torch.onnx writes LlamaRMSNorm."""
    sq = b.node("Pow", [x, b.const(2.0, scope)], scope)
    ms = b.node("ReduceMean", [sq], scope, axes=[-1], keepdims=1)
    r = b.node("Reciprocal", [b.node("Sqrt", [b.node("Add", [ms, b.const(1e-6, scope)], scope)], scope)], scope)
    w = b.weight(f"{scope}.weight", [d], std=0.02, mean=1.0)
    return b.node("Mul", [w, b.node("Mul", [x, r], scope)], scope)


def rotate_half(b, t, scope, hd):
    """cat(-t[..., hd/2:], t[..., :hd/2]) with Slice, Neg and Concat."""
    h = hd // 2
    axis = b.const([-1], scope, np.int64)
    lo = b.node("Slice", [t, b.const([0], scope, np.int64), b.const([h], scope, np.int64), axis], scope)
    hi = b.node("Slice", [t, b.const([h], scope, np.int64), b.const([2**62], scope, np.int64), axis], scope)
    return b.node("Concat", [b.node("Neg", [hi], scope), lo], scope, axis=-1)


def llama_block(d=256, heads=8, kv_heads=2, ffn=688, max_seq=128):
    b = Builder(seed=5)
    hd, rep = d // heads, heads // kv_heads
    s = "/layers.0/self_attn"
    x = "x"
    h = rms_norm(b, x, "/layers.0/input_layernorm", d)
    q = b.node("MatMul", [h, b.weight(f"{s}/q_proj.weight", [d, d])], s + "/q_proj")
    k = b.node("MatMul", [h, b.weight(f"{s}/k_proj.weight", [d, kv_heads * hd])], s + "/k_proj")
    v = b.node("MatMul", [h, b.weight(f"{s}/v_proj.weight", [d, kv_heads * hd])], s + "/v_proj")
    batch, seq = dim_of(b, x, 0, s), dim_of(b, x, 1, s)

    def split_heads(t, n):
        shape = b.node("Concat", [batch, seq, b.const([n], s, np.int64), b.const([hd], s, np.int64)], s, axis=0)
        return b.node("Transpose", [b.node("Reshape", [t, shape], s)], s, perm=[0, 2, 1, 3])

    qh, kh, vh = split_heads(q, heads), split_heads(k, kv_heads), split_heads(v, kv_heads)
    # rotary embeddings: the cached [max_seq, hd] tables sliced to the sequence
    inv_freq = 1.0 / (10000 ** (np.arange(0, hd, 2) / hd))
    angles = np.outer(np.arange(max_seq), inv_freq)
    emb = np.concatenate([angles, angles], axis=-1)
    rs = s + "/rotary_emb"
    zero = b.const([0], rs, np.int64)
    cos = b.node("Slice", [b.fixed("rotary_emb.cos_cached", np.cos(emb)), zero, seq, zero], rs)
    sin = b.node("Slice", [b.fixed("rotary_emb.sin_cached", np.sin(emb)), zero, seq, zero], rs)

    def rope(t):
        return b.node("Add", [b.node("Mul", [t, cos], s), b.node("Mul", [rotate_half(b, t, s, hd), sin], s)], s)

    def repeat_kv(t):
        u = b.node("Unsqueeze", [t, b.const([2], s, np.int64)], s)
        wide = b.node("Concat", [batch, b.const([kv_heads, rep], s, np.int64), seq, b.const([hd], s, np.int64)], s,
                      axis=0)
        flat = b.node("Concat", [batch, b.const([heads], s, np.int64), seq, b.const([hd], s, np.int64)], s, axis=0)
        return b.node("Reshape", [b.node("Expand", [u, wide], s), flat], s)

    qr, kr = rope(qh), repeat_kv(rope(kh))
    vr = repeat_kv(vh)
    scores = b.node("MatMul", [qr, b.node("Transpose", [kr], s, perm=[0, 1, 3, 2])], s)
    scores = b.node("Mul", [scores, b.const(float(1 / np.sqrt(hd)), s)], s)
    ms = s + "/mask"
    ones = b.node("ConstantOfShape", [b.node("Concat", [seq, seq], ms, axis=0)], ms,
                  value=numpy_helper.from_array(np.array([1], dtype=np.int64)))
    future = b.node("Equal", [b.node("Trilu", [ones], ms, upper=0), b.const([0], ms, np.int64)], ms)
    masked = b.node("Where", [future, b.const(np.finfo(np.float32).min, ms), scores], s)
    probs = b.node("Softmax", [masked], s, axis=-1)
    ctx = b.node("Transpose", [b.node("MatMul", [probs, vr], s)], s, perm=[0, 2, 1, 3])
    ctx = b.node("Reshape", [ctx, b.node("Concat", [batch, seq, b.const([d], s, np.int64)], s, axis=0)], s)
    x1 = b.node("Add", [x, b.node("MatMul", [ctx, b.weight(f"{s}/o_proj.weight", [d, d])], s + "/o_proj")], "/layers.0")
    m = "/layers.0/mlp"
    h2 = rms_norm(b, x1, "/layers.0/post_attention_layernorm", d)
    gate = b.node("MatMul", [h2, b.weight(f"{m}/gate_proj.weight", [d, ffn])], m + "/gate_proj")
    up = b.node("MatMul", [h2, b.weight(f"{m}/up_proj.weight", [d, ffn])], m + "/up_proj")
    silu = b.node("Mul", [gate, b.node("Sigmoid", [gate], m + "/act_fn")], m + "/act_fn")
    down = b.node("MatMul", [b.node("Mul", [silu, up], m), b.weight(f"{m}/down_proj.weight", [ffn, d])], m + "/down_proj")
    y = b.node("Add", [x1, down], "/layers.0")
    b.nodes.append(helper.make_node("Identity", [y], ["hidden_states"], name="/layers.0/output"))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", d])]
    outputs = [helper.make_tensor_value_info("hidden_states", TensorProto.FLOAT, ["batch", "seq", d])]
    return b.model("llama_block", inputs, outputs)


# --- recurrent encoder ---------------------------------------------------------------------------

def zero_state(b, x, scope, dirs, hidden):
    """Expand(zeros [dirs, 1, hidden], [dirs, batch, hidden]) with batch from x's shape."""
    batch = dim_of(b, x, 0, scope)
    shape = b.node("Concat", [b.const([dirs], scope, np.int64), batch, b.const([hidden], scope, np.int64)], scope, axis=0)
    return b.node("Expand", [b.const(np.zeros([dirs, 1, hidden]), scope), shape], scope)


def rnn_encoder(features=80, hidden=128, classes=32):
    b = Builder(seed=4)
    x = "features"
    s = "/encoder/lstm"
    seq_first = b.node("Transpose", [x], s, perm=[1, 0, 2])
    h0 = zero_state(b, x, s, 2, hidden)
    c0 = zero_state(b, x, s, 2, hidden)
    w = b.weight(f"{s}.weight_ih", [2, 4 * hidden, features], std=0.06)
    r = b.weight(f"{s}.weight_hh", [2, 4 * hidden, hidden], std=0.06)
    bias = b.weight(f"{s}.bias", [2, 8 * hidden], std=0.02)
    y, _, _ = b.node("LSTM", [seq_first, w, r, bias, "", h0, c0], s, n_out=3, hidden_size=hidden,
                     direction="bidirectional")
    # [seq, 2, batch, hidden] -> [seq, batch, 2 * hidden]
    y = b.node("Transpose", [y], s, perm=[0, 2, 1, 3])
    y = b.node("Reshape", [y, b.const([0, 0, -1], s, np.int64)], s)
    s = "/encoder/gru"
    h0 = zero_state(b, x, s, 1, hidden)
    w = b.weight(f"{s}.weight_ih", [1, 3 * hidden, 2 * hidden], std=0.04)
    r = b.weight(f"{s}.weight_hh", [1, 3 * hidden, hidden], std=0.06)
    bias = b.weight(f"{s}.bias", [1, 6 * hidden], std=0.02)
    g, _ = b.node("GRU", [y, w, r, bias, "", h0], s, n_out=2, hidden_size=hidden, linear_before_reset=1)
    g = b.node("Squeeze", [g, b.const([1], s, np.int64)], s)
    g = b.node("Transpose", [g], s, perm=[1, 0, 2])
    logits = linear(b, g, "/classifier", hidden, classes)
    b.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="/output"))
    inputs = [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", "seq", features])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", classes])]
    return b.model("rnn_encoder", inputs, outputs)


# --- convolutional blocks ---------------------------------------------------------------------------

def conv(b, x, scope, c_in, c_out, k, stride=1, group=1, bias=True):
    fan_in = c_in // group * k * k
    w = b.weight(f"{scope}.weight", [c_out, c_in // group, k, k], std=float(np.sqrt(2.0 / fan_in)))
    ins = [x, w] + ([b.weight(f"{scope}.bias", [c_out], std=0.01)] if bias else [])
    p = k // 2
    return b.node("Conv", ins, scope, kernel_shape=[k, k], strides=[stride, stride], pads=[p, p, p, p],
                  group=group, dilations=[1, 1])


def relu6(b, x, scope):
    return b.node("Clip", [x, b.const(0.0, scope), b.const(6.0, scope)], scope)


def inverted_residual(b, x, scope, c_in, c_out, stride, expand=6):
    hidden = c_in * expand
    h = relu6(b, conv(b, x, f"{scope}/conv.0", c_in, hidden, 1), f"{scope}/act.0")
    h = relu6(b, conv(b, h, f"{scope}/conv.1", hidden, hidden, 3, stride, group=hidden), f"{scope}/act.1")
    h = conv(b, h, f"{scope}/conv.2", hidden, c_out, 1)
    if stride == 1 and c_in == c_out:
        h = b.node("Add", [x, h], scope)
    return h


def mobilenetv2_stack():
    b = Builder(seed=3)
    x = "input"
    # (c_in, c_out, stride) of features.2 .. features.6 of MobileNetV2
    for i, (ci, co, s) in enumerate([(16, 24, 2), (24, 24, 1), (24, 32, 2), (32, 32, 1), (32, 32, 1)]):
        x = inverted_residual(b, x, f"/features.{i + 2}", ci, co, s)
    pooled = b.node("GlobalAveragePool", [x], "/pool")
    flat = b.node("Flatten", [pooled], "/pool", axis=1)
    w = b.weight("classifier.weight", [10, 32], std=0.1)
    bias = b.weight("classifier.bias", [10], std=0.01)
    b.nodes.append(helper.make_node("Gemm", [flat, w, bias], ["logits"], name="/classifier/Gemm", transB=1))
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 16, 112, 112])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])]
    return b.model("mobilenetv2_stack", inputs, outputs)


def batch_norm(b, x, scope, c):
    g = b.weight(f"{scope}.weight", [c], std=0.05, mean=1.0)
    beta = b.weight(f"{scope}.bias", [c], std=0.05)
    mean = b.weight(f"{scope}.running_mean", [c], std=0.05)
    var = b.fixed(f"{scope}.running_var", 1.0 + 0.1 * b.rng.random(c))
    return b.node("BatchNormalization", [x, g, beta, mean, var], scope, epsilon=1e-5, momentum=0.9)


def bottleneck(b, x, scope, c_in, width, c_out, project):
    h = b.node("Relu", [batch_norm(b, conv(b, x, f"{scope}/conv1", c_in, width, 1, bias=False), f"{scope}/bn1", width)], scope)
    h = b.node("Relu", [batch_norm(b, conv(b, h, f"{scope}/conv2", width, width, 3, bias=False), f"{scope}/bn2", width)], scope)
    h = batch_norm(b, conv(b, h, f"{scope}/conv3", width, c_out, 1, bias=False), f"{scope}/bn3", c_out)
    short = x
    if project:
        short = batch_norm(b, conv(b, x, f"{scope}/downsample.0", c_in, c_out, 1, bias=False), f"{scope}/downsample.1", c_out)
    return b.node("Relu", [b.node("Add", [h, short], scope)], scope)


def resnet50_stage():
    b = Builder(seed=4)
    x = "input"
    x = bottleneck(b, x, "/layer1/layer1.0", 64, 64, 256, True)
    x = bottleneck(b, x, "/layer1/layer1.1", 256, 64, 256, False)
    x = bottleneck(b, x, "/layer1/layer1.2", 256, 64, 256, False)
    b.nodes.append(helper.make_node("Identity", [x], ["features"], name="/layer1/output"))
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 64, 56, 56])]
    outputs = [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", 256, 56, 56])]
    return b.model("resnet50_stage", inputs, outputs)


# --- quantized CNN in the QDQ form (ONNX Runtime's static quantization, PyTorch's QDQ export) ----------

def qdq(b, x, scope, scale, zero_point):
    """QuantizeLinear -> DequantizeLinear of an activation (uint8, per tensor)."""
    s = b.fixed(f"{scope}.scale", scale)
    zp = f"{scope}.zero_point"
    b.inits.append(numpy_helper.from_array(np.asarray(zero_point, dtype=np.uint8), zp))
    q = b.node("QuantizeLinear", [x, s, zp], scope)
    return b.node("DequantizeLinear", [q, s, zp], scope)


def int8_weight(b, name, w, axis):
    """An int8 initializer with per-channel scales along `axis` (symmetric, zero points 0), read
    through DequantizeLinear as the exporters write weights."""
    red = tuple(i for i in range(w.ndim) if i != axis)
    scale = (np.abs(w).max(axis=red) / 127.0).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.rint(w / scale.reshape(shape)), -127, 127).astype(np.int8)
    b.inits += [numpy_helper.from_array(q, f"{name}_quantized"), numpy_helper.from_array(scale, f"{name}_scale"),
                numpy_helper.from_array(np.zeros(scale.shape, dtype=np.int8), f"{name}_zero_point")]
    return b.node("DequantizeLinear", [f"{name}_quantized", f"{name}_scale", f"{name}_zero_point"], name, axis=axis)


def qconv(b, x, scope, c_in, c_out, k, stride=1, group=1):
    fan_in = c_in // group * k * k
    w = (b.rng.standard_normal([c_out, c_in // group, k, k]) * np.sqrt(2.0 / fan_in)).astype(np.float32)
    bias = b.weight(f"{scope}.bias", [c_out], std=0.01)
    p = k // 2
    h = b.node("Conv", [x, int8_weight(b, f"{scope}.weight", w, 0), bias], scope, kernel_shape=[k, k],
               strides=[stride, stride], pads=[p, p, p, p], group=group, dilations=[1, 1])
    return qdq(b, b.node("Relu", [h], scope), f"{scope}/act", 4.0 / 255, 0)


def qdq_cnn():
    b = Builder(seed=5)
    x = qdq(b, "input", "/quant_in", 8.0 / 255, 128)
    x = qconv(b, x, "/conv1", 3, 16, 3)
    x = qconv(b, x, "/conv2", 16, 32, 3, stride=2)
    x = qconv(b, x, "/conv3", 32, 32, 3, group=32)
    x = qconv(b, x, "/conv4", 32, 64, 1)
    pooled = qdq(b, b.node("GlobalAveragePool", [x], "/pool"), "/pool/act", 2.0 / 255, 0)
    flat = b.node("Flatten", [pooled], "/pool", axis=1)
    w = (b.rng.standard_normal([64, 10]) * 0.1).astype(np.float32)
    bias = b.weight("fc.bias", [10], std=0.01)
    mm = b.node("MatMul", [flat, int8_weight(b, "fc.weight", w, 1)], "/fc")
    b.nodes.append(helper.make_node("Add", [mm, bias], ["logits"], name="/fc/Add"))
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 32, 32])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])]
    return b.model("qdq_cnn", inputs, outputs)


# --- quantized CNN in the operator form (ONNX Runtime's QOperator format, dynamic quantization) ---------

def qlinear_conv(b, x, x_scale, x_zp, scope, c_in, c_out, k, stride=1, group=1):
    """QLinearConv with int8 per-channel weights and an int32 bias; its uint8 output range starts at 0
    (zero point 0), so the requantization's saturation is the ReLU, as ONNX Runtime fuses it."""
    fan_in = c_in // group * k * k
    w = (b.rng.standard_normal([c_out, c_in // group, k, k]) * np.sqrt(2.0 / fan_in)).astype(np.float32)
    w_scale = (np.abs(w).max(axis=(1, 2, 3)) / 127.0).astype(np.float32)
    wq = np.clip(np.rint(w / w_scale.reshape(-1, 1, 1, 1)), -127, 127).astype(np.int8)
    bias = (b.rng.standard_normal(c_out) * 0.01).astype(np.float32)
    bq = np.rint(bias / (np.float32(x_scale) * w_scale)).astype(np.int32)
    y_scale, y_zp = f"{scope}.y_scale", f"{scope}.y_zero_point"
    b.fixed(y_scale, 4.0 / 255)
    b.inits += [numpy_helper.from_array(wq, f"{scope}.weight_quantized"),
                numpy_helper.from_array(w_scale, f"{scope}.weight_scale"),
                numpy_helper.from_array(np.zeros(c_out, dtype=np.int8), f"{scope}.weight_zero_point"),
                numpy_helper.from_array(bq, f"{scope}.bias_quantized"),
                numpy_helper.from_array(np.asarray(0, dtype=np.uint8), y_zp)]
    p = k // 2
    ins = [x, f"{scope}.x_scale", f"{scope}.x_zero_point", f"{scope}.weight_quantized", f"{scope}.weight_scale",
           f"{scope}.weight_zero_point", y_scale, y_zp, f"{scope}.bias_quantized"]
    b.fixed(ins[1], x_scale)
    b.inits.append(numpy_helper.from_array(np.asarray(x_zp, dtype=np.uint8), ins[2]))
    out = b.node("QLinearConv", ins, scope, kernel_shape=[k, k], strides=[stride, stride], pads=[p, p, p, p],
                 group=group, dilations=[1, 1])
    return out, 4.0 / 255, 0


def qlinear_cnn():
    b = Builder(seed=6)
    s_in, zp_in = 8.0 / 255, 128
    b.fixed("input_scale", s_in)
    b.inits.append(numpy_helper.from_array(np.asarray(zp_in, dtype=np.uint8), "input_zero_point"))
    x = b.node("QuantizeLinear", ["input", "input_scale", "input_zero_point"], "/quant_in")
    x, s, zp = qlinear_conv(b, x, s_in, zp_in, "/conv1", 3, 16, 3)
    x, s, zp = qlinear_conv(b, x, s, zp, "/conv2", 16, 16, 3, stride=2, group=16)
    x, s, zp = qlinear_conv(b, x, s, zp, "/conv3", 16, 32, 1)
    h = b.node("DequantizeLinear", [x, "/conv3.y_scale", "/conv3.y_zero_point"], "/dequant")
    flat = b.node("Flatten", [b.node("GlobalAveragePool", [h], "/pool")], "/pool", axis=1)
    # fc1: QuantizeLinear -> QLinearMatMul (per-tensor int8 weight) -> DequantizeLinear -> Relu
    w1 = (b.rng.standard_normal([32, 32]) * 0.2).astype(np.float32)
    w1_scale = np.float32(np.abs(w1).max() / 127.0)
    b.fixed("fc1.x_scale", 2.0 / 255)
    b.fixed("fc1.weight_scale", w1_scale)
    b.fixed("fc1.y_scale", 4.0 / 255)
    b.inits += [numpy_helper.from_array(np.asarray(0, dtype=np.uint8), "fc1.x_zero_point"),
                numpy_helper.from_array(np.clip(np.rint(w1 / w1_scale), -127, 127).astype(np.int8), "fc1.weight_quantized"),
                numpy_helper.from_array(np.asarray(0, dtype=np.int8), "fc1.weight_zero_point"),
                numpy_helper.from_array(np.asarray(128, dtype=np.uint8), "fc1.y_zero_point")]
    q = b.node("QuantizeLinear", [flat, "fc1.x_scale", "fc1.x_zero_point"], "/fc1")
    mm = b.node("QLinearMatMul", [q, "fc1.x_scale", "fc1.x_zero_point", "fc1.weight_quantized", "fc1.weight_scale",
                                  "fc1.weight_zero_point", "fc1.y_scale", "fc1.y_zero_point"], "/fc1")
    h = b.node("Relu", [b.node("DequantizeLinear", [mm, "fc1.y_scale", "fc1.y_zero_point"], "/fc1")], "/fc1")
    # fc2 as dynamic quantization writes it: DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul -> Add
    w2 = (b.rng.standard_normal([32, 10]) * 0.2).astype(np.float32)
    w2_scale = np.float32(np.abs(w2).max() / 127.0)
    b.inits += [numpy_helper.from_array(np.clip(np.rint(w2 / w2_scale), -127, 127).astype(np.int8), "fc2.weight_quantized"),
                numpy_helper.from_array(np.asarray(0, dtype=np.int8), "fc2.weight_zero_point")]
    b.fixed("fc2.weight_scale", w2_scale)
    hq, hs, hzp = b.node("DynamicQuantizeLinear", [h], "/fc2", n_out=3)
    acc = b.node("MatMulInteger", [hq, "fc2.weight_quantized", hzp, "fc2.weight_zero_point"], "/fc2")
    scale = b.node("Mul", [hs, "fc2.weight_scale"], "/fc2")
    y = b.node("Mul", [b.node("Cast", [acc], "/fc2", to=TensorProto.FLOAT), scale], "/fc2")
    bias = b.weight("fc2.bias", [10], std=0.01)
    b.nodes.append(helper.make_node("Add", [y, bias], ["logits"], name="/fc2/Add"))
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 16, 16])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])]
    return b.model("qlinear_cnn", inputs, outputs)


# --- small models for the importer's tests (tests/graph/data/onnx_import/) ---------------------------

def tiny_model(nodes, inputs, outputs, inits=(), opset=OPSET):
    g = helper.make_graph(nodes, "tiny", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="probelab-gen")


def bad_inputs(out):
    f = TensorProto.FLOAT
    x = helper.make_tensor_value_info("x", f, [2, 3])
    y = helper.make_tensor_value_info("y", f, [2, 3])
    models = {}
    models["opset_too_new"] = tiny_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [x], [y], opset=99)
    models["unsupported_ops"] = tiny_model(
        [helper.make_node("Relu", ["x"], ["a"], name="relu"),
         helper.make_node("NonMaxSuppression", ["a"], ["b"], name="nms_1"),
         helper.make_node("NonMaxSuppression", ["b"], ["c"], name="nms_2"),
         helper.make_node("Unique", ["c"], ["y"], name="unique")], [x], [y])
    w = numpy_helper.from_array(np.ones((2, 3), dtype=np.float32), "w")
    models["initializer_shape_mismatch"] = tiny_model(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
        [x, helper.make_tensor_value_info("w", f, [3, 2])], [y], [w])
    ext = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    ext.data_location = TensorProto.EXTERNAL
    ext.ClearField("raw_data")
    for k, v in [("location", "weights_missing.bin"), ("offset", "0"), ("length", "24")]:
        e = ext.external_data.add()
        e.key, e.value = k, v
    models["external_data_missing"] = tiny_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [x], [y], [ext])
    ok = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    ok.data_location = TensorProto.EXTERNAL
    ok.ClearField("raw_data")
    for k, v in [("location", "external_data_ok.bin"), ("offset", "8"), ("length", "24")]:
        e = ok.external_data.add()
        e.key, e.value = k, v
    models["external_data_ok"] = tiny_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [x], [y], [ok])
    # Locations the ONNX checker refuses: an absolute path, one that climbs out of the model's
    # directory (the importer must not read a file of the machine into a weight).
    for name, location in [("external_data_absolute", "/etc/passwd"),
                           ("external_data_parent", "../onnx_import/external_data_ok.bin")]:
        bad = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
        bad.data_location = TensorProto.EXTERNAL
        bad.ClearField("raw_data")
        for k, v in [("location", location), ("offset", "8"), ("length", "24")]:
            e = bad.external_data.add()
            e.key, e.value = k, v
        models[name] = tiny_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [x], [y], [bad])
    # Model-local functions, as PyTorch's export_modules_as_functions writes submodules: an erf
    # GELU, a ReLU scaled by an attribute of the call (ref_attr_name), and a block calling both
    # (a call inside a body); one call without a name and one leaving the second output unused.
    dom = "custom.mod"
    gelu = helper.make_function(dom, "MyGelu", ["X"], ["Y"], [
        helper.make_node("Constant", [], ["r"], value_float=0.7071067811865476),
        helper.make_node("Mul", ["X", "r"], ["h"]), helper.make_node("Erf", ["h"], ["e"]),
        helper.make_node("Constant", [], ["one"], value_float=1.0), helper.make_node("Add", ["e", "one"], ["a"]),
        helper.make_node("Constant", [], ["half"], value_float=0.5), helper.make_node("Mul", ["X", "half"], ["m"]),
        helper.make_node("Mul", ["m", "a"], ["Y"])], [helper.make_opsetid("", OPSET)])
    alpha = helper.make_attribute_ref("value_float", "alpha", TensorProto.FLOAT) if hasattr(helper, "make_attribute_ref") \
        else None
    if alpha is None:
        alpha = onnx.AttributeProto(name="value_float", ref_attr_name="alpha", type=onnx.AttributeProto.FLOAT)
    scaled = helper.make_function(dom, "ScaledRelu", ["X"], ["Y", "R"], [
        helper.make_node("Relu", ["X"], ["R"], name="relu"),
        onnx.NodeProto(op_type="Constant", output=["s"], name="scale", attribute=[alpha]),
        helper.make_node("Mul", ["R", "s"], ["Y"], name="mul")], [helper.make_opsetid("", OPSET)], ["alpha"])
    block = helper.make_function(dom, "Block", ["X"], ["Y"], [
        helper.make_node("MyGelu", ["X"], ["g"], domain=dom, name="act"),
        helper.make_node("ScaledRelu", ["g"], ["Y", ""], domain=dom, name="scaled", alpha=2.0)],
        [helper.make_opsetid("", OPSET), helper.make_opsetid(dom, 1)])
    fm = tiny_model([helper.make_node("Block", ["x"], ["b"], domain=dom, name="block"),
                     helper.make_node("MyGelu", ["b"], ["y"], domain=dom)], [x], [y])
    fm.opset_import.append(helper.make_opsetid(dom, 1))
    fm.functions.extend([gelu, scaled, block])
    models["local_functions"] = fm
    # Opset 18 GroupNormalization (scale and bias per group), 6 channels in 3 groups, 2 x 2 images.
    gx = helper.make_tensor_value_info("x", f, [2, 6, 2, 2])
    gs = numpy_helper.from_array(np.array([1.5, -0.5, 2.0], dtype=np.float32), "scale")
    gb = numpy_helper.from_array(np.array([0.25, 0.0, -1.0], dtype=np.float32), "bias")
    models["group_norm_opset18"] = tiny_model(
        [helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"], name="gn", num_groups=3, epsilon=1e-3)],
        [gx], [helper.make_tensor_value_info("y", f, [2, 6, 2, 2])], [gs, gb], opset=18)
    with open(os.path.join(out, "external_data_ok.bin"), "wb") as fh:
        fh.write(b"\0" * 8 + np.arange(6, dtype=np.float32).tobytes())
    # Opset 18 Resize: scales/sizes of some axes only, one scale for the aspect ratio, antialias
    # (a no-op for nearest and for upscaling; a widened filter for a linear downscale).
    img = helper.make_tensor_value_info("x", f, [1, 2, 6, 6])
    sizes = numpy_helper.from_array(np.array([9, 12], dtype=np.int64), "sizes")
    half = numpy_helper.from_array(np.array([0.5], dtype=np.float32), "half")
    models["resize_opset18"] = tiny_model(
        [helper.make_node("Resize", ["x", "", "", "sizes"], ["up"], name="up", mode="linear", axes=[2, 3],
                          antialias=0, keep_aspect_ratio_policy="not_larger"),
         helper.make_node("Resize", ["x", "", "half"], ["down"], name="down", mode="nearest", axes=[-1], antialias=1)],
        [img], [helper.make_tensor_value_info("up", f, [1, 2, 9, 9]), helper.make_tensor_value_info("down", f, [1, 2, 6, 3])],
        [sizes, half], opset=18)
    models["resize_antialias_downscale"] = tiny_model(
        [helper.make_node("Resize", ["x", "", "half"], ["down"], name="down", mode="linear", axes=[3], antialias=1)],
        [img], [helper.make_tensor_value_info("down", f, [1, 2, 6, 3])], [half], opset=18)
    # An output declared with the input's symbolic batch that a Slice makes 1: wrong unless N = 1.
    n3 = helper.make_tensor_value_info("x", f, ["N", 3])
    slice_args = [numpy_helper.from_array(np.array([v], dtype=np.int64), k) for k, v in
                  [("starts", 0), ("ends", 1), ("axes", 0)]]
    models["output_symbolic_dim"] = tiny_model(
        [helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["y"], name="first_row")], [n3],
        [helper.make_tensor_value_info("y", f, ["N", 3])], slice_args)
    for name, m in models.items():
        path = os.path.join(out, f"{name}.onnx")
        with open(path, "wb") as fh:  # onnx.save would try to resolve the external data
            fh.write(m.SerializeToString())
        print(f"wrote {path}")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "scenarios", "models")
    for name, make in [("gpt2_block", gpt2_block), ("llama_block", llama_block), ("mobilenetv2_stack", mobilenetv2_stack),
                       ("resnet50_stage", resnet50_stage), ("rnn_encoder", rnn_encoder), ("qdq_cnn", qdq_cnn),
                       ("qlinear_cnn", qlinear_cnn)]:
        path = os.path.join(out, f"{name}.onnx")
        onnx.save(make(), path)
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")
    bad = os.path.join(here, "..", "tests", "graph", "data", "onnx_import")
    os.makedirs(bad, exist_ok=True)
    bad_inputs(bad)


if __name__ == "__main__":
    main()
