"""The sequential test look by look as data (gate.judge.looks): what the comment file carries
to the poster, read back field by field, with no numpy to hand."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import TypeAdapter, ValidationError
from support.paths import REPO_ROOT

from gate.judge.looks import Look, Trajectory
from gate.judge.verdict import Outcome

LOOKS = TypeAdapter(list[Trajectory])


def test_a_trajectory_goes_through_json_and_says_why_it_stopped():
    looks = [Look(round=2, delta_pct=-30.0, low_pct=None, high_pct=None,
                  outcome=Outcome.INCONCLUSIVE),
             Look(round=4, delta_pct=-31.0, low_pct=-40.0, high_pct=-22.0, outcome=Outcome.FAIL)]
    t = Trajectory(check="drain.req_per_min", label="drain", looks=looks, threshold_pct=-10.0,
                   max_rounds=8)
    (back,) = LOOKS.validate_json(LOOKS.dump_json([t]))
    assert back == t
    assert back.why == "failed at round 4: -31.0% (-40.0% to -22.0%), past the threshold -10%"


@pytest.mark.parametrize("bad", [
    {"check": "c", "label": "C", "looks": [], "threshold_pct": -10, "max_rounds": 8, "x": 1},
    {"check": "c", "label": "C", "threshold_pct": -10, "max_rounds": 8},
    {"check": "c", "label": "C", "looks": [{"round": 2, "delta_pct": "much", "low_pct": None,
                                            "high_pct": None, "outcome": "fail"}],
     "threshold_pct": -10, "max_rounds": 8},
])
def test_a_trajectory_read_back_is_checked_key_by_key(bad):
    with pytest.raises(ValidationError):
        LOOKS.validate_python([bad])


def test_it_needs_no_numpy():
    """The poster's hash-pinned install has none (requirements/poster.txt)."""
    code = "import sys; sys.modules['numpy'] = None; import gate.judge.looks"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
