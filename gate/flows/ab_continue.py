"""`gate ab --continue-from DIR`: what a rerun of one commit does with the A/B an earlier run
of it left (its artifact: ab-state.json and both results).

A sequential test's error rates hold for the test as designed, not for a test restarted until
it says what one hopes (docs/compare.md, "Resuming an A/B"). So a rerun:

- **resumes** a test that can go on (inconclusive within its design: its budget ran out, the
  job was cancelled): more blocks of the same design, its rounds already spent;
- **keeps** a decided test (pass or fail): nothing is measured again, its verdict is the
  rerun's, and says where it was decided; a new commit starts a new test;
- **starts a new test** where there is none to continue: no state, a broken measurement (an
  error decides nothing about the code), a test that ended at its design's last block, a
  screening block (undecided: it decided nothing), or a test of another plan or other
  thresholds.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gate.core.errors import GateError
from gate.flows.ab_state import STATE_FILE, ABState, load_state
from gate.judge.verdict import Outcome, Verdict, load_verdict
from gate.plan.spec import Plan
from gate.plan.thresholds import Thresholds


@dataclass(frozen=True, kw_only=True)
class Continuation:
    """What to do with the earlier A/B in `source`, and why (said in the verdict's notes)."""

    kind: Literal["resume", "keep", "new"]
    why: str
    source: Path
    state: ABState | None = None
    verdict: Verdict | None = None


def continuation(source: Path, plan: Plan, *, thresholds: Thresholds) -> Continuation:
    """What a rerun measuring `plan` at `thresholds` does with the A/B left in `source`."""
    if not source.is_dir():
        raise GateError(f"--continue-from {source}: no such folder")
    state_path = source / STATE_FILE
    if not state_path.is_file():
        return Continuation(kind="new", why=f"no earlier A/B state in {source}: a new test",
                            source=source)
    state = load_state(state_path)
    where = state.started_in or str(source)
    if state.plan_hash != plan.measurement_hash() or state.thresholds != thresholds:
        return Continuation(kind="new", why=f"the earlier test ({where}) measured another plan "
                            "or other thresholds: a new test", source=source, state=state)
    verdict_path = source / "verdict.json"
    verdict = load_verdict(verdict_path) if verdict_path.is_file() else None
    if state.finished and verdict is not None and verdict.outcome.decided:
        return Continuation(kind="keep", why=f"this commit's test was decided "
                            f"({verdict.outcome.value} after {state.rounds_done} rounds) in "
                            f"{where}: a rerun does not restart a decided test; a new commit "
                            "starts a new one", source=source, state=state, verdict=verdict)
    if state.finished or (verdict is not None and verdict.outcome == Outcome.ERROR):
        what = {Outcome.UNDECIDED: "screened one block and decided nothing",
                Outcome.ERROR: "broke (an error decides nothing about the code)"}.get(
            verdict.outcome if verdict else Outcome.INCONCLUSIVE,
            f"ended at its design's last block ({state.rounds_done} rounds)")
        return Continuation(kind="new", why=f"the earlier test ({where}) {what}: a new test",
                            source=source, state=state, verdict=verdict)
    return Continuation(kind="resume", why=f"continues the sequential test started in {where} "
                        f"after {state.rounds_done} rounds (same design, same rounds spent)",
                        source=source, state=state, verdict=verdict)


def take_over(continued: Continuation, out: Path) -> None:
    """The earlier A/B's files in `out`, where the rerun resumes or keeps them."""
    if continued.source.resolve() != out.resolve():
        shutil.copytree(continued.source, out, dirs_exist_ok=True)
