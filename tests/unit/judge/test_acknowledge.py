"""An intended slowdown acknowledged (gate.judge.acknowledge): only that check, only at that
head, and the verdict's outcome follows the other checks."""

from __future__ import annotations

from support import factories as f

from gate.judge.acknowledge import Acknowledgement, apply_acknowledgements, unheld
from gate.judge.verdict import Outcome

HEAD, OLD = "a" * 40, "b" * 40


def ack(check, sha=HEAD, reason="pinned memory for correctness"):
    return Acknowledgement(check=check, login="maintainer", reason=reason, head_sha=sha,
                           at="2026-01-02T00:00:00+00:00")


def two_failing():
    v = f.verdict(outcome=Outcome.FAIL)
    # drop the absolute ratio check so that the two relative checks are the only failures
    return v.model_copy(update={"checks": [c for c in v.checks if c.kind != "absolute"]})


def test_every_failing_check_acknowledged_turns_the_verdict_to_pass():
    v = apply_acknowledgements(two_failing(), [ack("drain.req_per_min"),
                                               ack("sweep.c8.tpot_p50_ms")], HEAD)
    assert v.outcome == Outcome.PASS and v.exit_code == 0
    assert v.headline.startswith("PASS: intended slowdown acknowledged (")
    drain = next(c for c in v.checks if c.name == "drain.req_per_min")
    assert drain.outcome == Outcome.FAIL  # the figures and the check's own outcome stay
    assert drain.acknowledged.login == "maintainer" and drain.acknowledged.head_sha == HEAD
    assert any("slowdown acknowledged by maintainer: pinned memory" in n for n in v.notes)


def test_only_the_acknowledged_check_turns_neutral():
    v = apply_acknowledgements(two_failing(), [ack("drain.req_per_min")], HEAD)
    assert v.outcome == Outcome.FAIL
    acked = [c.name for c in v.checks if c.acknowledged]
    assert acked == ["drain.req_per_min"]


def test_a_new_push_needs_a_new_acknowledgement():
    v = apply_acknowledgements(two_failing(), [ack("drain.req_per_min", OLD),
                                               ack("sweep.c8.tpot_p50_ms", OLD)], HEAD)
    assert v.outcome == Outcome.FAIL and not any(c.acknowledged for c in v.checks)
    assert any("acknowledged at bbbbbbbbbbbb, not at this head aaaaaaaaaaaa" in n
               for n in v.notes)


def test_an_error_or_an_inconclusive_check_is_not_acknowledged_away():
    errored = two_failing().model_copy(update={"outcome": Outcome.ERROR,
                                               "errors": ["3 requests failed"]})
    v = apply_acknowledgements(errored, [ack("drain.req_per_min"),
                                         ack("sweep.c8.tpot_p50_ms")], HEAD)
    assert v.outcome == Outcome.ERROR
    undecided = two_failing()
    checks = [c.model_copy(update={"outcome": Outcome.INCONCLUSIVE})
              if c.name == "sweep.c1.tpot_p50_ms" else c for c in undecided.checks]
    v = apply_acknowledgements(undecided.model_copy(update={"checks": checks}),
                               [ack("drain.req_per_min"), ack("sweep.c8.tpot_p50_ms")], HEAD)
    assert v.outcome == Outcome.INCONCLUSIVE


def test_an_acknowledgement_of_a_passing_check_changes_nothing_but_says_so():
    v = apply_acknowledgements(two_failing(), [ack("sweep.c1.tpot_p50_ms")], HEAD)
    assert v.outcome == Outcome.FAIL and not any(c.acknowledged for c in v.checks)
    assert any("did not fail here" in n for n in v.notes)


def test_applying_the_acknowledgements_again_changes_nothing():
    """The measuring job applies them, and the poster again with those given since."""
    acks = [ack("drain.req_per_min"), ack("sweep.c8.tpot_p50_ms"), ack("sweep.c1.tpot_p50_ms"),
            ack("drain.req_per_min", OLD)]
    once = apply_acknowledgements(two_failing(), acks, HEAD)
    assert once.outcome == Outcome.PASS
    assert apply_acknowledgements(once, acks, HEAD) == once
    later = apply_acknowledgements(apply_acknowledgements(two_failing(), acks[:1], HEAD), acks,
                                   HEAD)
    assert later.outcome == Outcome.PASS and [c.name for c in later.checks if c.acknowledged] \
        == ["drain.req_per_min", "sweep.c8.tpot_p50_ms"]
    assert len(later.notes) == len(set(later.notes))


def test_an_acknowledgement_nobody_gave_is_found_out():
    given = [ack("drain.req_per_min")]
    applied = apply_acknowledgements(two_failing(), given, HEAD)
    assert unheld(applied, given, HEAD) == []
    assert unheld(applied, [], HEAD) == ["drain.req_per_min"]
    assert unheld(applied, [ack("drain.req_per_min", OLD)], HEAD) == ["drain.req_per_min"]
    # the same check acknowledged by another person, or for another reason, is not this one
    other = Acknowledgement(check="drain.req_per_min", login="mallory",
                            reason="pinned memory for correctness", head_sha=HEAD,
                            at="2026-01-02T00:00:00+00:00")
    assert unheld(applied, [other], HEAD) == ["drain.req_per_min"]
    assert unheld(applied, [ack("drain.req_per_min", reason="other")], HEAD) == \
        ["drain.req_per_min"]
