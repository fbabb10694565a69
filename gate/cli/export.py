"""`gate export`: results.json in vllm-bench, github-action-benchmark, PyTorch HUD (v3) or
Bencher (BMF) format."""

from __future__ import annotations

import json
from pathlib import Path

from gate.core.files import write_atomic
from gate.core.settings import Settings
from gate.measure.results import load_results
from gate.report import export


def add_parser(sub) -> None:
    p = sub.add_parser("export", help="write results in vllm-bench, benchmark-action, "
                       "pytorch-v3 (HUD) or bencher (BMF) format")
    p.add_argument("results", help="results.json (or its folder)")
    p.add_argument("--format", choices=["vllm-bench", "benchmark-action", "pytorch-v3",
                                        "bencher"], required=True)
    p.add_argument("--cell", metavar="LABEL",
                   help="vllm-bench: the cell, e.g. 'sweep guided c=8 r1' (default: the drain)")
    p.add_argument("--direction", choices=["bigger", "smaller"], default="bigger",
                   help="benchmark-action: which list (customBiggerIsBetter or ...Smaller...)")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(handler=handle)


def handle(args, settings: Settings) -> int:
    results = load_results(args.results)
    data: object
    if args.format == "vllm-bench":
        data = export.vllm_bench(results, export.select_cell(results, args.cell))
    elif args.format == "pytorch-v3":
        data = export.pytorch_v3(results)
    elif args.format == "bencher":
        data = export.bencher_bmf(results)
    else:
        bigger, smaller = export.benchmark_action(results)
        data = bigger["biggerIsBetter"] if args.direction == "bigger" else smaller["smallerIsBetter"]
    write_atomic(args.out, json.dumps(data, indent=2))
    print(f"wrote {args.out}")
    return 0
