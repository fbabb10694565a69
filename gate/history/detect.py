"""Change points in a check's nightly series, with ruptures (docs/history.md, "Change points").

The series is taken on the log scale (a change is a ratio) and scaled by its night-to-night
noise, estimated robustly from the differences of neighbouring nights (their median absolute
deviation: a step moves one difference, a spike two, neither the median). ruptures' Pelt with
an L2 cost proposes where the level moves, at a penalty per change point proportional to
log(nights); then every proposal must hold up on its own, or it is dropped and its two
segments are judged as one, weakest first, until all that remain hold:

- significance: a two-sided t test of the logs of the segment before against the segment
  after has p <= alpha, and still does with the shorter segment's most extreme night left
  out (one wild night never carries a change point);
- size: the segments' medians differ by at least `min_sigmas` units of the noise and
  `min_change_pct` percent (medians, so one wild night inside a segment moves nothing);
- persistence: at least `min_persistence` nights of the segment after (and of the segment
  before) lie on their own level's side of the midpoint between the two medians; one bad
  night, or two, is never a change point. The latest nights off the level that are not yet
  persistent are `pending`.

Pelt is exact and deterministic: the same series gives the same change points on any
machine, in any order of calls.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from gate.core.errors import GateError
from gate.history.model import (
    Acknowledgement,
    ChangePoint,
    Detection,
    DetectSettings,
    Pending,
    Series,
    SeriesDetection,
)


def _pelt():
    """ruptures, the change-point library (the `history` extra: only the jobs that watch the
    default branch detect)."""
    try:
        import ruptures
    except ImportError:
        raise GateError("gate history detect needs ruptures: pip install 'gate[history]' "
                        "(requirements/nightly-update.txt has it)") from None
    return ruptures


# Night-to-night noise below this (log scale) is taken as this: identical figures would
# otherwise make any step, however small, infinitely many units of noise.
SIGMA_FLOOR = 0.0025
MAD_TO_SD = 1.0 / (0.6745 * math.sqrt(2.0))  # a difference of two nights has sqrt(2) sd


def night_noise(logs: np.ndarray) -> float:
    """The sd of one night's log figure, from the median absolute deviation of the
    differences between neighbouring nights."""
    if logs.size < 3:
        return SIGMA_FLOOR
    d = np.diff(logs)
    mad = float(np.median(np.abs(d - np.median(d))))
    return max(mad * MAD_TO_SD, SIGMA_FLOOR)


@dataclass(frozen=True, kw_only=True)
class _Split:
    at: int
    p: float
    p_without: float  # without the shorter segment's most extreme night
    before: float  # medians, log scale
    after: float
    left: int  # nights on their level's side, before and after
    right: int
    size: int  # nights in the segment after


def _t_p(left: np.ndarray, right: np.ndarray) -> float:
    """Two-sided Student t test of two segments' logs (their noise is the same: a step moves
    the level, not the spread)."""
    if left.size < 2 or right.size < 2:
        return 1.0
    if np.ptp(left) == 0 and np.ptp(right) == 0:  # identical figures on both sides
        return 0.0 if left[0] != right[0] else 1.0
    from scipy import stats  # here, not at the top: it costs every `gate history` command 0.6 s

    with warnings.catch_warnings():  # nearly identical figures: scipy warns, the p stands
        warnings.simplefilter("ignore", RuntimeWarning)
        p = float(stats.ttest_ind(left, right).pvalue)
    return p if math.isfinite(p) else 1.0


def _split(y: np.ndarray, lo: int, at: int, hi: int) -> _Split:
    left, right = y[lo:at], y[at:hi]
    ml, mr = float(np.median(left)), float(np.median(right))
    # Significant without any single night: the shorter segment's night farthest from the
    # other segment's level is left out, so one wild night never carries a change point.
    short, other = (right, left) if right.size <= left.size else (left, right)
    if short.size > 2:
        toward = np.argmax(short) if np.median(short) > np.median(other) else np.argmin(short)
        short = np.delete(short, toward)
    on_left, on_right, size = _sides(left, right, ml, mr)
    return _Split(at=at, p=_t_p(left, right), p_without=_t_p(short, other), before=ml, after=mr,
                  left=on_left, right=on_right, size=size)


def _sides(left: np.ndarray, right: np.ndarray, ml: float, mr: float) -> tuple[int, int, int]:
    mid = (ml + mr) / 2.0
    if mr > ml:
        return int(np.sum(left < mid)), int(np.sum(right > mid)), right.size
    return int(np.sum(left > mid)), int(np.sum(right < mid)), right.size


def _holds(s: _Split, sigma: float, st: DetectSettings) -> bool:
    change = abs(s.after - s.before)
    return (s.p <= st.alpha and s.p_without <= st.alpha_without and s.left >= st.min_persistence and s.right >= st.min_persistence
            and change >= st.min_sigmas * sigma
            and abs(math.expm1(s.after - s.before)) * 100.0 >= st.min_change_pct)


def _splits(y: np.ndarray, cuts: list[int]) -> list[_Split]:
    edges = [0, *cuts, y.size]
    return [_split(y, edges[i], c, edges[i + 2]) for i, c in enumerate(cuts)]


def change_indices(values: Sequence[float], settings: DetectSettings | None = None
                   ) -> tuple[list[_Split], float]:
    """The change points of a series of positive figures (night order) and its noise (sd of a
    night's log)."""
    st = settings or DetectSettings()
    y = np.log(np.asarray(values, dtype=float))
    sigma = night_noise(y)
    if y.size < 2 * st.min_persistence:
        return [], sigma
    z = ((y - np.median(y)) / sigma).reshape(-1, 1)
    penalty = st.penalty_factor * math.log(y.size)
    cuts = _pelt().Pelt(model="l2", min_size=2, jump=1).fit(z).predict(pen=penalty)[:-1]
    while True:
        found = _splits(y, cuts)
        weak = [s for s in found if not _holds(s, sigma, st)]
        if not weak:
            return found, sigma
        worst = max(weak, key=lambda s: (s.p, -s.right))
        cuts = [c for c in cuts if c != worst.at]


def _worse(change: float, direction: str) -> bool:
    return change < 0 if direction == "higher_is_better" else change > 0


def _pending(y: np.ndarray, start: int, *, series: Series, sigma: float, st: DetectSettings
             ) -> Pending | None:
    """The latest nights (fewer than min_persistence) that sit off the level of the last
    segment, every one by more than min_sigmas units of noise, on the same side."""
    tail = st.min_persistence - 1  # the nights that may be pending, left out of the level
    level = float(np.median(y[start:max(y.size - tail, start + 1)]))
    off, side = 0, 0.0
    for value in y[::-1][: st.min_persistence - 1]:
        d = value - level
        if abs(d) < st.min_sigmas * sigma or (off and math.copysign(1.0, d) != side):
            break
        side, off = math.copysign(1.0, d), off + 1
    if not off or y.size - off <= start:
        return None
    change = float(np.median(y[-off:]) - level)
    return Pending(nights=off, first_off=series.points[-off].commit,
                   change_pct=math.expm1(change) * 100.0,
                   regression=_worse(change, series.direction))


Ancestry = Callable[[str, str], bool]  # is_ancestor(maybe_ancestor, commit)


def _acknowledged(cp: ChangePoint, series: Series, acks: list[Acknowledgement],
                  is_ancestor: Ancestry | None) -> Acknowledgement | None:
    """The acknowledgement of this check whose PR merged within the change point's range:
    (last_good, first_bad]. Without git ancestry only a merge recorded at first_bad counts."""
    for ack in acks:
        if ack.check != series.check or not ack.merged_commit:
            continue
        m = ack.merged_commit
        if m == cp.first_bad:
            return ack
        if is_ancestor and m != cp.last_good and is_ancestor(m, cp.first_bad) \
                and not is_ancestor(m, cp.last_good):
            return ack
    return None


def detect_series(series: Series, settings: DetectSettings | None = None, *,
                  acknowledgements: list[Acknowledgement] | None = None,
                  is_ancestor: Ancestry | None = None) -> SeriesDetection:
    st = settings or DetectSettings()
    values = series.values()
    found, sigma = change_indices(values, st)
    y = np.log(np.asarray(values, dtype=float))
    cps: list[ChangePoint] = []
    for s in found:
        change = s.after - s.before
        cp = ChangePoint(
            index=s.at, last_good=series.points[s.at - 1].commit,
            first_bad=series.points[s.at].commit, before=math.exp(s.before),
            after=math.exp(s.after), change_pct=math.expm1(change) * 100.0, p_value=s.p,
            sigmas=abs(change) / sigma, persistence=s.right, nights_after=s.size,
            regression=_worse(change, series.direction))
        cps.append(cp.model_copy(update={"acknowledged": _acknowledged(
            cp, series, acknowledgements or [], is_ancestor)}))
    cps = _recoveries(cps, series, sigma, st)
    start = cps[-1].index if cps else 0
    pending = _pending(y, start, series=series, sigma=sigma, st=st) if y.size >= 2 else None
    last = cps[-1] if cps else None
    standing = last is not None and last.regression and last.acknowledged is None
    why = ""
    if standing:
        assert last is not None
        why = (f"the level is {last.change_pct:+.1f}% since {last.first_bad[:12]} "
               f"(p {last.p_value:.1e}, {last.persistence} nights)")
    elif pending is not None and pending.regression and _stands_out(pending, sigma, st,
                                                                    len(values)):
        why = f"the latest {pending.nights} night(s) are {pending.change_pct:+.1f}% off the level"
    return SeriesDetection(
        plan=series.plan, runner_class=series.runner_class, check=series.check,
        label=series.label, unit=series.unit, direction=series.direction, nights=len(values),
        sigma_pct=math.expm1(sigma) * 100.0 if len(values) >= 3 else None,
        change_points=cps, pending=pending, latest_regressed=bool(why), why=why)


def _stands_out(pending: Pending, sigma: float, st: DetectSettings, nights: int) -> bool:
    """Whether pending nights make the latest night regressed: only once the series is long
    enough to know its noise (2 x min_persistence nights), and by spike_sigmas units of it."""
    return (nights >= 2 * st.min_persistence
            and abs(math.log1p(pending.change_pct / 100.0)) >= st.spike_sigmas * sigma)


def _recoveries(cps: list[ChangePoint], series: Series, sigma: float, st: DetectSettings
                ) -> list[ChangePoint]:
    """A regression is recovered at the first later change point after which the level is
    back within min_sigmas units of noise of the level before it (or better)."""
    out = []
    for i, cp in enumerate(cps):
        if cp.regression:
            before = math.log(cp.before)
            for later in cps[i + 1:]:
                gap = math.log(later.after) - before
                back = abs(gap) <= st.min_sigmas * sigma or not _worse(gap, series.direction)
                if back:
                    cp = cp.model_copy(update={"recovered_at": later.first_bad})
                    break
        out.append(cp)
    return out


def detect_store(series: list[Series], settings: DetectSettings | None = None, *,
                 acknowledgements: list[Acknowledgement] | None = None,
                 is_ancestor: Ancestry | None = None) -> Detection:
    st = settings or DetectSettings()
    return Detection(settings=st, series=[
        detect_series(s, st, acknowledgements=acknowledgements, is_ancestor=is_ancestor)
        for s in series])
