"""What a noise calibration run may claim before it counts (docs/compare.md, "What a
calibration may claim").

Calibrations pool newest first, so the date a run carries decides how much it weighs, and one
run with wide block means can leave every later A/B of its runner class undecided. Three rules
keep a run from setting the noise by what it says about itself:

- its date is a real ISO date (YYYY-MM-DD) and not after today (UTC): a run dated `9999-...`
  is an error when its file is read, never the newest run forever;
- `gate calibrate --merge` takes only runs measured for that merge: dated today or the day
  before (the measuring job ends within its 6-hour timeout), never an old run replayed;
- a merged run may not move a check's spread further than chance moves it: its block means'
  variance against the stored runs' pooled variance of the same design, an F test at
  `SHIFT_P` on each side; a larger move is refused unless the merge is told to accept it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from scipy import special

if TYPE_CHECKING:  # noise.py imports this module for its date check
    from gate.judge.noise import CalibrationRun

MERGE_MAX_AGE_DAYS = 1
SHIFT_P = 0.001  # per check and side: a healthy runner's run is refused this rarely


def utc_today() -> dt.date:
    return dt.datetime.now(dt.UTC).date()


def run_day(text: str, today: dt.date | None = None) -> dt.date:
    """A calibration run's date; ValueError (with the reason) for one that is not an ISO date
    or lies after `today` (default: today, UTC)."""
    try:
        day = dt.date.fromisoformat(text) if len(text) == 10 else None
    except ValueError:
        day = None
    if day is None:
        raise ValueError(f"{text!r} is not a date (YYYY-MM-DD)")
    if day > (today or utc_today()):
        raise ValueError(f"{text} is after today ({(today or utc_today()).isoformat()}, UTC): "
                         "a calibration run cannot come from the future")
    return day


def newest_first(runs: Iterable[CalibrationRun]) -> list[CalibrationRun]:
    """The runs by their date, newest first (runs of one day keep their order)."""
    return sorted(runs, key=lambda r: run_day(r.provenance.date), reverse=True)


def stale_run_problems(runs: Sequence[CalibrationRun], today: dt.date | None = None) -> list[str]:
    """Runs too old to have been measured for this merge."""
    today = today or utc_today()
    oldest = today - dt.timedelta(days=MERGE_MAX_AGE_DAYS)
    return [f"a run dated {r.provenance.date} is older than {oldest.isoformat()}: --merge "
            "takes the runs a calibration job just measured, not older ones"
            for r in runs if run_day(r.provenance.date, today) < oldest]


def _block_variance(runs: Iterable[CalibrationRun], name: str, like: CalibrationRun
                    ) -> tuple[float, int]:
    """The pooled variance of `name`'s block means over the runs of `like`'s design, and its
    degrees of freedom."""
    ss, df = 0.0, 0
    for run in runs:
        c = run.checks.get(name)
        if c is None or run.design != like.design or len(c.block_means) < 2:
            continue
        m = np.asarray(c.block_means)
        ss, df = ss + float(((m - m.mean()) ** 2).sum()), df + m.size - 1
    return (ss / df if df else 0.0), df


def shift_problems(stored: Sequence[CalibrationRun], new: CalibrationRun,
                   p: float = SHIFT_P) -> list[str]:
    """Checks whose block-mean spread in `new` differs from the stored runs' by more than an
    F test at `p` (each side) allows; [] when none does, or nothing is stored to compare."""
    out = []
    for name in new.checks:
        stored_var, stored_df = _block_variance(stored, name, new)
        new_var, new_df = _block_variance([new], name, new)
        if stored_df < 2 or new_df < 1 or not stored_var > 0:
            continue
        ratio = new_var / stored_var
        below, above = special.fdtr(new_df, stored_df, ratio), special.fdtrc(new_df, stored_df, ratio)
        if min(below, above) < p:
            out.append(
                f"{name}: the run's block means spread {np.sqrt(new_var):.2%} ({new_df} df), "
                f"the stored runs' {np.sqrt(stored_var):.2%} ({stored_df} df): x"
                f"{np.sqrt(ratio):.2f}, more than chance moves it (F test, p < {p:g})")
    return out
