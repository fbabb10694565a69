"""gate.report.terminal: the plain-text tables `gate run` and `gate compare` print."""

from __future__ import annotations

import pytest
from support import factories as f

from gate.judge.verdict import Check, Outcome
from gate.measure.results import LevelRatio
from gate.report.terminal import cells_table, ratios_table, render, render_verdict, timings_line


def rows(table: str) -> list[list[str]]:
    """A tabulate table's body rows, split on its column gaps."""
    return [line.split() for line in table.splitlines()[2:]]


def test_every_cell_is_one_row_with_its_repeat_counted_from_one():
    results = f.sweep_results()
    table = cells_table(results)
    assert len(rows(table)) == len(results.cells) == 7
    drain = rows(table)[0]
    assert drain[:5] == ["drain", "guided", "64", "1", "32/32"]
    assert table.splitlines()[0].split()[:4] == ["phase", "arm", "conc", "rep"]


def test_only_guided_cells_show_their_valid_share():
    results = f.make_results([f.cell("sweep", "guided", 8, invalid=3),
                              f.cell("sweep", "free", 8)])
    guided, free = rows(cells_table(results))
    assert guided[-1] == "97/100" and free[-1] == "-"


def test_rates_are_per_minute_and_latencies_in_milliseconds():
    results = f.make_results([f.cell("drain", "guided", 64, rpm=121.0, tpot_p50=30.0)])
    (row,) = rows(cells_table(results))
    assert row[6] == "121" and row[9] == "30.0"  # req/min, TPOT p50 ms


def test_a_ratio_that_could_not_be_computed_is_a_dash():
    results = f.sweep_results()
    results.ratios = [LevelRatio(concurrency=8, repeat=0, tpot_p50_ratio=None,
                                 output_throughput_ratio=0.96)]
    assert rows(ratios_table(results)) == [["8", "1", "-", "0.96", "-", "-"]]  # no TTFT either


def test_timings_line_puts_the_total_first_and_drops_the_unit_suffix():
    results = f.sweep_results()
    results.timings_s = {"server_start_s": 53.2, "drain": 12.0, "total_s": 70.0}
    assert timings_line(results) == "total 70s: server_start 53s, drain 12s"


def test_render_heads_with_plan_host_and_versions_then_tables():
    text = render(f.sweep_results("head", fp=f.fingerprint(cores=172, torch_threads=172,
                                                             quota=12.0)))
    plan_line, host_line, versions_line = text.splitlines()[:3]
    assert plan_line == "plan cpu-smoke (hash abcdef0123456789), label head, status COMPLETE"
    assert "host cores 172, CPU quota 12, torch threads 172, OMP_NUM_THREADS unset" in host_line
    assert versions_line.startswith("vllm 0.32.0")
    assert "guided/free TPOT p50" in text and "where the time went: total 0s" in text
    assert "MEASUREMENT ERRORS" not in text


@pytest.mark.parametrize(("backend", "shown"), [
    ("xgrammar", "xgrammar backend (xgrammar 0.2.8)"),
    ("guidance", "guidance backend (llguidance 1.7.6)"),
    ("outlines", "outlines backend (outlines_core ?)"),
    (None, "auto backend (xgrammar 0.2.8, llguidance 1.7.6)"),
])
def test_the_versions_line_names_the_backend_that_served_and_its_compiler(backend, shown):
    fp = f.fingerprint()
    fp.versions.update({"xgrammar": "0.2.8", "llguidance": "1.7.6"})
    results = f.sweep_results("head", fp=fp)
    results.plan.server.structured_outputs_backend = backend
    versions_line = render(results).splitlines()[2]
    assert shown in versions_line
    assert (backend in (None, "xgrammar")) == ("xgrammar" in versions_line)


def test_render_without_a_quota_says_none_and_lists_errors_last():
    text = render(f.sweep_results(errors=["server died", "3 requests failed"]))
    assert "CPU quota none" in text
    assert text.splitlines()[-3:] == ["MEASUREMENT ERRORS:", "  - server died",
                                      "  - 3 requests failed"]


def test_verdict_starts_with_its_headline_and_shows_every_check():
    v = f.verdict()
    text = render_verdict(v)
    assert text.splitlines()[0] == v.headline
    for check in v.checks:
        assert check.label in text
    assert "advice:\n  - rerun with --repeats 5" in text


def test_relative_thresholds_carry_the_sign_of_a_regression():
    slower = f.check("t", "TPOT", 15.0, 30.0, Outcome.FAIL)
    fewer = f.check("d", "Drain", 233.0, 121.0, Outcome.FAIL, direction="higher_is_better")
    text = render_verdict(f.verdict(checks=[slower, fewer]))
    tpot = next(line for line in text.splitlines() if line.startswith("TPOT"))
    drain = next(line for line in text.splitlines() if line.startswith("Drain"))
    assert "+100.0%" in tpot and "+97.0% .. +103.0%" in tpot and " +10% " in tpot
    assert "-48.1%" in drain and " -10% " in drain


def test_absolute_checks_show_a_bound_and_shares_as_percentages():
    ratio = Check(name="r", label="ratio", kind="absolute", direction="lower_is_better",
                  head=3.333, threshold=1.25, ci_low=3.1, ci_high=3.5, outcome=Outcome.FAIL)
    share = Check(name="v", label="valid", kind="validity", direction="higher_is_better",
                  unit="share", head=0.97, threshold=1.0, outcome=Outcome.ERROR)
    text = render_verdict(f.verdict(checks=[ratio, share]))
    ratio_line = next(line for line in text.splitlines() if line.startswith("ratio"))
    valid_line = next(line for line in text.splitlines() if line.startswith("valid"))
    assert "3.333" in ratio_line and "3.1 .. 3.5" in ratio_line and "<= 1.25" in ratio_line
    assert "97.0%" in valid_line and ">= 100.0%" in valid_line and "error" in valid_line


def test_empty_sections_are_left_out():
    text = render_verdict(f.headline_verdict(Outcome.PASS, "PASS: nothing to see"))
    assert text == "PASS: nothing to see\n"
    text = render_verdict(f.headline_verdict(Outcome.PASS).model_copy(
        update={"warnings": ["cpu governor is powersave"], "notes": ["one note"]}))
    assert "warnings:\n  - cpu governor is powersave" in text and "notes:\n  - one note" in text
    assert "errors:" not in text and "advice:" not in text
