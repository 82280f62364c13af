"""Runs from Python go through the CLI's runner (a child process per simulation): the same bytes
as `probelab run`, many runs per session, and the report's sections as records."""

import json
import os

import pytest

import probelab
from conftest import cli, mlp_scenario


def test_the_same_bytes_as_the_cli(tmp_path):
    py = probelab.run("03_nan_in_softmax", out=tmp_path / "py")
    code, _, _ = cli("run", "scenarios/03_nan_in_softmax.yaml", "--out", tmp_path / "cli", cwd=probelab.source_root())
    assert code == 0 and py.passed
    for f in ("report.json", "report.html", "trace.json", "summary.txt", "dump/rank0/dump.json"):
        assert (py.out_dir / f).read_bytes() == (tmp_path / "cli" / "nan_in_softmax" / f).read_bytes(), f
    assert py.report == json.loads((py.out_dir / "report.json").read_text())


def test_a_dict_scenario_at_a_new_place(out):
    r = probelab.run(mlp_scenario(), out=out)
    assert r.passed, r.failures()
    # The latch names the injected op, element, step and rank; the NaN then reaches rank 0
    # through the gradient all-reduce and step 2 through the updated weights.
    assert [(a.op, a.step, a.rank, a.element) for a in r.anomalies(kind="invalid")] == [("fc2/gelu", 1, 1, 5)]
    assert {a.rank for a in r.anomalies()} == {0, 1}
    assert all(a.kind != "condition" for a in r.anomalies())
    assert r.report["chip"]["params"]["num_cores"] == "3"
    assert r.report["scenario"]["file"] == "<dict>"
    assert r.html_path.exists() and r.report_path.exists()
    assert "fc2/gelu" in [d.op for d in r.diagnosis()]
    assert len(r.cycles.per_rank) == 2
    assert r.capture.dropped == 0 and r.capture.records > 0
    assert probelab.open_run(r.out_dir).report == r.report


def test_many_runs_in_one_session(out):
    # SystemC elaborates once per process: were any of these simulated in this process, the
    # second would fail. Four runs, the last two in parallel children.
    a = probelab.run(mlp_scenario("s1"), out=out, baseline=False)
    b = probelab.run(mlp_scenario("s2", seed=6), out=out, baseline=False)
    c, d = probelab.run_all([mlp_scenario("s3", seed=7), mlp_scenario("s4", seed=8)], out=out, jobs=2)
    assert all(r.passed for r in (a, b, c, d))
    assert [r.name for r in (a, b, c, d)] == ["s1", "s2", "s3", "s4"]
    assert a.report["seed"] != b.report["seed"]
    assert a.report["capture"]["overhead_percent"] is None  # baseline=False: no probe-off run
    assert c.report["capture"]["overhead_percent"] is not None


def test_a_failed_expectation_is_reported_not_raised(out):
    s = mlp_scenario("fails", expectations=[{"no_detection": {}}])
    r = probelab.run(s, out=out)
    assert not r.passed and r.status == "ok"
    assert [f.kind for f in r.failures()] == ["no_detection"]
    with pytest.raises(probelab.ExpectationFailed) as info:
        r.check()
    assert "no_detection" in str(info.value)
    with pytest.raises(probelab.ExpectationFailed):
        probelab.run(s, out=out, check=True)


def test_comparisons_consistency_and_diagnosis(out):
    fused, multi = probelab.run_all(["05_fused_layernorm_relu", "02_multi_card_inconsistency"], out=out, jobs=2)
    failed = fused.comparisons(failed=True)
    assert failed and all(not c.passed for c in failed)
    worst = next(c for c in failed if c.op == "fc1/norm+relu")
    assert worst.inner_culprit == "fc1/norm" and worst.metrics.cosine < 0.99
    assert len(fused.comparisons()) > len(failed)
    cons = multi.consistency
    assert cons.checked and not cons.consistent and cons.reference_rank == 0
    divs = multi.divergences()
    assert divs and all(len(d.rank_diffs) == len(d.ranks) for d in divs)
    first = cons.first_divergence
    assert first.op.endswith("/allreduce") and first.step == 0
    assert max(v for v in first.rank_diffs) == first.max_abs_diff
    assert multi.diagnosis()[0].cause == "collective_order"


def test_progress_lines_and_callback_errors(out):
    lines = []
    probelab.run(mlp_scenario("p1"), out=out, progress=lines.append)
    assert len(lines) == 2 and "p1" in lines[0] and lines[-1].startswith("[2/2]")

    def boom(line):
        raise KeyError("from the callback")

    with pytest.raises(KeyError):
        probelab.run(mlp_scenario("p2"), out=out, progress=boom)
    assert (out / "p2" / "report.json").exists()  # the run itself completed


def test_the_sessions_own_children_keep_their_exit_status(out):
    import subprocess
    p = subprocess.Popen(["sh", "-c", "exit 7"])
    probelab.run(mlp_scenario("own_children"), out=out)  # the child above ends while this runs
    assert p.wait() == 7


def test_variants_of_a_dict_scenario(out):
    # Variants re-parse the scenario's own text: a dict has no file to read again.
    s = mlp_scenario("with_variants", variants=[{"name": "single", "set": {"probes.capture.ping_pong": False}},
                                                 {"name": "one_core", "set": {"chip.overrides.num_cores": 1}}])
    s["expectations"].append({"capture": {"dropped": 0, "variant": "single"}})
    r = probelab.run(s, out=out)
    assert r.passed, r.failures()
    v = {x.name: x for x in r.variants()}
    assert set(v) == {"single", "one_core"} and all(x.status == "ok" for x in v.values())
    assert v["one_core"].cycles > r.cycles.total  # fewer cores, more cycles
    assert r.dumps(variant="single")


def test_ctrl_c_raises_keyboard_interrupt_and_the_session_goes_on(tmp_path):
    # SIGINT in the middle of a run: the workers are killed, the scratch directory removed, the
    # session gets KeyboardInterrupt and can run again (the interpreter is not ended by it).
    import subprocess
    import sys
    import textwrap
    script = textwrap.dedent(f"""
        import os, signal, threading, time, probelab
        slow = dict(name="py_slow", model="transformer_block", chip="tiny", mode="training", steps=400,
                    seed=1, probes=dict(mode="full", watch_points=["*"]))
        out = {str(tmp_path / "out")!r}
        def interrupt():  # once the run writes its scratch directory
            while not (os.path.isdir(out) and any(n.startswith(".py_slow.partial-") for n in os.listdir(out))):
                time.sleep(0.02)
            time.sleep(0.3)
            os.kill(os.getpid(), signal.SIGINT)
        threading.Thread(target=interrupt, daemon=True).start()
        try:
            probelab.run(slow, out=out, baseline=False)
            print("finished")
        except KeyboardInterrupt:
            print("interrupted", sorted(os.listdir(out)))
        r = probelab.run(dict(slow, name="py_after", steps=1), out=out, baseline=False)
        print("after", r.status, r.passed)
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, SYSTEMC_DISABLE_COPYRIGHT_MESSAGE="1"))
    assert p.returncode == 0, p.stderr
    assert "interrupted []" in p.stdout, p.stdout + p.stderr
    assert "after ok True" in p.stdout, p.stdout + p.stderr


def test_a_job_hang_is_a_result(out):
    # ZeRO-1 whose loss-scaling skip is not all-reduced: rank 13 alone skips at step 1 and runs
    # step 2's reduce-scatter while the others still all-gather step 1's shards.
    r = probelab.run(os.path.join(probelab.source_root(), "scenarios/float_status/zero1_rank_skip_hang.yaml"), out=out,
                     baseline=False, trace=False)
    assert r.passed and r.status == "hang", r.failures()
    assert {b.rank for b in r.hang.blocked} == set(range(16))
    assert [(b.step, b.waits_for) for b in r.hang.blocked if b.rank == 13] == [(2, 12)]
    assert "step 1: r13 skipped" in " ".join(r.hang.explanation)
    assert probelab.run(mlp_scenario(), out=out).hang is None
