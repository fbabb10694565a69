"""`gate ab`: measure the base build and the PR build on the same runner, interleaved, and
judge head against base.

Each round runs base then head (ABAB...), every arm on a fresh server, one repeat each; the
rounds of each arm are pooled as repeats, so run-to-run noise (server start, compile, thermal
drift) lands in both arms alike and in the intervals. This is the mode to recommend when no
baseline exists for the hardware.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from gate import compare, run
from gate.errors import GateError
from gate.plan import Plan
from gate.progress import Progress
from gate.results import Results, merge_results, save_results
from gate.thresholds import Thresholds
from gate.verdict import Outcome, Verdict


@dataclass
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


def measure_rounds(plan: Plan, base: Build, head: Build, rounds: int, out: Path,
                   progress: Progress, cache_dir: Path, first_round: int = 0
                   ) -> dict[str, Results]:
    """Run `rounds` ABAB rounds; returns each arm's results pooled over its rounds. Stops at the
    first broken measurement (its results carry the error)."""
    one = plan.model_copy(update={"repeats": 1})
    pooled: dict[str, Results] = {}
    for r in range(first_round, first_round + rounds):
        for build in (base, head):
            progress(f"A/B round {r + 1}: {build.label} ({build.python}"
                     f"{' ' + str(build.env) if build.env else ''})")
            opts = run.RunOptions(out=out / build.label / f"round{r + 1}", cache_dir=cache_dir,
                                  python=build.python, label=build.label, env=build.env)
            res = run.execute(one, opts, progress)
            run.write(res, opts.out)
            prev = pooled.get(build.label)
            pooled[build.label] = res if prev is None else merge_results(prev, res)
            if res.status != "complete":
                progress(f"{build.label} measurement broken: stopping the A/B")
                return pooled
    return pooled


def judge(pooled: dict[str, Results], thresholds: Thresholds, out: Path) -> Verdict:
    head, base = pooled.get("head"), pooled.get("base")
    if head is None:  # base broke before head ever ran: judge the base's breakage
        return compare.compare_results(base, None, None, thresholds,
                                       head_path=str(out / "base" / "results.json"))
    return compare.compare_results(
        head, base, None, thresholds,
        head_path=str(out / "head" / "results.json"),
        base_path=str(out / "base" / "results.json") if base else None,
    )


def ab(plan: Plan, base: Build, head: Build, rounds: int, out: Path, thresholds: Thresholds,
       progress: Progress, cache_dir: Path, confirm: bool = False) -> Verdict:
    pooled = measure_rounds(plan, base, head, rounds, out, progress, cache_dir)
    verdict = judge(pooled, thresholds, out)
    if confirm and verdict.outcome == Outcome.FAIL:
        progress("first verdict is FAIL: measuring again to confirm (--confirm)")
        again = measure_rounds(plan, base, head, rounds, out, progress, cache_dir,
                               first_round=rounds)
        second = judge(again, thresholds, out)
        pooled = {k: merge_results(pooled[k], again[k]) for k in pooled if k in again}
        verdict = judge(pooled, thresholds, out)
        if second.outcome != Outcome.FAIL and verdict.outcome == Outcome.FAIL:
            verdict = verdict.model_copy(update={
                "outcome": Outcome.INCONCLUSIVE,
                "headline": f"INCONCLUSIVE: the first run failed but the confirmation did not "
                            f"({second.outcome.value}); {verdict.headline}",
            })
        verdict.notes.append(f"--confirm: the confirmation run alone was {second.outcome.value}; "
                             f"the verdict pools {2 * rounds} rounds per build")
    for label, res in pooled.items():
        save_results(res, out / label / "results.json")
    return verdict
