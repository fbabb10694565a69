"""What a bisect's steps conclude, written out: bisect.json, bisect.md, and the first bad
commit's hunks ranked by the profile diff of its step (hunks.json, evidence.json)."""

from __future__ import annotations

from pathlib import Path

from gate.core.errors import GateError
from gate.core.files import write_atomic
from gate.core.git import first_parent
from gate.evidence.attribution import apply_evidence, rank_hunks_by_evidence, save_evidence
from gate.evidence.bisect_record import (
    BisectOutcome,
    BisectResult,
    BisectState,
    CommitInfo,
    HunksResult,
    StepRecord,
)
from gate.evidence.bisection import Effect, StepVerdict, conclude
from gate.evidence.hunks import HunkSet, extract_hunks
from gate.flows.diff_artifacts import load_written
from gate.judge.verdict import Outcome
from gate.report.bisect import render_bisect

RESULT_FILE = "bisect.json"
REPORT_FILE = "bisect.md"


def effect_text(effect: Effect | None) -> str:
    """'drain output tok/s -45.2% (-51.0% .. -38.9%)'."""
    if effect is None or effect.delta_pct is None:
        return "no relative check was judged"
    text = f"{effect.label} {effect.delta_pct:+.1f}%"
    if effect.ci_low_pct is not None and effect.ci_high_pct is not None:
        kind = "range of its rounds " if effect.interval_is_range else ""
        text += f" ({kind}{effect.ci_low_pct:+.1f}% .. {effect.ci_high_pct:+.1f}%)"
    return text


def runner_seconds(state: BisectState) -> float:
    return round(state.overhead_s + sum(s.seconds for s in state.steps), 1)


def _info(state: BisectState, sha: str) -> CommitInfo:
    return next((c for c in state.commits if c.sha == sha), CommitInfo(sha=sha))


SCREENED_NOTE = (
    "this runner has no calibration for the plan: each A/B screened one block for gross "
    "slowdowns only (docs/compare.md, \"The sequential test\": the first block), so this bisect "
    "names the first commit with a gross slowdown; calibrate (gate calibrate) to bisect "
    "smaller ones")


def _base(state: BisectState) -> dict:
    skipped = [_info(state, s.commit) for s in state.steps
               if s.role == "step" and s.verdict == StepVerdict.SKIPPED]
    notes = [SCREENED_NOTE] if any(s.screened for s in state.steps) else []
    return {"repo": state.repo, "good": state.good, "bad": state.bad, "steps": state.steps,
            "skipped": skipped, "runner_seconds": runner_seconds(state), "notes": notes}


def assemble(state: BisectState, out: Path, watch: list[str]) -> BisectResult:
    endpoints = next(s for s in state.steps if s.role == "endpoints")
    if endpoints.verdict != StepVerdict.BAD:
        return _endpoints_result(state, endpoints)
    verdicts = {s.commit: s.verdict for s in state.steps}
    conclusion = conclude([c.sha for c in state.commits], verdicts)
    base = _base(state)
    notes = base.pop("notes") + [
        f"{_info(state, c).short} measured good after a bad commit: the slowdown is not "
        "monotone over the range (noise, or fixed and broken again)"
        for c in conclusion.inconsistent]
    if conclusion.first_bad is None:
        candidates = [_info(state, c) for c in conclusion.candidates]
        return BisectResult(
            **base, outcome=BisectOutcome.UNDECIDED, candidates=candidates, notes=notes,
            headline=f"UNDECIDED: the first bad commit is one of {len(candidates)} "
                     f"({', '.join(c.short for c in candidates)}); the others could not be "
                     "decided")
    culprit = _info(state, conclusion.first_bad)
    record = next(s for s in state.steps if s.commit == culprit.sha)
    hunks, ranked_by = ranked_hunks(state, record, out=out, watch=watch, notes=notes)
    return BisectResult(
        **base, outcome=BisectOutcome.FOUND, first_bad=culprit, candidates=[culprit],
        hunks=hunks, hunks_ranked_by=ranked_by, notes=notes,
        headline=f"FOUND: the first bad commit is {culprit.short} {culprit.subject!r}: "
                 f"{effect_text(record.effect)} against the good build")


def _endpoints_result(state: BisectState, endpoints: StepRecord) -> BisectResult:
    effect = effect_text(endpoints.effect)
    if endpoints.screened:
        outcome, headline = BisectOutcome.UNCALIBRATED, (
            f"UNCALIBRATED: bad {state.bad.short} is not grossly slower than good "
            f"{state.good.short} in one screening block, and without a calibration of this "
            f"runner nothing smaller can be decided: {endpoints.reason}")
    elif endpoints.verdict == StepVerdict.GOOD:
        outcome, headline = BisectOutcome.NO_REGRESSION, (
            f"NO REGRESSION: bad {state.bad.short} is not slower than good {state.good.short} "
            f"({effect}); nothing to bisect")
    elif endpoints.outcome == Outcome.INCONCLUSIVE:
        outcome, headline = BisectOutcome.INCONCLUSIVE, (
            f"INCONCLUSIVE: bad {state.bad.short} against good {state.good.short} stayed "
            f"undecided ({effect}); raise the step budget or the rounds")
    else:
        outcome, headline = BisectOutcome.ERROR, (
            f"ERROR: the bad commit {state.bad.short} could not be measured: {endpoints.reason}")
    return BisectResult(**_base(state), outcome=outcome, headline=headline)


def ranked_hunks(state: BisectState, record: StepRecord, *, out: Path, watch: list[str],
                 notes: list[str]) -> tuple[HunkSet | None, str]:
    """The first bad commit's hunks (against its first parent), ranked by the profile diff
    of its step when there is one, else by the patterns of known regressions."""
    repo = Path(state.repo)
    parent = first_parent(repo, record.commit) or state.good.sha
    try:
        hunkset = extract_hunks(repo, parent, record.commit, watch)
        if record.profile_diff is None or not (out / record.profile_diff).is_dir():
            how = f"patterns of known regressions (step {record.number} has no profile diff)"
        else:
            diff, _ = load_written(out / record.profile_diff)
            evidence = rank_hunks_by_evidence(hunkset, diff, repo)
            save_evidence(evidence, out / "evidence.json")
            hunkset = apply_evidence(hunkset, evidence)
            how = f"the profile diff of step {record.number} ({record.profile_diff})"
    except GateError as exc:
        notes.append(f"no hunks: {str(exc).splitlines()[0]}")
        return None, ""
    write_atomic(out / "hunks.json", hunkset.model_dump_json(indent=1))
    return hunkset, how


def error_result(state: BisectState, out: Path, message: str) -> BisectResult:
    base = _base(state)
    result = BisectResult(**base | {"notes": [message, *base["notes"]]},
                          outcome=BisectOutcome.ERROR, headline=f"ERROR: {message.splitlines()[0]}")
    save_result(result, out)
    return result


def finish(state: BisectState, out: Path, watch: list[str],
           hunks: HunksResult | None = None) -> BisectResult:
    """The result, with the first bad commit's smallest set of hunks when --hunks ran."""
    result = assemble(state, out, watch)
    if hunks is not None and result.first_bad and hunks.head.sha == result.first_bad.sha:
        result = result.model_copy(update={
            "smallest_hunks": [hunks.hunks[i] for i in hunks.minimal],
            "smallest_hunks_headline": hunks.headline})
    save_result(result, out)
    return result


def save_result(result: BisectResult, out: Path) -> None:
    write_atomic(out / RESULT_FILE, result.model_dump_json(indent=1))
    write_atomic(out / REPORT_FILE, render_bisect(result))
