"""A vLLM build made of an installed build plus another commit's Python files: an overlay
folder put first on the server's PYTHONPATH (docs/bisect.md#how-a-step-is-installed).

The overlay holds the whole `vllm` package, because Python takes a regular package from the
first sys.path entry that has it and never merges two: every folder on the way to a changed
file is a real folder in the overlay, every other entry a symlink into the installed package
(compiled extension modules included: they load through the link), and the changed files are
real files. Why this and not a copied virtualenv or one whose site-packages/vllm is swapped
for a symlink farm:

- the installed build is never touched, so the good build's server and every other step keep
  running from it, and an overlay costs its changed files and a few links (milliseconds);
- one overlay per build, thrown away with the step; no interpreter, no pip, no copy of torch;
- the package's metadata (vllm-*.dist-info) stays where it was: `importlib.metadata` still
  names the installed build, and the fingerprint says the overlay is there.

It is what vLLM's precompiled mode does on a GPU (the commit's Python over another commit's
compiled binaries), with the installed build's binaries. `__pycache__` folders are never
linked, so two overlays never share (or overwrite) each other's byte code. Every process that
imports the overlay starts in a scratch folder with PYTHONSAFEPATH=1 (gate.core.child_env), so
a vLLM checkout in the caller's working directory never shadows it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath

from gate.core.child_env import code_under_test_env, scratch_cwd
from gate.core.errors import GateError

PACKAGE = "vllm"
COMPILED_SUFFIXES = (".c", ".cc", ".cpp", ".cu", ".cuh", ".h", ".hpp", ".so", ".pyx")
IMPORT_TIMEOUT_S = 600
_FIND_PACKAGE = (
    "import importlib.util, sys\n"
    "spec = importlib.util.find_spec(sys.argv[1])\n"
    "sys.stdout.write(spec.submodule_search_locations[0] if spec and "
    "spec.submodule_search_locations else '')\n"
)
_MARK = "gate-import-failures:"
# Each module imported in turn; an error names the innermost frame in the package (the line
# that failed), so that a module failing through its package's __init__ is told apart.
_IMPORT_EACH = (
    f"import importlib, json, sys, traceback\nMARK = {_MARK!r}\n"
    "failed = {}\n"
    "for name in sys.argv[1:]:\n"
    "    try:\n"
    "        importlib.import_module(name)\n"
    "    except BaseException as exc:\n"
    "        text = f'{type(exc).__name__}: {exc}'.splitlines()[0][:300]\n"
    "        files = [f for f in traceback.extract_tb(exc.__traceback__)\n"
    "                 if '/vllm/' in f.filename]\n"
    "        if files:\n"
    "            rel = 'vllm/' + files[-1].filename.rsplit('/vllm/', 1)[1]\n"
    "            text += f' (at {rel}:{files[-1].lineno})'\n"
    "        failed[name] = text\n"
    "sys.stdout.write('\\n' + MARK + json.dumps(failed) + '\\n')\n"
)


def installed_package(python: str, package: str = PACKAGE) -> Path:
    """The folder of `package` as `python` finds it (without importing it, and without the
    working directory on sys.path, as the server runs): the build an overlay goes over."""
    try:
        proc = subprocess.run([python, "-c", _FIND_PACKAGE, package], capture_output=True,
                              text=True, timeout=120, check=False,
                              env=code_under_test_env(os.environ), cwd=scratch_cwd())
    except (FileNotFoundError, PermissionError):
        raise GateError(f"python interpreter {python} cannot be run") from None
    folder = proc.stdout.strip()
    if proc.returncode != 0 or not folder:
        raise GateError(f"{python} has no installed {package} package to overlay")
    return Path(folder)


def overlayable(path: str, package: str = PACKAGE) -> bool:
    """A file an overlay can carry: inside the package and not a compiled source or binary."""
    return path.startswith(package + "/") and not path.endswith(COMPILED_SUFFIXES)


def _checked(path: str, package: str) -> PurePosixPath:
    rel = PurePosixPath(path)
    if rel.is_absolute() or ".." in rel.parts or not overlayable(path, package):
        raise GateError(f"{path!r} is not a file of the {package} package an overlay can carry")
    return rel


def build_overlay(installed: Path, dest: Path, files: Mapping[str, bytes],
                  removed: Iterable[str] = (), package: str = PACKAGE) -> Path:
    """Write the overlay folder `dest` (replacing what was there): `installed` (the package
    folder) mirrored by symlinks, `files` (paths like vllm/v1/x.py -> content) written over
    it, `removed` left out. Returns `dest`, the PYTHONPATH entry."""
    changed = {_checked(p, package): content for p, content in files.items()}
    gone = {_checked(p, package) for p in removed}
    real_dirs = {parent for rel in [*changed, *gone] for parent in rel.parents
                 if parent != PurePosixPath(".")}
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for rel_dir in sorted(real_dirs, key=lambda p: len(p.parts)):
        _mirror_dir(installed.parent, dest, rel_dir, real_dirs)
    for rel, content in changed.items():
        target = dest / rel
        if target.is_symlink():
            target.unlink()
        target.write_bytes(content)
    for rel in gone:
        if (dest / rel).is_symlink():
            (dest / rel).unlink()
    return dest


def _mirror_dir(root: Path, dest: Path, rel_dir: PurePosixPath,
                real_dirs: set[PurePosixPath]) -> None:
    """A real folder for `rel_dir`, with a link for each entry of the installed one that is
    neither a real folder itself nor byte code."""
    (dest / rel_dir).mkdir(exist_ok=True)
    source = root / rel_dir
    if not source.is_dir():
        return  # a folder the commit adds
    for entry in sorted(source.iterdir()):
        rel = rel_dir / entry.name
        if rel in real_dirs or entry.name == "__pycache__":
            continue
        (dest / rel).symlink_to(entry)


def overlay_env(overlay: Path, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server environment that imports the overlay first: PYTHONPATH starts with it
    (what was on PYTHONPATH stays behind it) and the working directory is not on sys.path."""
    current = (os.environ if env is None else env).get("PYTHONPATH", "")
    path = os.pathsep.join([str(overlay.resolve()), *([current] if current else [])])
    return {"PYTHONPATH": path, "PYTHONSAFEPATH": "1"}


def module_name(path: str) -> str | None:
    """vllm/v1/x/utils.py -> vllm.v1.x.utils (a package's __init__.py -> the package);
    None for a file that is not a module."""
    rel = PurePosixPath(path)
    if rel.suffix != ".py" or not all(p.isidentifier() for p in rel.with_suffix("").parts):
        return None
    parts = rel.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_failures(python: str, env: Mapping[str, str], modules: list[str],
                    timeout_s: float = IMPORT_TIMEOUT_S) -> dict[str, str]:
    """Import each module in a fresh `python` with the build's environment: module -> the
    error of each that does not import (empty when all do)."""
    if not modules:
        return {}
    argv = [python, "-c", _IMPORT_EACH, *modules]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                              env=code_under_test_env({**os.environ, **env}),
                              cwd=scratch_cwd(), check=False)
    except subprocess.TimeoutExpired:
        return {m: f"importing took over {timeout_s:.0f} s" for m in modules}
    except (FileNotFoundError, PermissionError):
        raise GateError(f"python interpreter {python} cannot be run") from None
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(_MARK)]
    try:
        failed = json.loads(lines[-1].removeprefix(_MARK))
    except (IndexError, ValueError):
        last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return {m: f"the interpreter failed: {last[:300]}" for m in modules}
    return {str(k): str(v) for k, v in failed.items()}
