"""The two sides of an A/B (or of a calibration's A/A): what each build is, what it measured so
far across blocks, servers and resumed runs, and what makes the two no fair pair (another
model runner, another KV cache, a vLLM from outside the build, one GPU for two servers that
size their KV caches from free memory).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from gate.core.errors import GateError, MeasurementError
from gate.core.progress import Progress
from gate.flows import run
from gate.measure.measured_build import MeasuredBuild
from gate.measure.results import Results, ServerInfo
from gate.plan import runner_pin
from gate.plan.spec import Plan
from gate.runner.doctor import DoctorReport, Finding
from gate.runner.fingerprint import Fingerprint, ServedFacts


@dataclass(kw_only=True)
class Build:
    """One side of the A/B: the interpreter whose vLLM to launch, plus its own environment."""

    label: str
    python: str = field(default_factory=lambda: sys.executable)
    env: dict[str, str] = field(default_factory=dict)


def resolve_python(spec: str | None) -> str:
    """An interpreter path, or a virtualenv folder (its bin/python); None: this interpreter."""
    if not spec:
        return sys.executable
    path = Path(spec)
    if path.is_dir():
        path = path / "bin" / "python"
    if not path.is_file():
        raise GateError(f"{spec} is neither a Python interpreter nor a virtualenv folder")
    return str(path)


class SideError(MeasurementError):
    """A measurement that broke on one side of the A/B: `side` says which ("both" when the
    two sides cannot be compared at all, e.g. their servers run different model runners)."""

    def __init__(self, side: str, cause: MeasurementError):
        super().__init__(str(cause))
        self.side = side


@contextlib.contextmanager
def blame(side: Side) -> Iterator[None]:
    """A measurement that breaks inside the block is this side's."""
    try:
        yield
    except SideError:
        raise
    except MeasurementError as exc:
        raise SideError(side.label, exc) from exc


@dataclass(kw_only=True)
class Side:
    """Everything measured on one build so far, across blocks, servers and resumed runs."""

    build: Build
    out: Path
    info: ServerInfo
    fingerprint: Fingerprint
    earlier: Results | None = None  # what the run before a resume measured
    measured: list[MeasuredBuild] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.build.label

    def results(self, plan: Plan, *, rounds: int, max_rounds: int) -> Results:
        res = run.assemble(plan.model_copy(update={"repeats": max(rounds, 1)}), self.label,
                           fp=self.fingerprint, info=self.info, measured=self._merged(),
                           errors=self.errors, timings={})
        if self.earlier is not None:
            timings = dict(self.earlier.timings_s)
            for key, value in res.timings_s.items():
                timings[key] = timings.get(key, 0.0) + value
            res = res.model_copy(update={"timings_s": timings,
                                         "errors": self.earlier.errors + res.errors})
        return res.model_copy(update={"sequential_rounds": max_rounds})

    def _merged(self) -> MeasuredBuild | None:
        """One measured build holding every cell and record so far (and the doctor's findings)."""
        if not self.measured and self.earlier is None:
            return None
        first = self.measured[0] if self.measured else None
        plan = first.plan if first else self.earlier.plan  # type: ignore[union-attr]
        merged = MeasuredBuild(plan=plan, label=self.label, base_url="", model_name="",
                               progress=Progress(quiet=True))
        findings: dict[tuple[str, str], Finding] = {}
        parts: list[Results | MeasuredBuild] = [*([self.earlier] if self.earlier else []),
                                                *self.measured]
        for part in parts:
            merged.records += part.records
            merged.cells += part.cells
            for f in part.doctor.findings if part.doctor else []:
                findings.setdefault((f.id, f.title), f)
        for s in self.measured:
            for k, v in s.timings.items():
                merged.timings[k] = merged.timings.get(k, 0.0) + v
        merged.doctor = DoctorReport(findings=list(findings.values()),
                                     served=_one_served(self.measured))
        return merged


def _one_served(measured: list[MeasuredBuild]) -> ServedFacts | None:
    """What the servers of one build showed: the first's, or every runner they named when
    its servers ran on different runners (the judge then calls the measurement an error)."""
    served = [s.doctor.served for s in measured if s.doctor and s.doctor.served]
    runners = sorted({r for s in served for r in [s.model_runner, *s.runner_conflict] if r})
    if len(runners) > 1:
        return ServedFacts(runner_conflict=runners)
    return served[0] if served else None


def make_side(plan: Plan, build: Build, *, out: Path, cache_dir: Path) -> Side:
    opts = run.RunOptions(out=out / build.label, cache_dir=cache_dir, python=build.python,
                          label=build.label, env=build.env)
    return Side(build=build, out=opts.out, info=run.server_info(plan, opts),
                fingerprint=run.collect_fingerprint(plan, opts, {}))


# ---------------------------------------------------------------- a fair pair


def _differing(base: MeasuredBuild, head: MeasuredBuild, fact: str) -> dict | None:
    """One fact the runner doctor read from each server's log, by side, when both logs say it
    and they differ; None otherwise (unread is not a mismatch)."""
    seen = {s.label: getattr(s.doctor.served, fact) if s.doctor and s.doctor.served else None
            for s in (base, head)}
    return None if None in seen.values() or seen["base"] == seen["head"] else seen


def runner_mismatch(base: MeasuredBuild, head: MeasuredBuild) -> str | None:
    """Why the two builds' servers cannot be compared: they run different model runners."""
    if (runners := _differing(base, head, "model_runner")) is None:
        return None
    return (f"the base server runs the {runner_pin.label(runners['base'])} and the head "
            f"server the {runner_pin.label(runners['head'])}: their structured-output code "
            "paths differ, so the A/B is not measured; pin one runner for both "
            "(VLLM_USE_V2_MODEL_RUNNER in the plan's server.env, or --model-runner)")


def kv_mismatch(base: MeasuredBuild, head: MeasuredBuild) -> str | None:
    """Why the pair is not a fair pair: their KV caches differ (what each can batch)."""
    if (kv := _differing(base, head, "kv_cache_tokens")) is None:
        return None
    return (f"the base server's KV cache holds {kv['base']:,} tokens and the head's "
            f"{kv['head']:,} (their logs): the pair can batch differently, an asymmetry the A/B "
            "would blame on the code; fix the KV cache size (server.kv_cache_memory_bytes, or "
            "VLLM_CPU_KVCACHE_SPACE on CPU)")


def refuse_other_runner(sides: dict[str, Side]) -> None:
    """Stop before measuring on a server whose model runner or KV cache is not the other
    build's."""
    base, head = sides["base"].measured, sides["head"].measured
    if base and head and (mismatch := runner_mismatch(base[-1], head[-1])
                          or kv_mismatch(base[-1], head[-1])):
        raise SideError("both", MeasurementError(mismatch))


def shared_gpu_problem(plan: Plan, sides: dict[str, Side]) -> str | None:
    """Two servers on one GPU started with KV caches sized from free memory: refused."""
    on_gpu = any(side.fingerprint.gpus for side in sides.values())
    if on_gpu and plan.ab.servers == "persistent" and plan.server.kv_cache_memory_bytes is None:
        return ("both servers of a pair share the GPU, and vLLM sizes each one's KV cache from "
                "the memory free when it starts: set server.kv_cache_memory_bytes in the plan "
                "(one fixed size for both), or ab.servers: per_round")
    return None


def origin_problems(plan: Plan, sides: dict[str, Side]) -> list[str]:
    """Why the two sides would not measure the builds they name: a build whose vLLM comes from
    outside it (not its interpreter's prefix, its editable source or a PYTHONPATH entry it sets
    itself: a checkout in the working directory, a leaked PYTHONPATH), or two different builds
    that import one and the same vllm folder (the A/B would be an A/A)."""
    out, origins = [], {}
    for label, side in sides.items():
        origin = side.fingerprint.vllm_origin
        if origin is None:
            continue  # no vLLM found: the server's start says why
        env = {**plan.server.env, **side.build.env}
        own = [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        if not origin.belongs_to(own):
            out.append(f"the {label} build imports vllm from {origin.path}, outside the build "
                       f"({side.build.python}: prefix {origin.prefix}"
                       + (f", editable source {origin.editable_source}" if origin.editable_source
                          else "") + (f", PYTHONPATH {os.pathsep.join(own)}" if own else "")
                       + ")")
        origins[label] = origin
    if len(origins) == 2:
        # Two interpreters (their own prefixes) are two builds; one interpreter with another
        # environment (a fixture, an overlay) is one build, or an overlay whose folder differs.
        base, head = origins["base"], origins["head"]
        if base.prefix != head.prefix and \
                os.path.realpath(base.path) == os.path.realpath(head.path):
            out.append(f"the base ({sides['base'].build.python}) and the head "
                       f"({sides['head'].build.python}) are different builds but both import "
                       f"vllm from {base.path}: the A/B would measure one build twice")
    return out
