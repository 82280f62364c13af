"""The registries from Python are the CLI's (`probelab list --json`) and hold what scenarios use."""

import json

import probelab
from conftest import cli


def test_registries_match_the_cli():
    code, stdout, _ = cli("list", "--json")
    assert code == 0
    assert json.loads(stdout) == probelab.registries()


def test_registries_hold_what_the_bundled_scenarios_use():
    names = {i.name for i in probelab.injectors()}
    assert {"nan", "bitflip", "collective_order"} <= names
    nan = next(i for i in probelab.injectors() if i.name == "nan")
    assert {"op", "element", "step", "rank"} <= {p.name for p in nan.params}
    ops = {o.type: o for o in probelab.ops()}
    assert "Softmax" in ops and "MatMul" in ops and "FusedLayerNormRelu" in ops
    assert any(o.backward for o in ops.values())
    cores = next(c for c in probelab.chips() if c.name == "num_cores")
    assert cores.default == "24" and cores.type == "uint" and cores.min >= 1
    tiny = next(p for p in probelab.chip_presets() if p.name == "tiny")
    assert tiny.differs["num_cores"] == "2"
    kinds = {k.kind for k in probelab.expectation_kinds()}
    assert {"detection", "no_detection", "comparison", "consistency", "diagnosis", "capture"} <= kinds
    assert "nan" in probelab.detection_kinds()
    assert "nan_source" in probelab.causes()
    assert any(o.key == "watch_points" for o in probelab.probe_options())


def test_record_fields_read_as_attributes_and_say_what_exists():
    op = probelab.ops()[0]
    assert op.type == op["type"]
    try:
        op.no_such_field
    except AttributeError as e:
        assert "type" in str(e)
    else:
        raise AssertionError("no AttributeError")
