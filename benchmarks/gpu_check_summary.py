"""The summary of one benchmarks/gpu_check.sh run, from the files its steps wrote in OUT:
every step's exit code and seconds, the builds and their hunks, the staging figures, and per
A/B its verdict, the vllm folder each side imported and the KV cache each server allocated.

    python benchmarks/gpu_check_summary.py OUT > OUT/summary.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def read(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def ab_summary(folder: Path) -> dict | None:
    verdict = read(folder / "verdict.json")
    if not isinstance(verdict, dict):
        return None
    sides = {}
    for label in ("base", "head"):
        results = read(folder / label / "results.json")
        if isinstance(results, dict):
            fp = results.get("fingerprint") or {}
            served = (results.get("doctor") or {}).get("served") or {}
            sides[label] = {"vllm_origin": fp.get("vllm_origin"),
                            "model_runner": fp.get("model_runner"),
                            "kv_cache_tokens": served.get("kv_cache_tokens")}
    return {"outcome": verdict.get("outcome"), "headline": verdict.get("headline"),
            "rounds": verdict.get("rounds"), "runner_seconds": verdict.get("runner_seconds"),
            "sides": sides}


def main(out: Path) -> dict:
    preflight = (out / "preflight.log").read_text().strip().splitlines() \
        if (out / "preflight.log").is_file() else []
    staging = read(out / "staging.json")
    return {
        "steps": (read(out / "steps.json") or {}).get("steps", []),
        "preflight": read_last_json(preflight),
        "builds": read(out / "builds.json"),
        "hunks": [{"path": h.get("path"), "mechanisms": h.get("mechanisms")}
                  for h in ((read(out / "hunks.json") or {}).get("hunks") or [])],
        "staging": staging.get("figures") if isinstance(staging, dict) else None,
        "ab": {name: ab_summary(out / name) for name in ("ab-aa", "ab-seed")
               if (out / name).is_dir()},
    }


def read_last_json(lines: list[str]) -> object:
    for line in reversed(lines):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1])), indent=1))
