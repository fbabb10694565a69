"""Profile diff tied to a PR, end to end without vLLM: a real git repository whose PR changes
three functions in a watched path, only one of them slower; a real workload program from each
checkout, sampled by real py-spy; `gate hunks` and `gate profile diff` as a user runs them.

The slowed hunk matches no regression pattern, while another hunk's changed line names
pin_memory and torch.full (pattern score 10): the evidence must still rank the slowed one
first. Takes about 30 s (two 11 s profiles)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from vllm_helpers import run_gate

from gate.attribution import load_evidence
from gate.hunks import load_hunks
from gate.profile import Sampler, SamplingOptions, assemble_profile
from gate.profile_data import ProcessInfo, save_profile
from gate.profile_diff import load_profile_diff

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent",
}
UTILS = "vllm/v1/structured_output/utils.py"
BASE_MS = 0.2  # per call, i.e. per token, of each of the three steps
SLOWED_MS = 0.8  # fill_rows in the head: +0.6 ms per token = +600 ms per 1k tokens


def spin_function(name: str, cost_line: str, extra: str = "", counter: str = "spins") -> str:
    """A function that burns `cost_ms` per row in its own frame (self time)."""
    return (f"def {name}(rows):\n"
            f"    {cost_line}\n"
            f"{extra}"
            f"    deadline = time.perf_counter() + cost_ms * rows / 1000.0\n"
            f"    {counter} = 0\n"
            f"    while time.perf_counter() < deadline:\n"
            f"        {counter} += 1\n"
            f"    return {counter}\n")


def padding(tag: str) -> str:
    # Eight unchanged lines between functions keep git from merging their hunks.
    return "\n\n" + "".join(f"{tag}_{i} = {i}\n" for i in range(8)) + "\n\n"


def utils_source(head: bool) -> str:
    fill_ms = SLOWED_MS if head else BASE_MS
    staged = ("    staged = [0] * 8  # was torch.full((8,), 0, pin_memory=True): not needed\n"
              if head else "    staged = [0] * 8\n")
    return ('"""Stand-in for the structured-output utilities: three steps per token."""\n\n'
            "import time\n\n\n"
            + spin_function("fill_rows", f"cost_ms = {fill_ms}")
            + padding("FILL")
            + spin_function("stage_buffer", f"cost_ms = {BASE_MS}", staged)
            + padding("STAGE")
            + spin_function("apply_grammar_bitmask", f"cost_ms = {BASE_MS}",
                            counter="count" if head else "acc"))


WORKLOAD = '''\
"""Runs the three steps once per token until SIGTERM; writes each token's time."""
import json
import signal
import sys
import time

from vllm.v1.structured_output import utils

stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
stamps = []
give_up = time.perf_counter() + 300
while not stop and time.perf_counter() < give_up:
    utils.fill_rows(1)
    utils.stage_buffer(1)
    utils.apply_grammar_bitmask(1)
    stamps.append(time.perf_counter())
with open(sys.argv[1], "w") as f:
    json.dump(stamps, f)
'''


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env={**os.environ, **GIT_ENV}).stdout.strip()


def build_repo(root: Path) -> tuple[Path, str, str]:
    repo = root / "repo"
    for pkg in ("vllm", "vllm/v1", "vllm/v1/structured_output"):
        (repo / pkg).mkdir(parents=True, exist_ok=True)
        (repo / pkg / "__init__.py").write_text("")
    (repo / "workload.py").write_text(WORKLOAD)
    (repo / UTILS).write_text(utils_source(head=False))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    (repo / UTILS).write_text(utils_source(head=True))
    git(repo, "commit", "-q", "-am", "head: three functions changed, one slower")
    return repo, base, git(repo, "rev-parse", "HEAD")


def profile_checkout(repo: Path, sha: str, label: str, root: Path) -> Path:
    """Check `sha` out into its own folder, run the workload there and profile it."""
    checkout = root / f"checkout-{label}"
    git(repo, "worktree", "add", "-q", "--detach", str(checkout), sha)
    stamps, out = root / f"{label}-stamps.json", root / f"profile-{label}"
    prog = subprocess.Popen([sys.executable, "workload.py", str(stamps)], cwd=checkout)
    opts = SamplingOptions(rate_hz=100, windows=5, window_s=2.0, settle_s=1.0)
    procs = [ProcessInfo(pid=prog.pid, role="Workload", title="workload.py")]
    try:
        time.sleep(0.5)  # the interpreter must be up before py-spy can read its version
        sampler = Sampler(procs, opts, out / "raw", log=lambda _: None)
        t0 = time.perf_counter()
        sampler.start()
        assert sampler.done.wait(120)
    finally:
        prog.terminate()
        prog.wait(timeout=30)
    events = [(t, 1.0) for t in json.loads(stamps.read_text())]
    profile = assemble_profile(sampler.result(), events, procs, opts, t0, label=label,
                               source="workload.py", roots=[checkout])
    save_profile(profile, out)
    return out


@pytest.fixture(scope="module")
def pr_profiles(tmp_path_factory):
    root = tmp_path_factory.mktemp("pr")
    repo, base, head = build_repo(root)
    hunks = root / "hunks.json"
    proc = run_gate("hunks", "--repo", str(repo), "--base", base, "--head", head,
                    "--out", str(hunks))
    assert proc.returncode == 0, proc.stderr
    base_dir = profile_checkout(repo, base, "base", root)
    head_dir = profile_checkout(repo, head, "head", root)
    out = root / "diff"
    proc = run_gate("profile", "diff", str(base_dir), str(head_dir), "--hunks", str(hunks),
                    "--repo", str(repo), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return hunks, out, proc.stdout


def changed_function(hunk) -> str:
    """Which of the three functions a hunk changes, from its changed lines."""
    changed = "\n".join(ln for ln in hunk.text.splitlines() if ln[:1] in "+-")
    if "staged" in changed:
        return "stage_buffer"
    return "fill_rows" if f"cost_ms = {SLOWED_MS}" in changed else "apply_grammar_bitmask"


def test_patterns_alone_would_rank_another_hunk_first(pr_profiles):
    hunks, _, _ = pr_profiles
    ranked = load_hunks(hunks).hunks
    assert [changed_function(h) for h in ranked] == ["stage_buffer", "fill_rows", "apply_grammar_bitmask"]
    assert ranked[0].score > ranked[1].score
    assert {"pin_memory", "full_staging"} <= set(ranked[0].mechanisms)


def test_the_slowed_function_is_ranked_first_by_evidence(pr_profiles):
    _, out, stdout = pr_profiles
    evidence = load_evidence(out / "evidence.json")
    first = evidence.hunks[0]
    assert first.path == UTILS and first.tier == "self"
    assert [f.name for f in first.functions] == ["fill_rows"]
    # +0.6 ms per token injected; sampled figure within a factor 1.5.
    assert 400 <= first.added_ms <= 900, first.evidence
    assert first.evidence.startswith("+") and "in fill_rows, vllm/v1/structured_output/utils.py:" \
        in first.evidence
    assert f"hunk 1: {UTILS}:" in stdout and "fill_rows" in stdout.split("hunk 2:")[0]
    # The others carry no evidence and keep their pattern order behind it.
    assert [h.tier for h in evidence.hunks[1:]] == ["none", "none"]
    assert [h.score for h in evidence.hunks[1:]] == sorted(
        (h.score for h in evidence.hunks[1:]), reverse=True)
    assert evidence.untouched == []


def test_the_unchanged_speed_functions_show_no_significant_difference(pr_profiles):
    _, out, _ = pr_profiles
    diff = load_profile_diff(out / "profile-diff.json")
    by_name = {f.name: f for f in diff.functions if f.file == UTILS}
    for name in ("stage_buffer", "apply_grammar_bitmask"):
        f = by_name[name]
        assert not f.self_time.significant and not f.inclusive.significant, f
    fill = by_name["fill_rows"]
    assert fill.self_time.significant and diff.added[0] is not None
    assert diff.added[0].name == "fill_rows"
    assert 0.5 < fill.self_time.head / fill.self_time.base / (SLOWED_MS / BASE_MS) < 1.5


def test_artifacts(pr_profiles):
    _, out, _ = pr_profiles
    diff = load_profile_diff(out / "profile-diff.json")
    folded = (out / "diff.folded").read_text().splitlines()
    assert folded and all(len(line.rsplit(" ", 2)) == 3 for line in folded)
    fill = [ln for ln in folded if ln.split(" ")[-3].endswith(f"fill_rows ({UTILS}:4)")
            or "fill_rows (" in ln.rsplit(" ", 2)[0].split(";")[-1]]
    assert fill and all(int(ln.split()[-1]) > int(ln.split()[-2]) for ln in fill)
    svg = (out / "diff-flamegraph.svg").read_text()
    assert svg.startswith("<svg") and "fill_rows" in svg
    assert "Where the head spends more time" in (out / "where-time.md").read_text()
    assert set(diff.artifacts) >= {"diff_folded", "flamegraph_svg", "evidence", "section"}
