"""A small stand-in for a vLLM checkout and its installed build, for `gate bisect` tests that
need no real vLLM: a `vllm` package of a few modules installed in a folder (with a file that
stands for a compiled extension), a real git repository whose root commit holds the same
files, and an A/B double that judges a build by what its overlay makes Python import.

The double reads `SLOW_MS` in vllm/v1/structured_output/utils.py through the build's
PYTHONPATH (the overlay, or the installed package): a build with SLOW_MS > 0 fails against
the reference, one without passes; `outcomes` can force an outcome per call."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from gate.flows.bisect_ab import ABOutcome, ABSettings, BuildUnderTest
from gate.judge.verdict import Outcome, Verdict
from gate.profile.diff_file import (
    Change,
    DiffSettings,
    FunctionDiff,
    ProfileDiff,
    save_profile_diff,
)
from support.factories import check
from support.gitrepo import commit, init

UTILS = "vllm/v1/structured_output/utils.py"
BACKEND = "vllm/v1/structured_output/backend.py"


def utils_source(slow_ms: int = 0, extra: str = "") -> str:
    return (
        '"""Stand-in for vLLM\'s structured-output utils."""\n\n'
        f"SLOW_MS = {slow_ms}\n\n\n"
        "def apply_grammar_bitmask(rows):\n"
        "    total = 0\n"
        "    for row in range(rows):\n"
        "        total += row\n"
        "    return total\n"
        f"{extra}"
    )


PACKAGE = {
    "vllm/__init__.py": '__version__ = "0.0.test"\n',
    "vllm/v1/__init__.py": "",
    "vllm/v1/structured_output/__init__.py": "from vllm.v1.structured_output import utils\n",
    UTILS: utils_source(),
    BACKEND: "def compile_grammar(schema):\n    return str(schema)\n",
}


def install_package(root: Path, files: dict[str, str] | None = None) -> Path:
    """The installed build: site/vllm with PACKAGE's files and a stand-in compiled module.
    Returns the package folder."""
    site = root / "site"
    for rel, text in (files or PACKAGE).items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (site / "vllm" / "_C.abi3.so").write_bytes(b"\x7fELF stand-in")
    return site / "vllm"


def stand_in_python(root: Path, package: Path) -> str:
    """An interpreter that finds the stand-in installed package behind whatever PYTHONPATH
    it is given (an overlay goes first), as a virtualenv finds its site-packages."""
    script = root / "bin" / "python"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(f'#!/bin/sh\nPYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{package.parent}" '
                      f'exec {sys.executable} "$@"\n')
    script.chmod(0o755)
    return str(script)


def make_repo(root: Path, changes: list[tuple[str, dict[str, str]]]) -> tuple[Path, list[str]]:
    """A repository whose root commit holds PACKAGE (the good commit, as installed), then one
    commit per (subject, files). Returns the repo and every SHA, the root first."""
    repo = init(root / "repo")
    shas = [commit(repo, "root: the installed build", {**PACKAGE, "README.md": "vllm\n"})]
    for subject, files in changes:
        shas.append(commit(repo, subject, files))
    return repo, shas


def slow_ms_of(build: BuildUnderTest, installed: Path) -> int:
    """SLOW_MS as the build would import it: the overlay's utils.py, else the installed one."""
    entries = [p for p in build.env.get("PYTHONPATH", "").split(":") if p]
    for entry in entries:
        candidate = Path(entry) / UTILS
        if candidate.exists():
            text = candidate.read_text()
            break
    else:
        text = (installed.parent / UTILS).read_text()
    return max((int(m) for m in re.findall(r"^\s*SLOW_MS = (\d+)", text, re.MULTILINE)),
               default=0)


def verdict_for(outcome: Outcome, delta: float) -> Verdict:
    c = check("drain.output_tok_s", "drain output tok/s (guided)", 100.0, 100.0 + delta,
              outcome, direction="higher_is_better", threshold=10.0, unit="tok/s")
    return Verdict(outcome=outcome, headline=f"{outcome.value}: {delta:+.0f}%", mode="ab",
                   checks=[c], rounds=2)


@dataclass
class FakeAB:
    """The A/B double (gate.flows.bisect_ab.ABRunner's two calls): records every A/B, fails
    builds whose SLOW_MS > 0. `screening`: a runner without a calibration (a slow build fails
    the screen, any other is screened with no gross slowdown); `unfinished`: an inconclusive
    A/B was stopped by its budget, so the step resumes it."""

    installed: Path
    outcomes: list[Outcome] = field(default_factory=list)  # forced, consumed in order
    calls: list[int] = field(default_factory=list)  # SLOW_MS of each head measured
    stop_after: int | None = None  # raise KeyboardInterrupt at this call (a cancel)
    base_errors: list[str] = field(default_factory=list)
    blame: str | None = None  # a failing A/B's profile diff names this function of UTILS
    screening: bool = False
    unfinished: bool = False
    resumed: list[Path] = field(default_factory=list)
    sides: dict[Path, tuple[BuildUnderTest, BuildUnderTest]] = field(default_factory=dict)
    profiling: list[str] = field(default_factory=list)  # each new A/B's profiling policy

    def run(self, settings: ABSettings, base: BuildUnderTest, head: BuildUnderTest,
            out: Path) -> ABOutcome:
        self.sides[out] = (base, head)
        self.profiling.append(settings.profiling.policy)
        return self._measure(base, head, out)

    def resume(self, settings: ABSettings, out: Path, budget_minutes: float | None) -> ABOutcome:
        self.resumed.append(out)
        return self._measure(*self.sides[out], out)

    def _measure(self, base: BuildUnderTest, head: BuildUnderTest, out: Path) -> ABOutcome:
        if self.stop_after is not None and len(self.calls) >= self.stop_after:
            raise KeyboardInterrupt
        slow = slow_ms_of(head, self.installed)
        self.calls.append(slow)
        out.mkdir(parents=True, exist_ok=True)
        if self.outcomes:
            outcome = self.outcomes.pop(0)
        else:
            outcome = Outcome.FAIL if slow > slow_ms_of(base, self.installed) else Outcome.PASS
        if self.screening and outcome != Outcome.FAIL:
            return ABOutcome(None, None, 60.0, screened="screened one block: no gross slowdown")
        delta = -45.0 if outcome == Outcome.FAIL else 1.0
        diff = None
        if self.blame and outcome == Outcome.FAIL:
            diff = out / "profile-diff"
            save_profile_diff(profile_diff_naming(self.blame), diff / "profile-diff.json")
        finished = not (self.unfinished and outcome == Outcome.INCONCLUSIVE)
        return ABOutcome(verdict_for(outcome, delta), diff, 60.0, list(self.base_errors),
                     finished=finished)


def profile_diff_naming(function: str, added_ms: float = 40.0) -> ProfileDiff:
    """A profile diff in which `function` of UTILS has significantly more self time."""
    def change(base: float, head: float, significant: bool) -> Change:
        return Change(base=base, head=head, diff=head - base, low=(head - base) / 2,
                      high=(head - base) * 1.5, significant=significant)

    row = FunctionDiff(file=f"/site-packages/{UTILS}", name=function, line=5,
                       self_time=change(10.0, 10.0 + added_ms, True),
                       inclusive=change(12.0, 12.0 + added_ms, True))
    return ProfileDiff(base_label="base", head_label="head", base_windows=5, head_windows=5,
                       base_tokens=1000.0, head_tokens=1000.0,
                       total=change(100.0, 100.0 + added_ms, True),
                       waiting=change(5.0, 5.0, False), settings=DiffSettings(),
                       method="stand-in", functions=[row])


# -- one change of five hunks, one of them slow ---------------------------------------------
LONG_UTILS = (
    '"""Stand-in for vLLM\'s structured-output utils."""\n\nSLOW_MS = 0\n\n\n'
    "def apply_grammar_bitmask(rows):\n"
    "    total = 0\n"
    "    for row in range(rows):\n"
    "        total += row\n"
    "    return total\n"
    + "".join(f"\n\ndef helper_{i}(x):\n    y = x + {i}\n    z = y * 2\n    return z\n"
              for i in range(4))
)


def five_hunk_change() -> tuple[dict[str, str], dict[str, str]]:
    """(files of the parent commit, files of the change): the change has five hunks in
    Python files; only the one inside apply_grammar_bitmask is slow."""
    slow = LONG_UTILS.replace("    total = 0\n", "    total = 0\n    SLOW_MS = 5  # host work\n")
    changed = slow.replace("    y = x + 3\n", "    y = x + 30\n")
    return (
        {UTILS: LONG_UTILS},
        {UTILS: changed,
         BACKEND: "def compile_grammar(schema):\n    return repr(schema)\n",
         "vllm/v1/structured_output/__init__.py":
             "# the structured-output package\nfrom vllm.v1.structured_output import utils\n",
         "vllm/v1/structured_output/extra.py": "EXTRA = 1\n"},
    )
