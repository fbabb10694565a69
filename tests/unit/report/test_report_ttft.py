"""The report on time to first token: the shared-schema (cache hit) and unique-schema (cache
miss) arms explained in one table, where the wait is, and a table per backend."""

from __future__ import annotations

from pathlib import Path

from support import factories as f

from gate.cli import main as gate_cli_main
from gate.flows import backends
from gate.judge.verdict import Outcome
from gate.measure.results import ServerTimes
from gate.report.render import ReportInput, render_report


def results(unique_ttft: float, unique_queue: float, label: str):
    def times(queue: float) -> ServerTimes:
        return ServerTimes(requests=30, queue_ms=queue, prefill_ms=12.0, ttft_ms=queue + 12)

    cells = [f.cell("sweep", "guided", 4, ttft_p50=60.0, server_times=times(8.0)),
             f.cell("sweep", "free", 4, ttft_p50=50.0, server_times=times(5.0)),
             f.cell("sweep", "unique", 4, ttft_p50=unique_ttft, server_times=times(unique_queue))]
    return f.make_results(cells, plan=f.cpu_plan(), fp=f.fingerprint(), label=label)


def ttft_verdict() -> object:
    check = f.check("unique.c4.ttft_p50_ms", "TTFT p50 (unique schemas, c=4)", 400.0, 900.0,
                    Outcome.FAIL, threshold=25.0)
    return f.verdict(checks=[check], headline="FAIL: time to first token: TTFT p50 (unique "
                     "schemas, c=4) +125.0%")


def test_the_ttft_table_explains_both_arms_and_the_wait_section_names_the_grammar():
    md = render_report(ReportInput(verdict=ttft_verdict(), head=results(900.0, 860.0, "head"),
                                   base=results(400.0, 350.0, "base")))
    assert "time to first token" in md.splitlines()[0]
    assert "#### Time to first token per concurrency" in md
    assert "_Shared schemas_" in md and "the cache-miss path" in md
    ttft = md.split("#### Time to first token per concurrency")[1]
    row = next(line for line in ttft.splitlines() if line.startswith("| 4 | head |"))
    assert [c.strip(" |") for c in row.split(" | ")[2:7]] == ["60", "900", "50", "+10",
                                                            "+850"]
    assert "#### Where the wait is" in md
    wait = next(line for line in md.splitlines() if line.startswith("| unique schemas"))
    assert "350 → 860" in wait and "waiting for the grammar: +510 ms of the +500 ms" in wait


def test_a_plan_without_the_unique_arm_says_it_is_not_measured():
    head = f.sweep_results("head", f.REGRESSED)
    md = render_report(ReportInput(verdict=f.verdict(), head=head, base=None))
    assert "not measured by this plan (sweep arm `unique`)" in md


def test_report_per_backend_shows_a_table_per_backend(tmp_path: Path):
    for name, unique in (("xgrammar", 900.0), ("guidance", 410.0)):
        folder = tmp_path / name
        for label, u in (("head", unique), ("base", 400.0)):
            (folder / label).mkdir(parents=True)
            (folder / label / "results.json").write_text(
                f.results_json(results(u, u - 50, label)))
        outcome = Outcome.FAIL if name == "xgrammar" else Outcome.PASS
        (folder / "verdict.json").write_text(f.verdict(outcome=outcome).model_dump_json())
    backends.write_index(tmp_path, "ab", [
        backends.BackendEntry(backend="xgrammar", dir="xgrammar", outcome=Outcome.FAIL),
        backends.BackendEntry(backend="guidance", dir="guidance", outcome=Outcome.PASS)])
    out = tmp_path / "report.md"
    assert gate_cli_main(["report", "--backends", str(tmp_path), "--out", str(out)]) == 0
    md = out.read_text()
    assert md.startswith("### ❌ FAIL") and "(worst of 2: xgrammar)" in md.splitlines()[0]
    assert "### xgrammar" in md and "### guidance" in md
    assert md.count("#### Time to first token per concurrency") == 2
    assert gate_cli_main(["report", "--backends", str(tmp_path), "--head", str(out)]) == 2
