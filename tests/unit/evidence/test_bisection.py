"""The bisect's search: which commit next, what the steps conclude, and how skipped commits
are kept out of the blame (gate.evidence.bisection)."""

from __future__ import annotations

import math
import random

import pytest
from support.factories import check, verdict

from gate.evidence.bisection import (
    StepVerdict,
    bounds,
    conclude,
    deciding_effect,
    next_commit,
    step_verdict,
)
from gate.judge.verdict import Outcome

BAD, GOOD, SKIP = StepVerdict.BAD, StepVerdict.GOOD, StepVerdict.SKIPPED


def commits(n: int) -> list[str]:
    return [f"c{i}" for i in range(n)]


def run_search(n: int, culprit: int, skipped: set[int] = frozenset()) -> tuple[dict, list[str]]:
    """Bisect n commits (the last one known bad) whose first bad one is `culprit`;
    `skipped` commits cannot be measured. Returns the verdicts and the measured order."""
    cs = commits(n)
    verdicts = {cs[-1]: BAD}
    order = []
    while (c := next_commit(cs, verdicts)) is not None:
        i = cs.index(c)
        order.append(c)
        verdicts[c] = SKIP if i in skipped else (BAD if i >= culprit else GOOD)
        assert len(order) <= n, "the search does not end"
    return verdicts, order


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 16, 33])
def test_every_culprit_is_named_in_at_most_ceil_log2_n_steps(n):
    for culprit in range(n):
        verdicts, order = run_search(n, culprit)
        result = conclude(commits(n), verdicts)
        assert result.first_bad == f"c{culprit}"
        assert len(order) <= math.ceil(math.log2(n)), (n, culprit, order)


def test_eight_commits_take_three_steps_after_the_endpoints_whatever_the_culprit():
    assert max(len(run_search(8, k)[1]) for k in range(8)) == 3


def test_the_first_step_halves_the_range():
    assert next_commit(commits(8), {"c7": BAD}) == "c3"
    assert next_commit(commits(8), {"c7": BAD, "c3": GOOD}) == "c5"
    assert next_commit(commits(8), {"c7": BAD, "c3": BAD}) == "c1"


def test_a_skipped_commit_is_stepped_around_and_never_blamed():
    # c3 does not build: the search measures a neighbour instead and still finds c5
    verdicts, order = run_search(8, culprit=5, skipped={3})
    assert "c3" in order and conclude(commits(8), verdicts).first_bad == "c5"
    assert len([c for c in order if c != "c3"]) <= 3


def test_when_the_culprit_hides_behind_skipped_commits_the_result_lists_them_all():
    # c4 and c5 cannot be measured; c6 is the first bad one, c3 good: c4, c5 or c6
    verdicts, _ = run_search(8, culprit=6, skipped={4, 5})
    result = conclude(commits(8), verdicts)
    assert result.first_bad is None
    assert result.candidates == ["c4", "c5", "c6"]


def test_a_skipped_culprit_is_reported_as_a_candidate_never_as_the_first_bad():
    verdicts, _ = run_search(8, culprit=4, skipped={4})
    result = conclude(commits(8), verdicts)
    assert result.first_bad is None and result.candidates == ["c4", "c5"]


def test_random_ranges_never_blame_a_skipped_commit_and_always_cover_the_culprit():
    rng = random.Random(7)
    for _ in range(400):
        n = rng.randint(1, 24)
        culprit = rng.randrange(n)
        skipped = {i for i in range(n - 1) if rng.random() < 0.3}
        verdicts, order = run_search(n, culprit, skipped)
        result = conclude(commits(n), verdicts)
        assert f"c{culprit}" in result.candidates
        assert result.first_bad is None or verdicts[result.first_bad] == BAD
        assert all(verdicts[c] == SKIP for c in result.candidates[:-1])
        assert len(set(order)) == len(order)  # nothing measured twice


def test_a_good_commit_after_a_bad_one_is_reported_as_inconsistent():
    cs = commits(6)
    verdicts = {"c5": BAD, "c2": BAD, "c4": GOOD, "c1": GOOD}
    assert bounds(cs, verdicts).model_dump() == {"last_good": 1, "first_bad": 2}
    result = conclude(cs, verdicts)
    assert result.first_bad == "c2" and result.inconsistent == ["c4"]


@pytest.mark.parametrize(("outcome", "expected"), [
    (Outcome.FAIL, BAD), (Outcome.PASS, GOOD), (Outcome.INCONCLUSIVE, SKIP),
    (Outcome.ERROR, SKIP)])
def test_only_a_decided_ab_classifies_a_commit(outcome, expected):
    assert step_verdict(outcome) == expected


def test_the_deciding_effect_is_the_worst_relative_check_then_the_largest_change():
    v = verdict(checks=[
        check("sweep.c1.tpot_p50_ms", "TPOT p50 (c=1)", 5.0, 5.1, Outcome.PASS),
        check("drain.req_per_min", "drain req/min", 233.0, 121.0, Outcome.FAIL,
              direction="higher_is_better"),
        check("sweep.c8.tpot_p50_ms", "TPOT p50 (c=8)", 15.0, 16.0, Outcome.FAIL),
    ])
    effect = deciding_effect(v)
    assert effect.check == "drain.req_per_min" and effect.delta_pct == pytest.approx(-48.07, 0.01)
    assert effect.ci_low_pct < effect.delta_pct < effect.ci_high_pct
    assert deciding_effect(verdict(checks=[])) is None
