"""How far a healthy build's profile differs from itself in `gate ab`: the evidence behind
gate.profile.diff's share floor.

Runs `gate ab --profile always` with the same build on both sides (`--runs N`, each to its own
folder), or reads A/B folders written before (`--from DIR ...`), and re-diffs each pair of
profiles with the share floor off (the 50% one on). Printed per run: the verdict, the
drain's change, the largest difference the bootstrap calls significant as a share of the
base's total time per token, and what the default floors name (should be nothing: both
servers run the same code).

    python benchmarks/profile_aa.py --runs 5 --plan PLAN --out DIR [-- extra gate ab args]
    python benchmarks/profile_aa.py --from DIR [DIR ...]

Run it alone: anything else on the machine moves single functions by more than the floors.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from tabulate import tabulate

from gate.judge.verdict import load_verdict
from gate.profile.data import load_build_profile
from gate.profile.diff import diff_profiles
from gate.profile.diff_file import DiffSettings, ProfileDiff


def largest(diff: ProfileDiff) -> tuple[float, str]:
    """(share of the base total, description) of the largest significant difference."""
    floor = diff.total.base - diff.waiting.base
    best = (0.0, "-")
    for f in diff.named:
        for kind, c in (("self", f.self_time), ("incl", f.inclusive)):
            if c.significant and abs(c.diff) / floor > best[0]:
                best = (abs(c.diff) / floor, f"{f.name} {kind} {c.diff:+.0f}")
    return best


def row(folder: Path) -> dict:
    base, head = (load_build_profile(folder / arm / "profile") for arm in ("base", "head"))
    loose = diff_profiles(base, head, DiffSettings(min_share=0))
    default = diff_profiles(base, head)
    share, what = largest(loose)
    verdict = load_verdict(folder / "verdict.json")
    drain = next((c.delta_pct for c in verdict.checks if c.name == "drain.req_per_min"), None)
    return {"run": str(folder), "verdict": verdict.outcome.value,
            "drain req/min": "-" if drain is None else f"{drain:+.1f}%",
            "total ms/1k tok": f"{default.total.base:.0f} -> {default.total.head:.0f}",
            "largest significant": what, "share": f"{100 * share:.1f}%",
            "named at the floor": ", ".join(f.name for f in default.named) or "-"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=0)
    ap.add_argument("--plan", default="cpu-smoke")
    ap.add_argument("--out", type=Path, default=Path("profile-aa"))
    ap.add_argument("--from", dest="folders", type=Path, nargs="*", default=[])
    ap.add_argument("extra", nargs="*", help="more gate ab arguments (after --)")
    args = ap.parse_args()
    folders = list(args.folders)
    for i in range(args.runs):
        out = args.out / f"run{i + 1}"
        proc = subprocess.run([sys.executable, "-m", "gate.cli", "ab", "--plan", args.plan,
                               "--profile", "always", "--out", str(out), "--quiet",
                               *args.extra], capture_output=True, text=True)
        print(f"run {i + 1}: gate ab exited {proc.returncode}", file=sys.stderr, flush=True)
        folders.append(out)
    rows = [row(f) for f in folders if (f / "profile-diff").is_dir()]
    print(f"A/A profile diffs, default floors {DiffSettings().min_share:.0%} of the total and "
          f"{DiffSettings().min_rel:.0%} of the function; share = largest significant "
          "difference / base total (waits left out)")
    print(tabulate(rows, headers="keys"))


if __name__ == "__main__":
    main()
