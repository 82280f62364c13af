"""Arguments of run / run_all / load_scenario / campaign checked as the CLI checks its options: a bad
value is a BadInputError naming the argument (nothing runs, nothing is written), never a crash, a
hang or pybind11's signature dump; values that contain themselves are an error, not a segfault."""

import os

import pytest

import probelab


@pytest.mark.parametrize("kwargs, argument", [
    ({"seed": -1}, "seed"),
    ({"seed": 2**64}, "seed"),
    ({"timeout": -1}, "timeout"),
    ({"timeout": float("nan")}, "timeout"),
    ({"jobs": 0}, "jobs"),
    ({"jobs": 257}, "jobs"),
    ({"out": None}, "out"),
    ({"out": b"bytes"}, "out"),
    ({"out": "a\x00b"}, "out"),
    ({"set": "steps=2"}, "set"),
    ({"set": {"description": "a\x00b"}}, "set"),
])
def test_bad_run_arguments_name_the_argument(tmp_path, kwargs, argument):
    os.chdir(tmp_path)
    with pytest.raises(probelab.BadInputError) as info:
        probelab.run("07_clean_run", **{"out": tmp_path / "out", "baseline": False, **kwargs})
    assert str(info.value).startswith(argument + ":")
    assert sorted(os.listdir(tmp_path)) == []


def test_bad_campaign_arguments_name_the_argument(tmp_path):
    for kwargs, argument in [({"trials": 10**12}, "trials"), ({"trials": -1}, "trials"), ({"jobs": 0}, "jobs")]:
        with pytest.raises(probelab.BadInputError) as info:
            probelab.campaign("07_clean_run", out=tmp_path / "c", **kwargs)
        assert str(info.value).startswith(argument + ":")
    assert not (tmp_path / "c").exists()


def test_values_that_contain_themselves_or_nest_too_deep_are_errors():
    d = dict(name="x", model="mlp", steps=2)
    d["probes"] = d
    with pytest.raises(ValueError, match="contains itself"):
        probelab.load_scenario(d)
    deep = cur = {}
    for _ in range(20000):
        cur["a"] = {}
        cur = cur["a"]
    with pytest.raises(ValueError, match="nested more than 256 levels"):
        probelab.load_scenario(dict(name="x", model="mlp", probes=deep))
    with pytest.raises(ValueError, match="not valid Unicode"):
        probelab.load_scenario(dict(name="a\udc80", model="mlp"))


def test_a_generator_of_scenarios_runs_them_all(tmp_path):
    names = ["07_clean_run", "03_nan_in_softmax"]
    runs = probelab.run_all((n for n in names), out=tmp_path / "o", baseline=False, trace=False)
    assert [r.name for r in runs] == ["clean_run", "nan_in_softmax"]


def test_a_fractional_timeout_is_rounded_up_not_never():
    from probelab import _args
    assert _args.seconds("timeout", 0.5) == 1  # int(0.5) would be 0: "never"
    assert _args.seconds("timeout", 0) == 0
    assert _args.seconds("timeout", 3) == 3


@pytest.mark.parametrize("render, what, wrong", [(probelab.report_html, "report", {"comparisons": [5]}),
                                                 (probelab.campaign_html, "summary", {"complete": "x"})])
def test_html_pages_of_hand_made_dicts(render, what, wrong):
    assert "<html" in render({}).lower()  # missing fields are left out of the page
    with pytest.raises(TypeError, match="^%s: expected a dict" % what):
        render([])
    with pytest.raises(ValueError, match="^%s: a field has an unexpected type" % what):
        render(wrong)
