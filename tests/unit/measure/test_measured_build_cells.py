"""Pure parts of gate.flows.run and gate.measure.measured_build: cell order, windows, free max_tokens, and never
clobbering stored results."""

from support.factories import summarized_results

from gate.flows.run import write
from gate.measure.measured_build import cells_for_repeat, free_max_tokens, window_for
from gate.measure.results import CellKey, RequestRecord
from gate.plan.spec import load_plan, parse_plan


def plan(**sweep):
    return parse_plan({"name": "p", "server": {"model": "/m"},
                       "drain": {"requests": 10, "concurrency": 5},
                       "sweep": {"levels": [1, 8], "window_s": 5, **sweep}})


def test_interleaved_order_alternates_arms_per_level_and_repeat():
    r0 = [(c.key.phase, c.key.arm, c.key.concurrency) for c in cells_for_repeat(plan(), 0)]
    assert r0 == [("drain", "guided", 5), ("sweep", "guided", 1), ("sweep", "free", 1),
                  ("sweep", "free", 8), ("sweep", "guided", 8)]
    r1 = [(c.key.arm, c.key.concurrency) for c in cells_for_repeat(plan(), 1)][1:]
    assert r1 == [("free", 1), ("guided", 1), ("guided", 8), ("free", 8)]


def test_blocked_order_runs_each_arm_through_all_levels():
    cells = [(c.key.arm, c.key.concurrency) for c in cells_for_repeat(plan(order="blocked"), 0)][1:]
    assert cells == [("guided", 1), ("guided", 8), ("free", 1), ("free", 8)]


def test_windows_hold_at_least_two_requests_per_slot():
    p = plan(min_requests_factor=2, max_window_s=40)
    assert [(w.seconds, w.min_requests, w.max_seconds) for w in
            (window_for(p, CellKey("sweep", "guided", 1)),
             window_for(p, CellKey("sweep", "free", 8)))] == [(5, 2, 40), (5, 16, 40)]
    drain = cells_for_repeat(p, 0)[0]
    assert drain.key.phase == "drain" and drain.requests == 10
    assert window_for(p, drain.key) is None  # a drain of a count, as the seed measured it
    windowed = parse_plan({"name": "p", "server": {"model": "/m"},
                           "drain": {"requests": 64, "concurrency": 16, "window_s": 6}})
    w = window_for(windowed, CellKey("drain", "guided", 16))
    assert (w.seconds, w.min_requests) == (6, 64)


def test_free_max_tokens_matches_the_guided_median():
    p = load_plan("cpu-smoke")
    recs = [RequestRecord(index=i, phase="warmup", arm="guided", concurrency=1, send_s=0,
                          http_status=200, output_tokens=n) for i, n in enumerate([20, 30, 40])]
    assert free_max_tokens(p, recs) == 30
    fixed = parse_plan({"name": "p", "server": {"model": "/m"}, "workload": {"free_max_tokens": 7}})
    assert free_max_tokens(fixed, recs) == 7


def test_a_broken_run_never_overwrites_stored_results(tmp_path):
    good = summarized_results()
    assert write(good, tmp_path).name == "results.json"
    stored = (tmp_path / "results.json").read_bytes()
    broken = good.model_copy(update={"status": "error", "errors": ["server died"]})
    path = write(broken, tmp_path)
    assert path.name.startswith("results.error-") and path.exists()
    assert (tmp_path / "results.json").read_bytes() == stored
