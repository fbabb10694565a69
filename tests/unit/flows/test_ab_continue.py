"""gate.flows.ab_continue: what a rerun does with the A/B an earlier run of the same commit
left. A test that can go on is resumed; a decided one is kept; nothing else is continued."""

from __future__ import annotations

import pytest

from gate.core.errors import GateError
from gate.flows.ab_continue import continuation, take_over
from gate.flows.ab_state import ABState, FixedDesign, save_state
from gate.judge.verdict import Outcome, Verdict, save_verdict
from gate.plan.spec import load_plan

PLAN = load_plan("cpu-smoke")


def earlier(tmp_path, *, outcome: Outcome | None, finished: bool, rounds: int = 4, plan=PLAN):
    folder = tmp_path / "earlier"
    folder.mkdir(exist_ok=True)
    state = ABState(plan=plan.name, plan_hash=plan.measurement_hash(), runner_key="cpu: x",
                    thresholds=plan.thresholds, builds={}, rounds_done=rounds,
                    design=FixedDesign(rounds_per_block=2, max_rounds=8), finished=finished,
                    outcome=outcome, started_in="https://github.com/o/r/actions/runs/7")
    save_state(state, folder / "ab-state.json")
    if outcome is not None:
        save_verdict(Verdict(outcome=outcome, headline=f"{outcome.value.upper()}: x", mode="ab"),
                     folder / "verdict.json")
    return folder


def test_a_test_that_can_go_on_is_resumed_and_says_where_it_started(tmp_path):
    c = continuation(earlier(tmp_path, outcome=Outcome.INCONCLUSIVE, finished=False),
                     PLAN, thresholds=PLAN.thresholds)
    assert c.kind == "resume" and "actions/runs/7 after 4 rounds" in c.why


@pytest.mark.parametrize("outcome", [Outcome.PASS, Outcome.FAIL])
def test_a_decided_test_is_kept_not_measured_again(tmp_path, outcome):
    c = continuation(earlier(tmp_path, outcome=outcome, finished=True), PLAN,
                     thresholds=PLAN.thresholds)
    assert c.kind == "keep" and c.verdict.outcome == outcome
    assert "does not restart a decided test" in c.why


@pytest.mark.parametrize("outcome,said", [
    (Outcome.UNDECIDED, "screened one block and decided nothing"),
    (Outcome.ERROR, "an error decides nothing"),
    (Outcome.INCONCLUSIVE, "ended at its design's last block"),
])
def test_what_decided_nothing_is_not_continued(tmp_path, outcome, said):
    c = continuation(earlier(tmp_path, outcome=outcome, finished=True), PLAN,
                     thresholds=PLAN.thresholds)
    assert c.kind == "new" and said in c.why


def test_another_plan_or_other_thresholds_start_a_new_test(tmp_path):
    folder = earlier(tmp_path, outcome=Outcome.FAIL, finished=True)
    other = PLAN.thresholds.with_overrides({"tpot_p50_pct": "30"})
    assert continuation(folder, PLAN, thresholds=other).kind == "new"
    assert continuation(folder, load_plan("cpu-corpus"), thresholds=PLAN.thresholds).kind == "new"
    (folder / "ab-state.json").unlink()
    assert continuation(folder, PLAN, thresholds=PLAN.thresholds).kind == "new"
    with pytest.raises(GateError, match="no such folder"):
        continuation(tmp_path / "missing", PLAN, thresholds=PLAN.thresholds)


def test_take_over_copies_the_earlier_files_into_the_new_folder(tmp_path):
    folder = earlier(tmp_path, outcome=Outcome.PASS, finished=True)
    out = tmp_path / "gate-out"
    out.mkdir()
    (out / "doctor.json").write_text("{}")
    take_over(continuation(folder, PLAN, thresholds=PLAN.thresholds), out)
    assert (out / "ab-state.json").is_file() and (out / "doctor.json").is_file()
