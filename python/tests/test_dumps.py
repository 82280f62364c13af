"""Dumps as numpy arrays: zstd and XOR-delta decoded, dtype and shape from the manifest, the same
values as an uncompressed dump of the same run and as the device's own statistics."""

import numpy as np
import pytest

import probelab


def dump_scenario(name, output, compute="fp16"):
    return {
        "name": name,
        "chip": "tiny",
        "model": "mlp",
        "mode": "training",
        "training": {"loss": "model", "optimizer": {"type": "sgd", "lr": 0.01}},
        "steps": 3,
        "seed": 13,
        "precision": {"compute": compute},
        "probes": {"mode": "full", "watch_points": ["fc*", "*/updated"], "output": output},
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("dumps")
    packed, plain, bf16 = probelab.run_all(
        [dump_scenario("packed", {"compression": "zstd", "delta": True}),
         dump_scenario("plain", {"compression": "none", "delta": False}),
         dump_scenario("bf16", {"compression": "zstd", "delta": True}, compute="bf16")],
        out=out, jobs=2, baseline=False, trace=False)
    return packed, plain, bf16


def test_compressed_deltas_decode_to_the_plain_dump(runs):
    packed, plain, _ = runs
    a = [d for d in packed.dumps() if d.has_data]
    b = [d for d in plain.dumps() if d.has_data]
    assert len(a) == len(b) > 20
    assert any(d.encoding == "xor_delta" for d in a), "no delta-encoded entry: the test would prove nothing"
    assert all(d.compression == "zstd" for d in a) and all(d.file.endswith(".zst") for d in a)
    assert all(d.encoding == "raw" for d in b)
    for x, y in zip(a, b):
        assert (x.op, x.step, x.edge) == (y.op, y.step, y.edge)
        u, v = x.array(), y.array()
        assert u.dtype == v.dtype and u.shape == v.shape
        assert np.array_equal(u.view(np.uint8), v.view(np.uint8)), (x.op, x.step, x.edge)


def test_dtype_shape_and_values_follow_the_manifest(runs):
    packed, _, _ = runs
    checked = 0
    for d in packed.dumps():
        if not d.has_data:
            continue
        x = d.array()
        assert str(x.dtype) == d.dtype
        assert list(x.shape) == d.shape
        st = d.statistics
        f = x.astype(np.float64)
        assert int(np.isnan(f).sum()) == st.nan_count
        finite = f[np.isfinite(f)]
        if finite.size:
            assert finite.min() == pytest.approx(st.min, rel=1e-6, abs=1e-12)
            assert finite.max() == pytest.approx(st.max, rel=1e-6, abs=1e-12)
            assert finite.mean() == pytest.approx(st.mean, rel=1e-4, abs=1e-9)
        checked += 1
    assert checked > 20


def test_bfloat16_arrives_as_exact_float32(runs):
    _, _, bf16 = runs
    d = next(d for d in bf16.dumps() if d.has_data and d.dtype == "bfloat16")
    x = d.array()
    assert x.dtype == np.float32 and list(x.shape) == d.shape
    assert not np.any(x.view(np.uint32) & 0xFFFF), "a bfloat16 value has low mantissa bits"


def test_one_tensor_by_name_and_the_fetched_outputs(runs):
    packed, _, _ = runs
    x = packed.dump("fc1/matmul", step=2)
    y = next(d for d in packed.dumps(op="fc1/matmul", step=2, edge="out0") if d.has_data).array()
    assert np.array_equal(x.view(np.uint8), y.view(np.uint8))
    assert len(packed.dumps(op="fc*")) < len(packed.dumps())
    with pytest.raises(KeyError) as info:
        packed.dump("no/such/op")
    assert "fc1/matmul" in str(info.value)
    outs = packed.outputs()
    assert "loss" in outs and outs["loss"].size == 1


def test_a_corrupted_dump_is_refused(runs, tmp_path):
    import shutil
    packed, _, _ = runs
    copy = tmp_path / "copy"
    shutil.copytree(packed.out_dir, copy)
    run = probelab.open_run(copy)
    d = next(d for d in run.dumps() if d.has_data)
    path = copy / "dump" / ("rank%d" % d.rank) / d.file
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))
    with pytest.raises(probelab.BadInputError) as info:  # a damaged file: bad input, as in `compare`
        d.array()
    assert "crc" in str(info.value).lower() or "zstd" in str(info.value).lower()


@pytest.mark.parametrize("edit", ["shape", "dtype", "not_json"])
def test_an_edited_manifest_is_refused(runs, tmp_path, edit):
    import json
    import shutil
    packed, _, _ = runs
    copy = tmp_path / "copy"
    shutil.copytree(packed.out_dir, copy)
    manifest = copy / "dump" / "rank0" / "dump.json"
    if edit == "not_json":
        manifest.write_text(manifest.read_text()[:-40])
    else:
        m = json.loads(manifest.read_text())
        entry = next(e for e in m["entries"] if "file" in e)
        entry["shape"] = [1] if edit == "shape" else entry["shape"]
        entry["dtype"] = "int32" if edit == "dtype" else entry["dtype"]
        manifest.write_text(json.dumps(m))
    with pytest.raises(probelab.BadInputError) as info:  # as `probelab compare` refuses it
        probelab.open_run(copy).dumps()
    assert str(manifest) in str(info.value)
    assert ("manifest_crc32 mismatch" if edit != "not_json" else "not valid JSON") in str(info.value)
