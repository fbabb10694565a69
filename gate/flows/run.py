"""`gate run`: measure one build with a plan and write results.json.

Open a measured build on the build's server (start it, or reach it by URL), warm up, then per repeat
measure the drain and the sweep cells in the plan's order (gate.measure.measured_build). The server is
stopped on every exit path; a broken measurement still yields Results, with status `error`
and the reasons, and never replaces a stored results.json.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from gate.core.errors import MeasurementError
from gate.core.progress import Progress
from gate.measure import metrics
from gate.measure.measured_build import (
    Launch,
    MeasuredBuild,
    cells_for_repeat,
    open_measured_build,
    timed,
)
from gate.measure.results import Results, ServerInfo, save_results
from gate.plan.spec import Plan
from gate.runner import fingerprint
from gate.runner.fingerprint import Fingerprint


@dataclass
class RunOptions:
    out: Path
    cache_dir: Path  # where the tiny model is built (Settings.cache_dir)
    base_url: str | None = None
    python: str | None = None
    label: str = "head"
    env: dict[str, str] = field(default_factory=dict)  # this build's environment (A/B arms)

    def launch(self) -> Launch:
        return Launch(self.label, self.out, cache_dir=self.cache_dir, python=self.python,
                      env=self.env, base_url=self.base_url)


def server_info(plan: Plan, opts: RunOptions) -> ServerInfo:
    return ServerInfo(base_url=opts.base_url or "", started_by_gate=opts.base_url is None,
                      model=plan.server.model or "tiny", env_overrides=opts.env)


def collect_fingerprint(plan: Plan, opts: RunOptions, timings: dict[str, float]) -> Fingerprint:
    with timed(timings, "fingerprint_s"):
        env = {**os.environ, **plan.server.env, **opts.env}  # the server's own environment
        return fingerprint.take_fingerprint(python=opts.python or plan.server.python, env=env)


def measure_build(plan: Plan, opts: RunOptions, progress: Progress) -> Results:
    """Run the whole measurement; always returns Results (status error on a broken run)."""
    started = time.monotonic()
    timings: dict[str, float] = {}
    opts.out.mkdir(parents=True, exist_ok=True)
    fp = collect_fingerprint(plan, opts, timings)
    info = server_info(plan, opts)
    measured: MeasuredBuild | None = None
    errors: list[str] = []
    try:
        with open_measured_build(plan, opts.launch(), info, progress) as measured:
            for repeat in range(plan.repeats):
                for cell in cells_for_repeat(plan, repeat):
                    measured.measure(cell)
    except MeasurementError as exc:
        errors.append(str(exc))
        progress(f"measurement error: {str(exc).splitlines()[0]}")
    timings["total_s"] = time.monotonic() - started
    return assemble(plan, opts.label, fp=fp, info=info, measured=measured, errors=errors,
                    timings=timings)


def assemble(plan: Plan, label: str, fp: Fingerprint, info: ServerInfo,
             measured: MeasuredBuild | None, errors: list[str], timings: dict[str, float]
             ) -> Results:
    """results.json's content from what a measured build measured (nothing, if it never
    opened)."""
    records = measured.records if measured else []
    cells = measured.cells if measured else []
    errors = errors + (measured.problems() if measured else [])
    all_timings = {**(measured.timings if measured else {}), **timings}
    served = measured.doctor.served if measured and measured.doctor else None
    return Results(
        label=label,
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        plan=plan, plan_hash=plan.measurement_hash(),
        fingerprint=fingerprint.with_served(fp, served), server=info,
        status="error" if errors else "complete", errors=errors, timings_s=all_timings,
        cells=cells, ratios=metrics.level_ratios(cells), records=records,
        doctor=measured.doctor if measured else None,
    )


def write(results: Results, out: Path) -> Path:
    """results.json, unless that would replace a stored result with a broken one."""
    path = out / "results.json"
    if results.status != "complete" and path.exists():
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        path = out / f"results.{results.status}-{stamp}.json"
    save_results(results, path)
    return path
