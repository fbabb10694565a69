"""`gate fingerprint`: the environment fingerprint (and its warnings) as JSON."""

from __future__ import annotations

from pathlib import Path

from gate.core.settings import Settings
from gate.runner import fingerprint


def add_parser(sub) -> None:
    p = sub.add_parser("fingerprint", help="print the environment fingerprint as JSON")
    p.add_argument("--python", help="interpreter whose torch/vLLM to probe (default: this one)")
    p.add_argument("--cgroup-root", type=Path, default=Path("/sys/fs/cgroup"))
    p.set_defaults(handler=handle)


def handle(args, settings: Settings) -> int:
    fp = fingerprint.take_fingerprint(python=args.python, cgroup_root=args.cgroup_root)
    print(fp.model_dump_json(indent=2))
    for warning in fingerprint.warnings_for(fp):
        print(f"warning: {warning}")
    return 0
