"""The runner check the GPU jobs run first (gate.github.runner_check, scripts/check_runner.py;
security review M2): from the pinned gate's own files, with the system's Python, `-I -S`, so
before anything is installed: it must import nothing but the standard library, refuse with
its reasons and export nothing, exactly as `gate trust check-runner` does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.paths import REPO_ROOT

from gate.github import runner_check

SCRIPT = REPO_ROOT / "scripts" / "check_runner.py"
SYSTEM_PYTHON = "/usr/bin/python3"  # what the workflows and action.yml run it with


def test_the_check_imports_only_the_standard_library():
    """Run as the workflows run it: no site-packages, so any import of pydantic (or anything
    pip installed) would fail; and the modules it loaded are all the interpreter's own."""
    code = (f"import sys, json; sys.path.insert(0, {str(REPO_ROOT)!r}); "
            "import gate.github.runner_check; "
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    proc = subprocess.run([SYSTEM_PYTHON, "-I", "-S", "-c", code], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout)) - {"gate"}
    assert loaded <= set(sys.stdlib_module_names) | {"__main__"}, loaded - set(
        sys.stdlib_module_names)
    assert "pydantic" not in loaded


def runner(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "temp").mkdir()
    (tmp_path / "env").write_text("")
    return {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "RUNNER_NAME": "gpu-1",
            "RUNNER_TEMP": str(tmp_path / "temp"), "GITHUB_ENV": str(tmp_path / "env")}


def test_the_script_refuses_an_unproven_runner_and_exports_nothing(tmp_path):
    hub = tmp_path / "hub"
    hub.mkdir()
    proc = subprocess.run(
        [SYSTEM_PYTHON, "-I", "-S", str(SCRIPT), "--marker", str(tmp_path / "none.json"),
         "--model-cache", str(hub), "--metadata", "127.0.0.1:9"],
        capture_output=True, text=True, env=runner(tmp_path), cwd=tmp_path, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    first = "the job runs as uid 0" if os.getuid() == 0 else "no runner marker at"
    assert f"gate trust: refused: {first}" in proc.stderr
    assert "no Runner.Worker process above this one" in proc.stderr
    assert proc.stderr.rstrip().endswith("see docs/security.md, 'Provisioning a GPU runner'")
    assert "Traceback" not in proc.stderr
    assert (tmp_path / "env").read_text() == ""
    assert not (tmp_path / "temp" / runner_check.JOB_CACHE).exists()


def test_the_script_and_the_command_share_their_arguments(tmp_path):
    proc = subprocess.run([SYSTEM_PYTHON, "-I", "-S", str(SCRIPT), "--help"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "--model-cache" in proc.stdout and "--job-cache" in proc.stdout
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    gate = subprocess.run([sys.executable, "-m", "gate.cli", "trust", "check-runner", "--help"],
                          capture_output=True, text=True, env=env, timeout=60)
    for option in ("--marker", "--marker-owner", "--model-cache", "--metadata", "--job-cache"):
        assert option in proc.stdout and option in gate.stdout
    bad = subprocess.run([SYSTEM_PYTHON, "-I", "-S", str(SCRIPT)], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "--model-cache" in bad.stderr
