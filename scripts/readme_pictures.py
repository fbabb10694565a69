"""The README's pictures, from synthetic figures (labelled so): an example PR comment as
GitHub would render it, and the history dashboard. Writes docs/example-comment.md (the
comment's markdown) and docs/images/example-comment.png, docs/images/dashboard.png.

    .venv/bin/python scripts/readme_pictures.py [--mermaid-js node_modules/mermaid/dist/mermaid.min.js]

The comment is rendered with markdown-it-py (the dev extra) and a GitHub-like stylesheet, then
photographed by headless Chromium (Debian's `chromium`). With --mermaid-js (npm install
mermaid) its mermaid charts are drawn as GitHub draws them; without, they show as code.
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gate.history.detect import detect_store  # noqa: E402
from gate.history.model import Acknowledgement  # noqa: E402
from gate.history.replay import as_series, nights  # noqa: E402
from gate.judge.trajectory import Look, Trajectory  # noqa: E402
from gate.judge.verdict import Check, Outcome, Verdict  # noqa: E402
from gate.measure.metrics import level_ratios  # noqa: E402
from gate.measure.results import (  # noqa: E402
    CellSummary,
    Distribution,
    Results,
    ServerInfo,
)
from gate.plan.spec import load_plan  # noqa: E402
from gate.report.dashboard import dashboard, render_dashboard  # noqa: E402
from gate.report.render import ReportInput, render_report  # noqa: E402
from gate.runner.fingerprint import Fingerprint  # noqa: E402
from gate.runner.gpus import Gpu  # noqa: E402

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars"]
CSS = """
body { font: 14px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif;
       color: #1f2328; margin: 0; padding: 24px; background: #fff; }
.comment { max-width: 860px; border: 1px solid #d1d9e0; border-radius: 6px; padding: 16px 20px; }
.who { font-size: 13px; color: #59636e; border-bottom: 1px solid #d1d9e0; margin: -16px -20px 12px;
       padding: 8px 20px; background: #f6f8fa; border-radius: 6px 6px 0 0; }
table { border-collapse: collapse; margin: 8px 0; display: block; overflow: auto; }
th, td { border: 1px solid #d1d9e0; padding: 4px 10px; font-size: 13px; }
th { background: #f6f8fa; } code { background: #eff1f3; padding: 1px 4px; border-radius: 4px;
font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; }
pre { background: #f6f8fa; padding: 12px; border-radius: 6px; overflow: auto; }
h3 { font-size: 18px; margin: 4px 0 6px; } sub { color: #59636e; }
details { margin: 8px 0; } summary { cursor: pointer; font-weight: 600; }
"""
SHA = "3f9c1e2a7b4d"


def example_verdict() -> Verdict:
    def rel(name, label, base, head, lo, hi, outcome, unit, direction, thr=10.0, at=None):
        return Check(name=name, label=label, kind="relative", direction=direction, unit=unit,
                     base=base, head=head, delta_pct=(head - base) / base * 100, ci_low_pct=lo,
                     ci_high_pct=hi, threshold=thr, outcome=outcome, head_n=4, base_n=4,
                     decided_at_round=at)

    checks = [
        rel("drain.req_per_min", "drain req/min (guided)", 233.0, 121.0, -51.0, -45.0,
            Outcome.FAIL, "req/min", "higher_is_better", at=2),
        rel("sweep.c64.tpot_p50_ms", "TPOT p50 (guided, c=64)", 11.2, 21.5, 84.0, 100.0,
            Outcome.FAIL, "ms", "lower_is_better", at=2),
        rel("sweep.c64.tpot_p99_ms", "TPOT p99 (guided, c=64)", 19.0, 19.6, -2.0, 8.0,
            Outcome.PASS, "ms", "lower_is_better", thr=25.0, at=4),
        rel("sweep.c64.ttft_p50_ms", "TTFT p50 (guided, c=64)", 152.0, 149.0, -6.0, 2.5,
            Outcome.PASS, "ms", "lower_is_better", thr=15.0, at=4),
        Check(name="validity", label="valid JSON (guided)", kind="validity",
              direction="higher_is_better", unit="share", head=1.0, threshold=1.0,
              outcome=Outcome.PASS),
    ]
    return Verdict(outcome=Outcome.FAIL, mode="ab", checks=checks, rounds=4,
                   headline="FAIL: guided drain 48% slower (233 -> 121 req/min), TPOT p50 "
                   "+92% at c=64", runner_seconds={"wall": 1260.0, "startup": 210.0,
                                                   "drain": 480.0, "sweep": 430.0},
                   noise_profile="calibration: 10 blocks of 2 rounds (example figures)",
                   method="A/B, paired rounds in blocks of 2 (example figures).")


def example_looks() -> list[Trajectory]:
    return [
        Trajectory("drain.req_per_min", "drain req/min (guided)",
                   [Look(1, -47.0, None, Outcome.INCONCLUSIVE),
                    Look(2, -48.0, 1.9, Outcome.INCONCLUSIVE), Look(4, -48.1, 4.6, Outcome.FAIL)],
                   2.94, -2.94, 8),
        Trajectory("sweep.c64.tpot_p50_ms", "TPOT p50 (guided, c=64)",
                   [Look(1, 88.0, None, Outcome.INCONCLUSIVE),
                    Look(2, 91.0, 2.1, Outcome.INCONCLUSIVE), Look(4, 92.0, 4.9, Outcome.FAIL)],
                   2.94, -2.94, 8),
        Trajectory("sweep.c64.tpot_p99_ms", "TPOT p99 (guided, c=64)",
                   [Look(1, 4.0, None, Outcome.INCONCLUSIVE), Look(2, 3.5, -1.1, Outcome.INCONCLUSIVE),
                    Look(4, 3.1, -3.3, Outcome.PASS)], 2.94, -2.94, 8),
    ]


def example_results(label: str, rpm: float, tpot: float) -> Results:
    """A run of four rounds on one A100 (example figures): the drain and the sweep at c=64."""
    plan = load_plan("a100-gemma4-26b-pr")
    cells = []
    for r in range(4):
        jitter = 1.0 + 0.01 * ((r * 7) % 3 - 1)
        cells.append(_cell("drain", "guided", 64, r, rpm * jitter, tpot * jitter))
        cells.append(_cell("sweep", "guided", 64, r, rpm * jitter, tpot * jitter))
        cells.append(_cell("sweep", "free", 64, r, 240.0 * jitter, 10.6 * jitter))
    fp = Fingerprint(cpu_model="AMD EPYC 7763", host_cores=32, affinity_cpus=32,
                     gpus=[Gpu(name="NVIDIA A100-SXM4-80GB", memory_total_mib=81920)],
                     versions={"vllm": "0.24.0"}, vllm_commit=SHA, torch_threads=16,
                     model_runner="v1", model_runner_source="server log")
    return Results(label=label, created_at="2026-12-03T10:00:00Z", plan=plan,
                   plan_hash=plan.measurement_hash(), fingerprint=fp,
                   server=ServerInfo(base_url="http://127.0.0.1:8000", started_by_gate=True,
                                     model=plan.server.model or "model"),
                   cells=cells, ratios=level_ratios(cells), sequential_rounds=8)


def _cell(phase, arm, c, r, rpm, tpot) -> CellSummary:
    tokens, requests = 256, 200
    rps = rpm / 60.0

    def dist(p50: float) -> Distribution:
        return Distribution(mean=p50, std=p50 * 0.1, p50=p50, p90=p50 * 1.3, p99=p50 * 1.7,
                            count=requests)

    guided = arm == "guided"
    return CellSummary(phase=phase, arm=arm, concurrency=c, repeat=r, requests=requests,
                       completed=requests, failed=0, duration_s=requests / rps,
                       total_output_tokens=requests * tokens, request_throughput=rps,
                       output_throughput=rps * tokens, ttft_ms=dist(150.0), tpot_ms=dist(tpot),
                       itl_ms=dist(tpot), e2el_ms=dist(tpot * tokens),
                       valid_outputs=requests if guided else 0)


def example_history() -> dict[str, list[float]]:
    return {"drain.req_per_min": nights(30, level=233.0, sd=0.03, seed=4),
            "sweep.c64.tpot_p50_ms": nights(30, level=11.2, sd=0.03, seed=5),
            "sweep.c64.tpot_p99_ms": nights(30, level=19.0, sd=0.04, seed=6),
            "sweep.c64.ttft_p50_ms": nights(30, level=150.0, sd=0.05, seed=7)}


def comment_html(md: str, mermaid_js: Path | None) -> str:
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": True}).enable(["table"]).render(md)
    body = body.replace("<details>", "<details open>")
    script = ""
    if mermaid_js is not None:
        body = re.sub(r'<pre><code class="language-mermaid">(.*?)</code></pre>',
                      lambda m: f'<pre class="mermaid">{m.group(1)}</pre>', body, flags=re.S)
        script = (f"<script>{mermaid_js.read_text()}</script><script>mermaid.initialize("
                  "{startOnLoad: true, theme: 'default'});</script>")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><style>{CSS}</style></head>"
            f"<body><div class='comment'><div class='who'><b>github-actions</b> bot commented "
            f"on PR {html.escape(SHA)}: example figures, not a measurement</div>{body}</div>"
            f"{script}</body></html>")


def shoot(page: Path, png: Path, size: str) -> None:
    exe = shutil.which("chromium")
    if exe is None:
        raise SystemExit("chromium is missing: apt-get install -y chromium")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([exe, *FLAGS, f"--user-data-dir={profile}", f"--window-size={size}",
                        "--virtual-time-budget=5000", f"--screenshot={png}",
                        page.resolve().as_uri()], capture_output=True, timeout=180, check=True)
    print(f"wrote {png}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mermaid-js", type=Path, help="mermaid.min.js, to draw the charts")
    p.add_argument("--out", type=Path, default=ROOT / "docs")
    args = p.parse_args()
    images = args.out / "images"
    images.mkdir(parents=True, exist_ok=True)
    md = render_report(ReportInput(
        verdict=example_verdict(), head=example_results("head", 121.0, 21.5),
        base=example_results("base", 233.0, 11.2), history=example_history(),
        trajectories=example_looks(), title="Structured-output performance gate (example)"))
    (args.out / "example-comment.md").write_text(
        "<!-- Generated by scripts/readme_pictures.py from example figures. -->\n" + md)
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "comment.html"
        page.write_text(comment_html(md, args.mermaid_js))
        shoot(page, images / "example-comment.png", "940,2300")
        plan, a100, h100 = ("gemma-4-26b-nightly", "gpu: 1x NVIDIA A100-SXM4-80GB (example)",
                            "gpu: 1x NVIDIA H100 80GB HBM3 (example)")
        quiet = as_series(nights(45, level=233.0, sd=0.03, seed=1, step_at=30, step=121 / 233),
                          plan=plan, runner_class=a100)
        other = as_series(nights(45, level=342.0, sd=0.04, seed=2, step_at=30, step=0.55),
                          plan=plan, runner_class=h100)
        tpot = as_series(nights(45, level=11.2, sd=0.03, seed=3, step_at=18, step=1.12),
                         check="sweep.c64.tpot_p50_ms", label="TPOT p50 (guided, c=64)",
                         unit="ms", direction="lower_is_better", plan=plan, runner_class=a100)
        ack = Acknowledgement(repository="vllm-project/vllm", pr=1, head_sha="e" * 40,
                              check="sweep.c64.tpot_p50_ms", reason="larger grammar on purpose",
                              login="maintainer", permission="write", created_at="2026-12-01",
                              merged_commit=tpot.points[18].commit)
        series = [quiet, other, tpot]
        board = Path(tmp) / "dashboard.html"
        board.write_text(render_dashboard(dashboard(
            series, detect_store(series, acknowledgements=[ack]),
            title="Structured-output performance on the default branch (example figures)")))
        shoot(board, images / "dashboard.png", "860,820")
    return 0


if __name__ == "__main__":
    sys.exit(main())
