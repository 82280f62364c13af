"""Shared pieces of the Python API tests (run by CTest with PYTHONPATH=build/python)."""

import os
import pathlib
import subprocess

import pytest

import probelab

SOURCE_DIR = pathlib.Path(os.environ.get("PROBELAB_SOURCE_DIR", probelab.source_root()))
BINARY = os.environ.get("PROBELAB_BINARY", str(SOURCE_DIR / "build" / "probelab"))
BUILD_DIR = pathlib.Path(os.environ.get("PROBELAB_BUILD_DIR", SOURCE_DIR / "build"))


def cli(*args, cwd=None):
    """Runs the probelab executable; returns (exit code, stdout, stderr)."""
    p = subprocess.run([BINARY] + [str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                       env=dict(os.environ, SYSTEMC_DISABLE_COPYRIGHT_MESSAGE="1"))
    return p.returncode, p.stdout, p.stderr


# A small MLP scenario the bundled suite does not have: 2 ranks, chip overrides, a NaN at a
# place no bundled scenario uses (fc2/gelu, rank 1, step 1, element 5).
def mlp_scenario(name="py_mlp_nan", **extra):
    s = {
        "name": name,
        "description": "a NaN in the second layer of rank 1 at step 1",
        "chip": {"preset": "tiny", "overrides": {"num_cores": 3}},
        "ranks": 2,
        "model": "mlp",
        "mode": "training",
        "training": {"loss": "model", "optimizer": {"type": "sgd", "lr": 0.01}},
        "steps": 3,
        "seed": 5,
        "probes": {"mode": "statistics", "watch_points": ["*"], "consistency": {"enabled": True}},
        "injections": [{"kind": "nan", "op": "fc2/gelu", "element": 5, "step": 1, "rank": 1}],
        "expectations": [{"detection": {"kind": "nan", "op": "fc2*", "element": 5, "step": 1, "rank": 1}}],
    }
    s.update(extra)
    return s


@pytest.fixture
def out(tmp_path):
    return tmp_path / "out"
