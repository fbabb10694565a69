"""Structured-output backends as a plan axis: each backend is measured on its own server and
judged on its own, in OUT/<backend>/, and OUT/backends.json lists them with their outcomes.

A plan that names no `backends` (and a command line that selects none) keeps the one-backend
layout, OUT/ itself. The PR workflow picks the backends whose files a PR touches (`gate
scope`) and hands them over as `--backends`; they replace the plan's list.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from gate.core.errors import GateError
from gate.core.files import load_json_model, write_atomic
from gate.core.progress import Progress
from gate.evidence.hunks import HunkSet
from gate.github.comment_file import CommentRun
from gate.judge.verdict import Outcome, Verdict, load_verdict, worst
from gate.measure.results import Results, load_results
from gate.plan.spec import BACKENDS, Plan
from gate.profile.diff_file import PROFILE_DIFF_FILE

if TYPE_CHECKING:  # the poster imports this module's index and reports: no numpy, no client
    from gate.flows import ab, run

INDEX_FILE = "backends.json"
INDEX_SCHEMA_VERSION = 1


class BackendEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    backend: str
    dir: str = Field(description="the backend's folder, relative to the index")
    outcome: Outcome
    headline: str = ""


class BackendsIndex(BaseModel):
    """OUT/backends.json: which backends were measured, where, and how each was judged."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = INDEX_SCHEMA_VERSION
    command: str = Field(description="run or ab")
    outcome: Outcome = Field(description="the worst outcome of any backend")
    backends: list[BackendEntry]


def parse_selection(text: str | None) -> list[str] | None:
    """`--backends xgrammar,guidance` as a list (None: not given)."""
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in BACKENDS]
    if not names or unknown:
        raise GateError(f"--backends {text!r}: name one or more of {', '.join(BACKENDS)}"
                        + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
    if len(set(names)) != len(names):
        raise GateError(f"--backends {text!r} names a backend twice")
    return names


def selected(plan: Plan, selection: list[str] | None) -> list[str]:
    """The backends to measure, each in its own folder; empty: the plan's one server as it is
    (the one-backend layout)."""
    return list(selection) if selection is not None else list(plan.backends)


def write_index(out: Path, command: str, entries: list[BackendEntry]) -> Path:
    index = BackendsIndex(command=command, outcome=worst([e.outcome for e in entries]),
                          backends=entries)
    path = out / INDEX_FILE
    write_atomic(path, index.model_dump_json(indent=1))
    return path


def load_index(folder: Path) -> BackendsIndex:
    return load_json_model(BackendsIndex, folder / INDEX_FILE, "backends index")


# ---------------------------------------------------------------- gate run


def run_backends(plan: Plan, names: list[str], opts: run.RunOptions, progress: Progress
                 ) -> list[tuple[str, Results, Path]]:
    """Measure each backend with its own server: (backend, results, results.json path)."""
    from gate.flows import run  # noqa: F811  measuring needs the client; listing does not
    measured = []
    for name in names:
        progress(f"backend {name}: measuring")
        backend_opts = run.RunOptions(out=opts.out / name, cache_dir=opts.cache_dir,
                                      base_url=opts.base_url, python=opts.python,
                                      label=opts.label, env=opts.env)
        results = run.measure_build(plan.for_backend(name), backend_opts, progress)
        measured.append((name, results, run.write(results, backend_opts.out)))
    return measured


# ---------------------------------------------------------------- gate ab


def for_backend(options: ab.ABOptions, name: str) -> ab.ABOptions:
    """One backend's A/B: the plan with that backend, in OUT/<backend>/ (each backend has its
    own servers, rounds and sequential test, and its own calibration: PLAN+BACKEND)."""
    return replace(options, plan=options.plan.for_backend(name), out=options.out / name)


def entry(name: str, verdict: Verdict) -> BackendEntry:
    return BackendEntry(backend=name, dir=name, outcome=verdict.outcome,
                        headline=verdict.headline)


# ---------------------------------------------------------------- the report


def backend_runs(folder: Path, hunks: HunkSet | None = None) -> list[CommentRun]:
    """One labelled run per backend of an A/B's OUT folder (verdict, results, profile diff),
    as the report and the PR comment show them: a table per backend."""
    from gate.flows.diff_artifacts import load_written  # numpy: not for the poster's lock
    index = load_index(folder)
    if index.command != "ab":
        raise GateError(f"{folder / INDEX_FILE} lists `gate {index.command}` runs; the report "
                        "needs the verdicts of `gate ab --backends`")
    runs = []
    for e in index.backends:
        where = folder / e.dir
        diff = where / "profile-diff"
        profile_diff, evidence = load_written(diff) if (diff / PROFILE_DIFF_FILE).is_file() \
            else (None, None)
        base = where / "base" / "results.json"
        runs.append(CommentRun(
            label=e.backend, verdict=load_verdict(where / "verdict.json"),
            head=load_results(where / "head"), base=load_results(base) if base.is_file() else None,
            hunks=hunks, profile_diff=profile_diff, evidence=evidence))
    return runs
