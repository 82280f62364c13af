"""Campaigns from Python: the same summary bytes as `probelab campaign`, scores per kind and per
op, the trials, summary.html beside summary.json."""

import json

import pytest

import probelab
from conftest import cli

CAMPAIGN = "scenarios/campaigns/transformer_nan_bitflip.yaml"


def test_the_same_summary_as_the_cli(tmp_path):
    root = probelab.source_root()
    res = probelab.campaign(f"{root}/{CAMPAIGN}", trials=24, jobs=2, out=tmp_path / "py", seed=5)
    code, _, err = cli("campaign", CAMPAIGN, "--trials", 24, "--jobs", 2, "--seed", 5, "--out", tmp_path / "cli", cwd=root)
    assert code == 0, err
    for f in ("summary.json", "summary.html", "trials.csv", "summary.txt"):
        assert (res.out_dir / f).read_bytes() == (tmp_path / "cli" / f).read_bytes(), f
    assert res.summary == json.loads((tmp_path / "cli" / "summary.json").read_text())
    assert res.complete and res.name == "transformer_nan_bitflip"
    o = res.overall
    assert o.trials == 24 and sum(o.outcomes.values()) == 24
    assert set(res.by_kind) == {"nan", "bitflip"}
    assert sum(g.trials for g in res.by_kind.values()) == 24
    assert sum(g.trials for g in res.by_op.values()) == 24
    lo, hi = o.coverage.ci95
    assert lo <= o.coverage.rate <= hi
    trials = res.trials()
    assert [t.index for t in trials] == list(range(24))
    assert {t.outcome for t in trials} <= {"top1", "top3", "mislocalized", "detected", "masked", "sdc", "crash",
                                            "hang", "not_fired"}
    assert res.html_path.exists()
    again = probelab.open_campaign(res.out_dir)
    assert again.summary == res.summary


def test_faults_and_progress(tmp_path):
    seen = []
    res = probelab.campaign(f"{probelab.source_root()}/{CAMPAIGN}", trials=6, jobs=2, out=tmp_path / "c",
                            faults=[{"kind": "nan", "ops": ["attn/*"]}], progress=seen.append)
    assert set(res.by_kind) == {"nan"}
    assert all(op.startswith("attn/") for op in res.by_op)
    assert [p["done"] for p in seen] == list(range(1, 7)) and seen[-1]["total"] == 6


def test_campaign_bad_input(tmp_path):
    with pytest.raises(probelab.BadInputError):
        probelab.campaign("03_nan_in_softmax", trials=2, out=tmp_path / "x")  # no campaign: section
    with pytest.raises(TypeError):
        probelab.campaign({"name": "x", "model": "mlp"}, trials=2)


def test_dead_links_are_scored_on_the_hang(tmp_path):
    # Every trial either hangs and names its dead link first, or carries nothing after the link
    # died and finishes untouched; the trial's truth is the link, its cause link_down.
    res = probelab.campaign(f"{probelab.source_root()}/scenarios/campaigns/link_down.yaml", trials=16, jobs=2,
                            out=tmp_path / "links")
    assert set(res.by_kind) == {"link_down"}
    trials = res.trials()
    assert {t.outcome for t in trials} <= {"top1", "masked"}
    hung = [t for t in trials if t.outcome == "top1"]
    assert hung and len(hung) < len(trials)
    for t in hung:
        assert t.observation.job_hang and t.observation.hang_links[0] in t.truth_ops
        assert t.cause_correct and t.truth_cause == "link_down"
        assert t.latency_cycles >= 1800 * 1000 * 1000  # the hosts' 1 s synchronize timeout at 1.8 GHz
    with pytest.raises(probelab.BadInputError, match="a link to another chip"):
        probelab.campaign("03_nan_in_softmax", trials=2, out=tmp_path / "x", faults=[{"kind": "link_down"}])
