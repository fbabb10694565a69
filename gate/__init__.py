"""gate: a CI regression gate for vLLM structured-output (guided JSON) performance."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path


def _commit(root: Path) -> str | None:
    """The commit a source checkout of the gate is at, read from its .git folder (no git
    process at import): an editable install names the code that measured, not only 0.1.0."""
    git = root / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head[:12]
        ref = head.removeprefix("ref: ")
        if (git / ref).is_file():
            return (git / ref).read_text().strip()[:12]
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0][:12]
    except OSError:
        return None
    return None


def _version() -> str:
    try:
        release = metadata.version("gate")
    except metadata.PackageNotFoundError:
        release = "0.1.0"
    commit = _commit(Path(__file__).resolve().parents[1])
    return f"{release}+g{commit}" if commit else release


# Recorded in results, calibrations and baselines' provenance: a PEP 440 local version that
# names the commit of a source checkout (0.1.0+g1234abcd5678), the release alone otherwise.
__version__ = _version()
