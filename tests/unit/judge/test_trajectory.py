"""The sequential test look by look (gate.judge.trajectory): the same decision as the
verdict's, reached at the same round, and a sentence for why it stopped there."""

from __future__ import annotations

import pytest
from support import factories as f

from gate.judge import sequential as seq
from gate.judge.compare import ABReference, compare_results
from gate.judge.noise import Noise
from gate.judge.trajectory import Trajectory, look_rounds, trajectories
from gate.judge.verdict import Outcome


def ab_pair(head_rpm, base_rpm=233.0, rounds=8):
    plan = f.gpu_plan(levels=(8,), repeats=rounds)
    plan = plan.model_copy(update={"ab": plan.ab.model_copy(update={"rounds_per_block": 2})})

    def side(rpms):
        cells = [f.cell("drain", "guided", 64, r, rpm=v) for r, v in enumerate(rpms)]
        results = f.make_results(cells, plan=plan)
        return results.model_copy(update={"sequential_rounds": rounds})

    jitter = [1.0, 1.01, 0.99, 1.005, 0.995, 1.0, 1.01, 0.99][:rounds]
    return side([head_rpm * j for j in jitter]), side([base_rpm * j for j in reversed(jitter)])


def test_look_rounds_are_every_whole_block():
    design = seq.Design(rounds_per_block=2, max_blocks=4)
    assert look_rounds(7, design) == [2, 4, 6]
    assert look_rounds(1, design) == []


@pytest.mark.parametrize("head_rpm", [121.0, 233.0])
def test_the_looks_end_where_the_verdict_decided(head_rpm):
    head, base = ab_pair(head_rpm)
    verdict = compare_results(head, ABReference(base), head.plan.thresholds, noise=Noise())
    (t,) = [t for t in trajectories(head, base, head.plan.thresholds, Noise())
            if t.check == "drain.req_per_min"]
    check = next(c for c in verdict.checks if c.name == "drain.req_per_min")
    last = t.looks[-1]
    assert last.outcome == check.outcome
    if check.decided_at_round:
        assert last.round == check.decided_at_round
    assert t.why.startswith({Outcome.FAIL: "failed", Outcome.PASS: "passed"}.get(
        last.outcome, "undecided"))
    assert all(look.outcome == Outcome.INCONCLUSIVE for look in t.looks[:-1])


def test_why_names_the_change_against_the_threshold_or_the_limit():
    def traj(outcome, rnd, gross=False):
        from gate.judge.trajectory import Look
        look = Look(round=rnd, delta_pct=-14.0, low_pct=-20.0, high_pct=-11.0, outcome=outcome,
                    gross=gross)
        return Trajectory(check="c", label="C", looks=[look], threshold_pct=-10.0, max_rounds=8)

    assert traj(Outcome.FAIL, 4).why == \
        "failed at round 4: -14.0% (-20.0% to -11.0%), past the threshold -10%"
    assert traj(Outcome.PASS, 6).why.startswith("passed at round 6: -14.0%")
    assert traj(Outcome.FAIL, 2, gross=True).why.startswith("failed at round 2: a gross effect")
    assert "the most the design allows" in traj(Outcome.INCONCLUSIVE, 8).why
    assert "of at most 8 rounds" in traj(Outcome.INCONCLUSIVE, 4).why
