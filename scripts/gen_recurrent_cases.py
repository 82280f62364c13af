#!/usr/bin/env python3
"""Writes the recurrent-layer test cases of tests/graph/data/recurrent_cases/ in the layout of ONNX's
own backend tests (model.onnx, test_data_set_0/input_<i>.pb and output_<i>.pb), for the features
libonnx-testdata's LSTM/GRU/RNN cases leave out: both directions, sequence lengths, initial states,
clip, peepholes with input_forget, activation lists with alpha/beta, GRU's
linear_before_reset = 0 and 1.

The expected outputs come from an independent executor, onnxruntime (npm onnxruntime-node), in two
passes (onnxruntime has no layout 1; ONNX's own test_lstm_batchwise and test_gru_batchwise cover it):

    python3 scripts/gen_recurrent_cases.py inputs        # models, inputs, inputs.json per case
    node scripts/ort_outputs.mjs tests/graph/data/recurrent_cases
    python3 scripts/gen_recurrent_cases.py outputs       # outputs.json -> output_<i>.pb

The generated files are committed; needs Debian's python3-onnx and python3-numpy.
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "graph", "data", "recurrent_cases")


def case(name, op, attrs, seq, batch, inp, hidden, dirs, layout=0, lens=None, init=False, peephole=False,
         bias=True, n_out=None):
    """One node case with seeded random inputs; returns (name, model, [(input name, array)])."""
    rng = np.random.default_rng(sum(map(ord, name)))
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    x = rng.uniform(-1, 1, (batch, seq, inp) if layout else (seq, batch, inp)).astype(np.float32)
    w = rng.uniform(-0.5, 0.5, (dirs, gates * hidden, inp)).astype(np.float32)
    r = rng.uniform(-0.5, 0.5, (dirs, gates * hidden, hidden)).astype(np.float32)
    feeds = [("X", x), ("W", w), ("R", r)]
    names = ["X", "W", "R"]
    if bias:
        feeds.append(("B", rng.uniform(-0.3, 0.3, (dirs, 2 * gates * hidden)).astype(np.float32)))
        names.append("B")
    elif lens is not None or init or peephole:
        names.append("")
    if lens is not None:
        feeds.append(("sequence_lens", np.array(lens, dtype=np.int32)))
        names.append("sequence_lens")
    elif init or peephole:
        names.append("")
    state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    if init:
        feeds.append(("initial_h", rng.uniform(-0.5, 0.5, state).astype(np.float32)))
        names.append("initial_h")
        if op == "LSTM":
            feeds.append(("initial_c", rng.uniform(-0.5, 0.5, state).astype(np.float32)))
            names.append("initial_c")
    elif peephole:
        names += ["", ""]
    if peephole:
        feeds.append(("P", rng.uniform(-0.5, 0.5, (dirs, 3 * hidden)).astype(np.float32)))
        names.append("P")
    outs = ["Y", "Y_h", "Y_c"][: n_out or (3 if op == "LSTM" else 2)]
    node = helper.make_node(op, names, outs, name=name, hidden_size=hidden, layout=layout, **attrs)
    y = [batch, seq, dirs, hidden] if layout else [seq, dirs, batch, hidden]
    shapes = {"Y": y, "Y_h": list(state), "Y_c": list(state)}
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(n, TensorProto.INT32 if n == "sequence_lens" else TensorProto.FLOAT, list(a.shape))
         for n, a in feeds],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, shapes[o]) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], producer_name="probelab-gen")
    onnx.checker.check_model(model)
    return name, model, feeds


def cases():
    return [
        case("lstm_bidirectional_seq_lens_initial_state", "LSTM", {"direction": "bidirectional"}, seq=5, batch=3,
             inp=4, hidden=6, dirs=2, lens=[5, 2, 4], init=True),
        case("lstm_reverse_peepholes_clip", "LSTM", {"direction": "reverse", "clip": 0.7}, seq=4, batch=2, inp=3,
             hidden=5, dirs=1, init=True, peephole=True),
        case("lstm_input_forget_activations", "LSTM",
             {"input_forget": 1, "activations": ["HardSigmoid", "ScaledTanh", "Softsign"],
              "activation_alpha": [0.3, 0.8], "activation_beta": [0.4, 1.2]}, seq=3, batch=2, inp=4, hidden=4, dirs=1),
        case("lstm_bidirectional_seq_lens_zero_state", "LSTM", {"direction": "bidirectional"}, seq=4, batch=2, inp=3,
             hidden=5, dirs=2, lens=[3, 4], n_out=2),
        case("gru_bidirectional_seq_lens", "GRU", {"direction": "bidirectional"}, seq=5, batch=3, inp=4, hidden=6,
             dirs=2, lens=[1, 5, 3], init=True),
        case("gru_linear_before_reset_reverse", "GRU", {"direction": "reverse", "linear_before_reset": 1}, seq=4,
             batch=2, inp=5, hidden=4, dirs=1, init=True),
        case("gru_clip_activations", "GRU",
             {"clip": 0.5, "activations": ["Sigmoid", "LeakyRelu"], "activation_alpha": [0.2]}, seq=3, batch=2, inp=3,
             hidden=4, dirs=1),
        case("rnn_bidirectional_relu_seq_lens", "RNN", {"direction": "bidirectional", "activations": ["Relu", "Tanh"]},
             seq=4, batch=3, inp=3, hidden=5, dirs=2, lens=[4, 1, 3], init=True),
    ]


def write_inputs():
    for name, model, feeds in cases():
        d = os.path.join(OUT, name)
        os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
        onnx.save(model, os.path.join(d, "model.onnx"))
        spec = []
        for i, (n, a) in enumerate(feeds):
            with open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(a, n).SerializeToString())
            spec.append({"name": n, "dtype": "int32" if a.dtype == np.int32 else "float32", "dims": list(a.shape),
                         "data": a.ravel().tolist()})
        with open(os.path.join(d, "inputs.json"), "w") as f:
            json.dump({"inputs": spec, "outputs": [o.name for o in model.graph.output]}, f)
        print(f"wrote {d}")


def write_outputs():
    for name, model, _ in cases():
        d = os.path.join(OUT, name)
        with open(os.path.join(d, "outputs.json")) as f:
            outs = json.load(f)
        for i, o in enumerate(model.graph.output):
            a = np.array(outs[o.name]["data"], dtype=np.float32).reshape(outs[o.name]["dims"])
            with open(os.path.join(d, "test_data_set_0", f"output_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(a, o.name).SerializeToString())
        os.remove(os.path.join(d, "outputs.json"))
        os.remove(os.path.join(d, "inputs.json"))
        print(f"wrote {d} outputs")


if __name__ == "__main__":
    {"inputs": write_inputs, "outputs": write_outputs}[sys.argv[1] if len(sys.argv) > 1 else "inputs"]()
