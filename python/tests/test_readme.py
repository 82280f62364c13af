"""The README's Python tutorial runs as written (from a directory that looks like the repository
root: scenarios/ beside it, outputs under out/)."""

import os
import re
import subprocess
import sys

from conftest import SOURCE_DIR


def tutorial():
    text = (SOURCE_DIR / "README.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Python\n"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_tutorial_runs(tmp_path):
    (tmp_path / "scenarios").symlink_to(SOURCE_DIR / "scenarios")
    (tmp_path / "tutorial.py").write_text(tutorial())
    p = subprocess.run([sys.executable, "tutorial.py"], cwd=tmp_path, capture_output=True, text=True,
                       env=dict(os.environ), timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert "invalid attn/softmax 5 1 source" in out           # the latch: op, element, step, role
    assert "injections[0].step |" in out                      # the error names the key
    assert (tmp_path / "out" / "tutorial_nan" / "report.html").exists()
    assert (tmp_path / "out" / "campaign" / "transformer_nan_bitflip" / "summary.html").exists()
