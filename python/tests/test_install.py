"""`cmake --install build --component python` (the README's step) makes `import probelab` work for
Debian's python3 without PYTHONPATH: checked with a staged install (DESTDIR), in a fresh
interpreter that sees only the staged site directory."""

import os
import pathlib
import shutil
import subprocess
import sys

from conftest import BUILD_DIR


def test_the_installed_pth_file_imports_the_build(tmp_path):
    site = os.environ.get("PROBELAB_PYTHON_SITE")
    assert site, "PROBELAB_PYTHON_SITE is set by CTest"
    cmake = shutil.which("cmake")
    p = subprocess.run([cmake, "--install", str(BUILD_DIR), "--component", "python"], capture_output=True, text=True,
                       env=dict(os.environ, DESTDIR=str(tmp_path)))
    assert p.returncode == 0, p.stderr
    staged = pathlib.Path(str(tmp_path) + site)
    pth = staged / "probelab.pth"
    assert pth.read_text().strip() == str(BUILD_DIR / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PROBELAB_SOURCE_DIR")}
    code = ("import site, sys; site.addsitedir(%r); import probelab; "
            "print(probelab.__file__); print(probelab.source_root()); print(len(probelab.ops()))" % str(staged))
    # -S: no site directory of the machine (an earlier install elsewhere) is seen, only the staged one.
    p = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    file, root, ops = p.stdout.split()
    assert pathlib.Path(file).parent == BUILD_DIR / "python" / "probelab"
    assert (pathlib.Path(root) / "scenarios").is_dir()  # the source tree, found from the build info
    assert int(ops) > 20

