"""Loading and validating scenarios in-process: the same errors as the CLI, as exceptions that
carry file, line, key and what was expected."""

import pytest

import probelab
from conftest import cli, mlp_scenario

BAD = {
    "unknown_key": ("name: x\nmodel: mlp\nstepz: 3\n", "stepz", 3),
    "step_out_of_range": ("name: x\nmodel: mlp\nsteps: 2\ninjections:\n  - {kind: nan, op: fc1/matmul, step: 5}\n",
                          "injections[0].step", 5),
    "unknown_model": ("name: x\nmodel: no_such_model\n", "model", 2),
    "malformed_yaml": ("name: x\nmodel: mlp\nsteps: [1\n", None, 4),
    "bad_probe_mode": ("name: x\nmodel: mlp\nprobes: {mode: bogus}\n", "mode", 3),
    "unmatched_op": ("name: x\nmodel: mlp\ninjections:\n  - {kind: nan, op: nosuchop}\n", "injections[0]", 4),
    "bad_expectation": ("name: x\nmodel: mlp\nexpectations:\n  - detection: {kind: nan, step: 9}\n", None, 4),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_file_errors_are_the_clis(tmp_path, case):
    text, key, line = BAD[case]
    f = tmp_path / (case + ".yaml")
    f.write_text(text)
    code, _, stderr = cli("run", f, "--out", tmp_path / "out")
    assert code == 2
    with pytest.raises(probelab.ScenarioError) as info:
        probelab.load_scenario(f)
    e = info.value
    assert stderr.strip() == "probelab: error: " + str(e)   # the very message the CLI prints
    assert e.file == str(f)
    if key is not None:
        assert e.key == key
    assert e.line == line
    assert isinstance(e, probelab.BadInputError) and isinstance(e, ValueError)
    assert not (tmp_path / "out").exists()  # nothing written on bad input
    with pytest.raises(probelab.ScenarioError):
        probelab.run(f, out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_dict_errors_name_the_key():
    with pytest.raises(probelab.ScenarioError) as info:
        probelab.load_scenario(mlp_scenario(steps=1))  # the NaN's step 1 is not below steps 1
    assert info.value.key == "injections[0].step" and info.value.file == "<dict>"
    with pytest.raises(probelab.BadInputError) as info:
        probelab.load_scenario(mlp_scenario(chip={"preset": "tiny", "overrides": {"num_cores": 0}}))
    assert "num_cores" in str(info.value) and "chip.overrides" in str(info.value)
    with pytest.raises(TypeError) as info:
        probelab.load_scenario(mlp_scenario(seed=object()))
    assert "'seed'" in str(info.value)


def test_missing_file_and_bundled_names(tmp_path):
    with pytest.raises(probelab.ScenarioError) as info:
        probelab.load_scenario(tmp_path / "nope.yaml")
    assert "cannot open" in str(info.value)
    s = probelab.load_scenario("03_nan_in_softmax")
    assert s.name == "nan_in_softmax" and s.steps == 3 and s.probes and s.model == "transformer_block"
    assert [e["kind"] for e in s.expectations] == ["detection", "detection", "diagnosis"]
    names = [p.name for p in probelab.bundled_scenarios()]
    assert names == sorted(names) and "03_nan_in_softmax.yaml" in names and len(names) >= 8


def test_overrides_as_dict_and_as_strings():
    s = probelab.load_scenario("03_nan_in_softmax", set={"steps": 4, "injections.0.element": 3}, seed=99)
    assert s.steps == 4 and s.seed == 99
    assert "element: 3" in s.yaml
    t = probelab.load_scenario("03_nan_in_softmax", set=["steps=4", "probes.watch_points=[\"*\"]"])
    assert t.steps == 4
    with pytest.raises(probelab.ScenarioError) as info:
        probelab.load_scenario("03_nan_in_softmax", set={"injections.7.step": 1})
    assert "injections" in info.value.key


def test_a_dict_scenario_validates_like_its_file(tmp_path):
    d = mlp_scenario()
    s = probelab.load_scenario(d)
    assert (s.name, s.ranks, s.steps, s.chip, s.probes, s.injections) == ("py_mlp_nan", 2, 3, "tiny", True, 1)
    assert s.executed_ops > 0
    f = tmp_path / "same.yaml"
    f.write_text(probelab.to_yaml(d))
    assert probelab.load_scenario(f).yaml == s.yaml
    # An error's line in a dict is the line of to_yaml(d) holding the key.
    bad = mlp_scenario(steps=1)
    with pytest.raises(probelab.ScenarioError) as info:
        probelab.load_scenario(bad)
    line = probelab.to_yaml(bad).splitlines()[info.value.line - 1]
    assert "step: 1" in line
