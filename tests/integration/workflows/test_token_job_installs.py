"""The jobs that hold a GitHub token install the gate from a hash-pinned lock and run only what
that lock provides (issue 16, item 5; docs/security.md, "Hash-pinned installs in the token jobs"):

- requirements/poster.txt and nightly-update.txt pin every distribution with its hashes and
  cover the build backend (the gate goes in with --no-deps --no-build-isolation);
- the commands those jobs run (`gate publish --post-comment-file`, `--combine`, `gate trust`,
  `gate annotate`; `gate baseline update` with the nightly lock) work with nothing importable
  beyond their lock (support/import_fence.py), against the fake GitHub server;
- the workflows' install step runs the two pip commands in that order, stops at the first
  failure, and holds no token (a stand-in `python` records what it was asked).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from support import factories as f
from support.fake_github import FakeGitHub
from support.import_fence import PIN, locked_distributions, normalize
from support.paths import REPO_ROOT
from support.workflow_steps import REPO, SHA_A, TOKEN, run_step
from support.workflows import WORKFLOWS, load, runs_on_self_hosted

from gate.github.comment_file import CommentRun
from gate.history.model import Acknowledgement
from gate.history.store import opened
from gate.judge.verdict import Outcome
from gate.measure.results import save_results

LOCKS = REPO_ROOT / "requirements"
POSTER = LOCKS / "poster.txt"
NIGHTLY = LOCKS / "nightly-update.txt"
GPU = LOCKS / "gpu.txt"  # the GPU jobs' whole gate runtime (security review L4)
FENCE = REPO_ROOT / "tests" / "support" / "import_fence.py"
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")


@pytest.fixture
def fake():
    with FakeGitHub(REPO) as server:
        server.good_tokens.add(TOKEN)
        yield server


def fenced(lock: Path, *argv: str, fake: FakeGitHub | None = None,
           cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "GITHUB_REPOSITORY": REPO,
           "GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.url if fake else "http://127.0.0.1:9"}
    for name in ("GITHUB_EVENT_PATH", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"):
        env.pop(name, None)
    return subprocess.run([sys.executable, str(FENCE), str(lock), *argv], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


# -- the locks ----------------------------------------------------------------------------
def entries(lock: Path) -> dict[str, str]:
    """name -> its block of lines (the pin and its hashes)."""
    blocks = re.split(r"\n(?=[A-Za-z0-9])", lock.read_text())
    return {normalize(m.group(1)) + block.split(";")[0][m.end():].split()[0]: block
            for block in blocks if (m := PIN.match(block))}


@pytest.mark.parametrize("lock", [POSTER, NIGHTLY, GPU], ids=lambda p: p.name)
def test_every_locked_distribution_is_pinned_with_its_hashes(lock):
    lines = [ln for ln in lock.read_text().splitlines()
             if ln.strip() and not ln.lstrip().startswith(("#", "--hash"))]
    assert lines and all(PIN.match(ln) for ln in lines), lines  # no unpinned, URL or -e lines
    for pin, block in entries(lock).items():
        assert HASH.search(block), f"{lock.name}: {pin} has no sha256 hash"
    inputs = (LOCKS / lock.name.replace(".txt", ".in")).read_text()
    wanted = {normalize(m) for m in re.findall(r"^([A-Za-z][\w.-]*)", inputs, re.M)}
    if "-r poster.in" in inputs:
        wanted |= locked_distributions(POSTER)
    if "-r nightly-update.in" in inputs:
        wanted |= locked_distributions(NIGHTLY)
    assert wanted <= locked_distributions(lock), wanted - locked_distributions(lock)
    # the build backend, so that --no-build-isolation builds the gate from locked packages
    build = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["build-system"]
    backend = {normalize(re.match(r"[\w.-]+", req).group(0)) for req in build["requires"]}
    assert backend == {"setuptools", "wheel"} and backend <= locked_distributions(lock)


def test_the_gpu_lock_holds_every_runtime_dependency_of_the_gate():
    """What `pip install --no-deps ./.gate` leaves out must all be in the lock: every
    requirement of [project] dependencies and of the profile extra (the GPU jobs profile), at
    a version it allows."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["profile"]]
    needed = {normalize(re.match(r"[\w.-]+", req).group(0)) for req in wanted}
    assert needed <= locked_distributions(GPU), needed - locked_distributions(GPU)
    assert project["optional-dependencies"]["profile"] == ["py-spy==0.4.3"]
    assert "py-spy==0.4.3" in GPU.read_text()  # pinned in the extra: the same version


def test_the_poster_lock_is_the_small_set():
    assert not {"numpy", "scipy", "aiohttp", "psutil", "jsonschema", "py-spy"} & (
        locked_distributions(POSTER))


# -- what the token jobs run, with nothing beyond the lock --------------------------------
def test_the_poster_posts_with_only_its_lock_importable(fake, tmp_path):
    fake.pulls[12] = {"number": 12, "head": {"sha": SHA_A}}
    path = f.comment_file(tmp_path)
    proc = fenced(POSTER, "publish", "--post-comment-file", str(path), "--pr", "12",
                  "--expect-head-sha", SHA_A, "--marker-id", "default", fake=fake)
    assert proc.returncode == 0, proc.stderr
    (comment,) = fake.comments[12]
    assert comment["body"].startswith("<!-- vllm-structured-output-gate:default -->\n")


def test_the_poster_reads_the_acknowledgements_with_only_its_lock(fake, tmp_path):
    """The comment job checks the acknowledgements against its own copy of the history: SQLite
    from the standard library, and nothing of the gate that needs numpy."""
    fake.pulls[12] = {"number": 12, "head": {"sha": SHA_A}}
    db = tmp_path / "history.sqlite"
    with opened(db, create=True) as store:
        store.acknowledge(Acknowledgement(
            repository=REPO, pr=12, head_sha=SHA_A, check="drain.req_per_min", reason="on purpose",
            login="maintainer", permission="write", created_at="2026-01-02T00:00:00+00:00"))
    path = f.comment_file(tmp_path, [CommentRun(verdict=f.verdict(Outcome.FAIL))])
    proc = fenced(POSTER, "publish", "--post-comment-file", str(path), "--pr", "12",
                  "--expect-head-sha", SHA_A, "--history", str(db), fake=fake)
    assert proc.returncode == 0, proc.stderr
    assert "➖ neutral: acknowledged fail" in fake.comments[12][0]["body"]


def test_the_bisect_report_is_posted_with_only_the_poster_lock(fake, tmp_path):
    from gate.evidence.bisect_record import BisectOutcome, BisectResult, CommitInfo

    result = BisectResult(outcome=BisectOutcome.NO_REGRESSION, headline="no slowdown",
                          repo="/r", good=CommitInfo(sha=SHA_A), bad=CommitInfo(sha="b" * 40))
    path = tmp_path / "bisect.json"
    path.write_text(result.model_dump_json())
    proc = fenced(POSTER, "publish", "--bisect-result", str(path), "--issue", "12", fake=fake)
    assert proc.returncode == 0, proc.stderr
    (comment,) = fake.comments[12]
    assert "no slowdown" in comment["body"]


def test_the_matrix_is_combined_with_only_the_poster_lock(tmp_path):
    files = []
    for runner in ("a100", "h100"):
        folder = tmp_path / f"perf-gate-results-{runner}"
        folder.mkdir()
        run = CommentRun(verdict=f.verdict(Outcome.PASS, headline=f"report of {runner}"),
                         head=f.sweep_results("head", f.HEALTHY))
        files.append(f.comment_file(folder, [run]))
    proc = fenced(POSTER, "publish", "--no-comment", "--marker-id", "matrix", "--comment-file",
                  str(tmp_path / "combined.json"), "--combine", str(files[0]), "--label", "a100",
                  "--combine", str(files[1]), "--label", "h100")
    assert proc.returncode == 0, proc.stderr
    assert '"marker_id": "matrix"' in (tmp_path / "combined.json").read_text()


@pytest.mark.parametrize(
    "argv",
    [
        ["trust", "check-environment", "perf-gate-fork"],
        ["trust", "check-review", "--pr", "7", "--sha", SHA_A, "--reviewer", "maintainer"],
        ["trust", "check-head", "--pr", "7", "--sha", SHA_A],
        ["trust", "check-writer", "--login", "maintainer"],
        ["trust", "revoke-label", "--pr", "7", "--label", "run-perf-gate"],
        ["annotate", "error", "--title", "Perf gate", "--message", "FAIL"],
    ],
    ids=lambda argv: "-".join(argv[:2]),
)
def test_the_trust_checks_run_with_only_the_poster_lock(argv, fake):
    fake.environments["perf-gate-fork"] = {"name": "perf-gate-fork", "protection_rules": [
        {"id": 1, "type": "required_reviewers", "prevent_self_review": True,
         "reviewers": [{"type": "User"}]}]}
    fake.add_review(7, "maintainer", "APPROVED", SHA_A)
    fake.pulls[7] = {"number": 7, "head": {"sha": SHA_A}}
    fake.labels[7] = ["run-perf-gate"]
    fake.permissions["maintainer"] = "maintain"
    proc = fenced(POSTER, *argv, fake=fake)
    assert proc.returncode == 0, proc.stderr


def baseline_run(tmp_path: Path) -> str:
    """A nightly run's results.json as the measuring job uploads it."""
    cells = []
    for r, rpm in enumerate([230.0, 232.0]):
        cells += [f.cell("drain", "guided", 64, r, rpm=rpm),
                  f.cell("sweep", "guided", 8, r, tpot_p50=21.0),
                  f.cell("sweep", "free", 8, r, tpot_p50=20.0)]
    folder = tmp_path / "nightly" / "perf-gate-baseline-a100"
    folder.mkdir(parents=True)
    results = f.make_results(cells, plan=f.gpu_plan(levels=(8,), repeats=2))
    save_results(results, folder / "results.json")
    return str(folder / "results.json")


def test_the_nightly_update_runs_with_only_its_lock(tmp_path):
    argv = ["baseline", "update", baseline_run(tmp_path), "--baselines-dir",
            str(tmp_path / "baselines"), "--branch", "main", "--default-branch", "main",
            "--commit", SHA_A]
    proc = fenced(NIGHTLY, *argv)
    assert proc.returncode == 0, proc.stderr
    assert list((tmp_path / "baselines").glob("*.yaml"))
    # the fence is real: the poster's lock lacks what `gate baseline update` needs
    refused = fenced(POSTER, *argv)
    assert refused.returncode != 0 and "is not in" in refused.stderr


def test_the_nightly_history_runs_with_only_its_lock(tmp_path, fake):
    """The update job's `gate history` steps (add, detect with ruptures, dashboard, alert with
    its dispatch) with nothing importable beyond the nightly lock."""
    fake.workflows["gate-bisect.yml"] = {"good", "bad", "plan", "issue"}
    db, cps = tmp_path / "history.sqlite", tmp_path / "changepoints.json"
    results = baseline_run(tmp_path)
    add = fenced(NIGHTLY, "history", "add", results, "--db", str(db), "--commit", SHA_A,
                 "--branch", "main", "--if-new", fake=fake)
    assert add.returncode == 0, add.stderr
    for argv in (["link-merges", "--db", str(db)],
                 ["detect", "--db", str(db), "--out", str(cps)],
                 ["dashboard", "--db", str(db), "--out", str(tmp_path / "d.html")],
                 ["alert", "--db", str(db), "--detection", str(cps)]):
        proc = fenced(NIGHTLY, "history", *argv, fake=fake)
        assert proc.returncode == 0, (argv, proc.stderr)
    assert fenced(POSTER, "history", "detect", "--db", str(db)).returncode != 0


def test_the_fence_refuses_what_the_lock_lacks():
    proc = fenced(POSTER, "run", "--help")
    assert proc.returncode != 0 and "is not in" in proc.stderr


# -- the install step of each token job ---------------------------------------------------
SHIM = """#!/usr/bin/env bash
printf '%s token=%s\\n' "$*" "${GITHUB_TOKEN:+set}${GH_TOKEN:+set}" >> "$SHIM_LOG"
case "$*" in *require-hashes*) exit "${FAIL_HASHED:-0}" ;; esac
"""


def install_steps() -> list[tuple[str, str, str]]:
    """The token jobs' install steps (GitHub-hosted; the GPU jobs' installs are checked in
    unit/workflows/test_workflows_trust_static.py: test_gpu_jobs_install_the_gate_from_its_hash_lock)."""
    found = []
    for path in WORKFLOWS:
        for job, spec in load(path.name)["jobs"].items():
            if runs_on_self_hosted(spec):
                continue
            for s in spec["steps"]:
                if "--require-hashes" in str(s.get("run", "")):
                    found.append((path.name, job, s["name"]))
    return found


@pytest.mark.parametrize(("workflow", "job", "name"), install_steps(),
                         ids=lambda v: str(v))
def test_the_install_step_pins_then_adds_the_gate_alone_and_fails_closed(
    workflow, job, name, tmp_path
):
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "python").write_text(SHIM)
    (shims / "python").chmod(0o755)
    log = tmp_path / "pip.log"
    env = {"PATH": f"{shims}{os.pathsep}{os.environ['PATH']}", "SHIM_LOG": str(log)}
    proc, _ = run_step(load(workflow), job, name, tmp_path, extra_env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first, second = log.read_text().splitlines()
    assert first.startswith("-I -m pip install --quiet --require-hashes -r .gate/requirements/")
    assert second == "-I -m pip install --quiet --no-deps --no-build-isolation ./.gate token="
    assert first.endswith(" token=")  # no token in the step that runs pip
    log.unlink()
    proc, _ = run_step(load(workflow), job, name, tmp_path, extra_env={**env, "FAIL_HASHED": "1"})
    assert proc.returncode == 1 and len(log.read_text().splitlines()) == 1
