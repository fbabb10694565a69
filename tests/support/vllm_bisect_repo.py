"""Git repositories of a vLLM package's structured-output files, with commits to bisect:
EIGHT over the installed vLLM's (benchmarks/bisect_run.py, real servers), STAND_IN over the
stand-in package of tests/fixtures/fake_vllm (tests/integration/flows/test_bisect_stand_in.py).

The root commit holds the package's files as installed (the real vLLM's
vllm/v1/structured_output/*.py, or the whole stand-in package); everything else of the
installed package stays where it is, shared, and every build is an overlay of the repository's
files over it. The slow commit has five hunks in four files: four are comments, one (the slow
hunk) decorates apply_grammar_bitmask with host work of `HOST_WORK_FACTOR` times the
function's own measured time on every engine step that applies a grammar bitmask, so the
slowdown is relative to the build's own (the stand-in's is FAKE_VLLM_GUIDED_STEP_MS).

EIGHT, oldest first:

    1    a comment in backend_xgrammar.py
    2    request.py imports a name that does not exist: the build does not import
    3    fixes it
    4    the slow commit
    5-8  comments in request.py, backend_guidance.py and backend_types.py

The search (gate.evidence.bisection) then measures the bad commit (the endpoints), commit 4
(slow), commit 2 (does not import: skipped without a server), commit 3 (fast, or on a runner
without a calibration: no gross slowdown): three A/Bs, within ceil(log2 8) + 1 = 4, and commit
4's parent is measured fast, so `--hunks` takes it apart against the good build.

STAND_IN, the same parts in three commits: 1 the slow commit, 2 does not import, 3 fixes it
(the bad end). The search measures the endpoints, skips commit 2 with an import check and
measures commit 1, whose parent is the good commit: two A/Bs.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from support.gitrepo import commit, init
from support.paths import FAKE_VLLM

SO = "vllm/v1/structured_output"
UTILS = f"{SO}/utils.py"
# The files the slow commit comments, besides its slow hunk in UTILS.
VLLM_COMMENTED = (UTILS, f"{SO}/backend_xgrammar.py", f"{SO}/request.py", f"{SO}/__init__.py")
STAND_IN_COMMENTED = (UTILS, f"{SO}/request.py", f"{SO}/__init__.py", "vllm/__init__.py")
HOST_WORK_FACTOR = 10
SLOW_HUNK_MARK = "_with_host_work_per_step"
DECORATOR = f'''def {SLOW_HUNK_MARK}(apply):
    """Check the grammar output again on the host after applying it, every engine step."""
    import time

    def checked(*args, **kwargs):
        started = time.perf_counter()
        result = apply(*args, **kwargs)
        until = time.perf_counter() + {HOST_WORK_FACTOR} * (time.perf_counter() - started)
        while time.perf_counter() < until:
            pass
        return result

    return checked


@{SLOW_HUNK_MARK}
'''


# The plan of the benchmark and the stand-in's test (support.vllm_helpers.small_plan's changes):
# drain only, one short window per build and round, one block of two rounds, eager mode (no
# torch.compile warm-up at each server start). With no calibration for this plan an A/B
# screens its block for gross slowdowns (docs/bisect.md#on-a-cpu); the injected host work
# slows guided steps several-fold, far past the screen's 50%.
PLAN_CHANGES = {
    "server.enforce_eager": True,
    "warmup": {"requests": 2, "concurrency": 2, "levels": [8]},
    "drain": {"enabled": True, "requests": 16, "concurrency": 8, "window_s": 3,
              "max_window_s": 15},
    "sweep.enabled": False,
    "ab.min_rounds": 1,
    "ab.max_rounds": 2,
    "ab.rounds_per_block": 2,
}
PROFILE_ARGS = ["--profile-windows", "2", "--profile-window", "2"]


def installed_files() -> dict[str, str]:
    """vllm/v1/structured_output/*.py of the installed vLLM (found without importing it)."""
    spec = importlib.util.find_spec("vllm")
    assert spec and spec.submodule_search_locations, "vllm is not installed"
    folder = Path(spec.submodule_search_locations[0]) / "v1" / "structured_output"
    return {f"{SO}/{p.name}": p.read_text() for p in sorted(folder.glob("*.py"))}


def stand_in_files() -> dict[str, str]:
    """Every Python file of the stand-in package (tests/fixtures/fake_vllm/vllm)."""
    return {p.relative_to(FAKE_VLLM).as_posix(): p.read_text()
            for p in sorted((FAKE_VLLM / "vllm").rglob("*.py"))}


@dataclass(frozen=True)
class BisectRepo:
    path: Path
    shas: list[str]  # the root (good) first, then the layout's commits
    slow: int  # the slow commit's number (its index in shas)
    broken: int  # the commit that does not import

    @property
    def good(self) -> str:
        return self.shas[0]

    @property
    def bad(self) -> str:
        return self.shas[-1]

    @property
    def slow_sha(self) -> str:
        return self.shas[self.slow]



def _append(files: dict[str, str], rel: str, line: str) -> dict[str, str]:
    files[rel] = files[rel].rstrip("\n") + f"\n{line}\n"
    return {rel: files[rel]}


def _slow(number: int, commented: tuple[str, ...]):
    def change(files: dict[str, str]) -> dict[str, str]:
        source = files[UTILS]
        head, sep, tail = source.partition("def apply_grammar_bitmask(")
        assert sep, "apply_grammar_bitmask is not in the installed utils.py"
        files[UTILS] = head + DECORATOR + sep + tail
        changed = {UTILS: files[UTILS]}
        for rel in commented:
            changed.update(_append(files, rel, f"# gate bisect test: commit {number}"))
        return changed

    return change


BROKEN_IMPORT = "from vllm.v1.structured_output.utils import GateNoSuchName  # noqa"


def _fix(files: dict[str, str]) -> dict[str, str]:
    rel = f"{SO}/request.py"
    files[rel] = files[rel].replace(BROKEN_IMPORT + "\n", "# commit 3\n")
    return {rel: files[rel]}


def _comment(rel: str, number: int):
    return lambda files: _append(files, f"{SO}/{rel}", f"# gate bisect test: commit {number}")


def _broken(files: dict[str, str]) -> dict[str, str]:
    return _append(files, f"{SO}/request.py", BROKEN_IMPORT)


@dataclass(frozen=True)
class Layout:
    files: Callable[[], dict[str, str]]  # the root commit's: the package as installed
    commits: list[tuple[str, Callable[[dict[str, str]], dict[str, str]]]]
    slow: int
    broken: int


SLOW_SUBJECT = "check the grammar output on the host every step"
EIGHT = Layout(installed_files, [
    ("commit 1: comment in backend_xgrammar", _comment("backend_xgrammar.py", 1)),
    ("commit 2: request imports a missing name", _broken),
    ("commit 3: fix the import", _fix),
    (f"commit 4: {SLOW_SUBJECT}", _slow(4, VLLM_COMMENTED)),
    ("commit 5: comment in request", _comment("request.py", 5)),
    ("commit 6: comment in backend_guidance", _comment("backend_guidance.py", 6)),
    ("commit 7: comment in backend_guidance", _comment("backend_guidance.py", 7)),
    ("commit 8: comment in backend_types", _comment("backend_types.py", 8)),
], slow=4, broken=2)
STAND_IN = Layout(stand_in_files, [
    (f"commit 1: {SLOW_SUBJECT}", _slow(1, STAND_IN_COMMENTED)),
    ("commit 2: request imports a missing name", _broken),
    ("commit 3: fix the import", _fix),
], slow=1, broken=2)


def build_repo(root: Path, layout: Layout = EIGHT) -> BisectRepo:
    files = layout.files()
    repo = init(root / "vllm-src")
    shas = [commit(repo, "root: the installed package files", dict(files))]
    for subject, change in layout.commits:
        shas.append(commit(repo, subject, change(files)))
    return BisectRepo(repo, shas, layout.slow, layout.broken)
