"""Profile diff tied to a PR, end to end without vLLM: a real git repository whose PR changes
three functions in a watched path, only one of them slower; a real workload program from each
checkout, sampled by real py-spy; `gate hunks` and `gate profile diff` as a user runs them.

The two checkouts' programs run side by side, sampled over the same seconds, and the diff
weighs samples by CPU time (`--basis cpu`), so that both builds see the same machine: on a
2-core machine shared with other busy processes, py-spy counted a starved process as active
for whole windows in which it ran for 1% of the time.

The slowed hunk matches no regression pattern, while another hunk's changed line names
pin_memory and torch.full (pattern score 10): the evidence must still rank the slowed one
first. Takes about 20 s (two 11 s profiles, side by side)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import gate_subprocess
from support.gitrepo import git

from gate.evidence.attribution import load_evidence
from gate.evidence.hunks import load_hunks
from gate.profile.data import ProcessInfo, save_build_profile
from gate.profile.diff_file import load_profile_diff
from gate.profile.sampling import SampledLoad, Sampler, SamplingOptions, assemble_profile

UTILS = "vllm/v1/structured_output/utils.py"
BASE_STEPS = 4000  # loop iterations per call (per token) of each of the three steps
SLOWED_STEPS = 16000  # fill_rows in the head: 4x the work


def spin_function(name: str, cost_line: str, extra: str = "", counter: str = "spins") -> str:
    """A function that does `steps` loop iterations per row in its own frame (self time):
    a fixed amount of CPU work, so a busier machine stretches all three alike."""
    return (f"def {name}(rows):\n"
            f"    {cost_line}\n"
            f"{extra}"
            f"    {counter} = 0\n"
            f"    for _ in range(steps * rows):\n"
            f"        {counter} += 1\n"
            f"    return {counter}\n")


def padding(tag: str) -> str:
    # Eight unchanged lines between functions keep git from merging their hunks.
    return "\n\n" + "".join(f"{tag}_{i} = {i}\n" for i in range(8)) + "\n\n"


def utils_source(head: bool) -> str:
    fill = SLOWED_STEPS if head else BASE_STEPS
    staged = ("    staged = [0] * 8  # was torch.full((8,), 0, pin_memory=True): not needed\n"
              if head else "    staged = [0] * 8\n")
    return ('"""Stand-in for the structured-output utilities: three steps per token."""\n\n'
            + spin_function("fill_rows", f"steps = {fill}")
            + padding("FILL")
            + spin_function("stage_buffer", f"steps = {BASE_STEPS}", staged)
            + padding("STAGE")
            + spin_function("apply_grammar_bitmask", f"steps = {BASE_STEPS}",
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


def checkout(repo: Path, sha: str, folder: Path) -> Path:
    git(repo, "worktree", "add", "-q", "--detach", str(folder), sha)
    return folder


def profile_side_by_side(builds: dict[str, Path], root: Path) -> dict[str, Path]:
    """Run every checkout's workload at once and sample each with its own Sampler."""
    opts = SamplingOptions(rate_hz=100, windows=5, window_s=2.0, settle_s=1.0)
    progs = {label: subprocess.Popen([sys.executable, "workload.py", str(root / f"{label}.json")],
                                     cwd=folder) for label, folder in builds.items()}
    samplers, procs = {}, {}
    try:
        time.sleep(0.5)  # the interpreters must be up before py-spy can read their version
        t0 = time.perf_counter()
        for label, prog in progs.items():
            procs[label] = [ProcessInfo(pid=prog.pid, role="Workload", title="workload.py")]
            samplers[label] = Sampler(procs[label], opts, root / label / "raw", log=lambda _: None)
            samplers[label].start()
        assert all(s.done.wait(120) for s in samplers.values())
    finally:
        for prog in progs.values():
            prog.terminate()
            prog.wait(timeout=30)
    for label, sampler in samplers.items():
        events = [(t, 1.0) for t in json.loads((root / f"{label}.json").read_text())]
        sampled = SampledLoad(sampler.result(), procs[label], events, t0)
        profile = assemble_profile(sampled, opts, label=label, source="workload.py",
                                   roots=[builds[label]])
        save_build_profile(profile, root / label)
    return {label: root / label for label in builds}


@pytest.fixture(scope="module")
def pr_profiles(tmp_path_factory):
    root = tmp_path_factory.mktemp("pr")
    repo, base, head = build_repo(root)
    hunks = root / "hunks.json"
    proc = gate_subprocess("hunks", "--repo", str(repo), "--base", base, "--head", head,
                    "--out", str(hunks))
    assert proc.returncode == 0, proc.stderr
    dirs = profile_side_by_side({"base": checkout(repo, base, root / "checkout-base"),
                                 "head": checkout(repo, head, root / "checkout-head")}, root)
    out = root / "diff"
    # The workload never spin-waits: CPU time tells its work from waiting for a core.
    proc = gate_subprocess("profile", "diff", str(dirs["base"]), str(dirs["head"]), "--hunks", str(hunks),
                    "--repo", str(repo), "--out", str(out), "--basis", "cpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return hunks, out, proc.stdout


def changed_function(hunk) -> str:
    """Which of the three functions a hunk changes, from its changed lines."""
    changed = "\n".join(ln for ln in hunk.text.splitlines() if ln[:1] in "+-")
    if "staged" in changed:
        return "stage_buffer"
    return "fill_rows" if f"steps = {SLOWED_STEPS}" in changed else "apply_grammar_bitmask"


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
    # 3x fill_rows's base time per token added; the sampled figure within a factor 1.5.
    fill = next(f for f in load_profile_diff(out / "profile-diff.json").functions
                if f.name == "fill_rows")
    expected = (SLOWED_STEPS / BASE_STEPS - 1) * fill.self_time.base
    assert expected / 1.5 <= first.added_ms <= expected * 1.5, first.evidence
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
    assert 1 / 1.5 < fill.self_time.head / fill.self_time.base / (SLOWED_STEPS / BASE_STEPS) < 1.5


def test_profile_diff_writes_folded_stacks_flame_graph_and_section(pr_profiles):
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
