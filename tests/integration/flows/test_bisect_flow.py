"""`gate bisect` over commits of a real git repository, with real overlays over a stand-in
installed build and real import checks; only the A/B is a double (support.bisect_repo.FakeAB:
a build whose SLOW_MS > 0 fails). Real A/Bs, on the stand-in server, run in
tests/integration/flows/test_bisect_stand_in.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from support.bisect_repo import (
    BACKEND,
    PACKAGE,
    UTILS,
    FakeAB,
    install_package,
    make_repo,
    stand_in_python,
    utils_source,
)

from gate.core.errors import GateError
from gate.core.progress import Progress
from gate.evidence.bisect_record import BisectOutcome, BisectState
from gate.evidence.bisection import StepVerdict
from gate.flows import ab
from gate.flows.bisect import BisectOptions, bisect
from gate.flows.bisect_ab import ABSettings
from gate.flows.bisect_state import STATE_FILE
from gate.judge.verdict import Outcome
from gate.plan.spec import apply_overrides, load_plan
from gate.runner.commit_build import InstalledBuild


def settings(tmp_path: Path, **changes) -> ABSettings:
    plan = apply_overrides(load_plan("cpu-smoke"), ab={"servers": "per_round"})
    data = dict(plan=plan, thresholds=plan.thresholds, noise_dirs=None,
                profiling=ab.Profiling("never"), cache_dir=tmp_path / "cache",
                progress=Progress(quiet=True))
    data.update(changes)
    return ABSettings(**data)


def eight_commits(culprit: int, broken: set[int] = frozenset()) -> list[tuple[str, dict]]:
    """Eight commits in the structured-output path; from `culprit` (1-based) on, utils.py is
    slow; a commit in `broken` does not import (the next one fixes it)."""
    changes = []
    for i in range(1, 9):
        slow = 5 if i >= culprit else 0
        extra = "\n\ndef broken(:\n" if i in broken else f"\n\n# step {i}\n"
        files = {UTILS: utils_source(slow_ms=slow, extra=extra),
                 BACKEND: f"def compile_grammar(schema):\n    return str(schema) + '{i}'\n"}
        changes.append((f"commit {i}" + (" (slow)" if i == culprit else ""), files))
    return changes


def setup(tmp_path: Path, changes) -> tuple[Path, list[str], Path, str]:
    installed = install_package(tmp_path)
    repo, shas = make_repo(tmp_path, changes)
    return repo, shas, installed, stand_in_python(tmp_path, installed)


def run(tmp_path, changes, fake: FakeAB | None = None, **settings_changes):
    repo, shas, installed, python = setup(tmp_path, changes)
    fake = fake or FakeAB(installed)
    fake.installed = installed
    opts = BisectOptions(repo=repo, good=shas[0], bad=shas[-1], out=tmp_path / "out",
                         python=python)
    result = bisect(opts, settings(tmp_path, **settings_changes), fake)
    return result, shas, fake, opts


@pytest.mark.parametrize("culprit", [1, 3, 6, 8])
def test_the_slow_commit_is_named_within_ceil_log2_n_plus_one_ab_steps(tmp_path, culprit):
    result, shas, fake, opts = run(tmp_path, eight_commits(culprit))
    assert result.outcome == BisectOutcome.FOUND
    assert result.first_bad.sha == shas[culprit]
    assert result.first_bad.subject == f"commit {culprit} (slow)"
    assert len(fake.calls) <= math.ceil(math.log2(8)) + 1
    assert result.steps[0].role == "endpoints" and result.steps[0].commit == shas[-1]
    assert result.exit_code == 1
    saved = json.loads((opts.out / "bisect.json").read_text())
    assert saved["first_bad"]["sha"] == shas[culprit]
    assert len(saved["steps"]) == len(result.steps)


def test_every_step_is_built_as_an_overlay_of_the_changed_files(tmp_path):
    result, _, _, opts = run(tmp_path, eight_commits(6))
    for step in result.steps:
        assert step.build.startswith("overlay of 2 package file(s) over the build of"), step.build
        assert step.rounds == 2 and step.attempts == 1
        assert (opts.out / step.folder).is_dir()
    assert result.runner_seconds + 0.05 >= sum(s.seconds for s in result.steps)  # rounded


def test_the_report_names_the_culprit_and_tables_every_step(tmp_path):
    result, shas, _, opts = run(tmp_path, eight_commits(3))
    md = (opts.out / "bisect.md").read_text()
    assert f"<code>{shas[3]}</code> commit 3 (slow)" in md
    rows = [line for line in md.splitlines() if line.startswith("| ") and "`" in line]
    assert len(rows) == len(result.steps)
    assert "-45.0%" in md and "Runner time:" in md


def test_endpoints_that_do_not_differ_stop_after_the_first_ab(tmp_path):
    changes = [(f"commit {i}", {BACKEND: f"X = {i}\n"}) for i in range(1, 9)]
    result, _, fake, _ = run(tmp_path, changes)
    assert result.outcome == BisectOutcome.NO_REGRESSION and result.exit_code == 0
    assert len(fake.calls) == 1 and len(result.steps) == 1
    assert "not slower" in result.headline


def test_inconclusive_endpoints_are_measured_again_then_stop_with_their_own_outcome(tmp_path):
    fake = FakeAB(Path("."), outcomes=[Outcome.INCONCLUSIVE, Outcome.INCONCLUSIVE])
    result, _, fake, _ = run(tmp_path, eight_commits(4), fake)
    assert result.outcome == BisectOutcome.INCONCLUSIVE and result.exit_code == 3
    assert len(fake.calls) == 2 and result.steps[0].attempts == 2


def test_a_commit_that_does_not_import_is_skipped_not_blamed(tmp_path):
    # commit 4 (the first midpoint) has a syntax error in utils.py; commit 6 is slow
    result, shas, fake, _ = run(tmp_path, eight_commits(6, broken={4}))
    assert result.first_bad.sha == shas[6]
    skipped = [s for s in result.steps if s.verdict == StepVerdict.SKIPPED]
    assert [s.commit for s in skipped] == [shas[4]]
    reason = skipped[0].reason
    assert reason.startswith("vllm.v1.structured_output.utils does not import: SyntaxError")
    assert "(so do vllm.v1.structured_output.backend)" in reason  # its package imports utils
    assert skipped[0].outcome is None and skipped[0].rounds == 0
    assert [c.sha for c in result.skipped] == [shas[4]]
    assert len(fake.calls) <= 4  # the skip costs an import check, not an A/B


def test_the_culprit_next_to_a_skipped_commit_leaves_the_bisect_undecided(tmp_path):
    result, shas, _, _ = run(tmp_path, eight_commits(5, broken={4}))
    assert result.outcome == BisectOutcome.UNDECIDED and result.exit_code == 3
    assert [c.sha for c in result.candidates] == [shas[4], shas[5]]
    assert result.first_bad is None


def test_an_inconclusive_step_is_skipped_after_its_attempts(tmp_path):
    # endpoints fail; the first step (commit 4) stays inconclusive twice; the rest decide
    fake = FakeAB(Path("."), outcomes=[Outcome.FAIL, Outcome.INCONCLUSIVE, Outcome.INCONCLUSIVE])
    result, shas, fake, _ = run(tmp_path, eight_commits(6), fake)
    step = next(s for s in result.steps if s.commit == shas[4])
    assert step.verdict == StepVerdict.SKIPPED and step.attempts == 2
    assert step.reason.startswith("inconclusive")
    assert result.first_bad.sha == shas[6]


def test_the_step_budget_stops_repeating_an_inconclusive_ab(tmp_path):
    # each fake A/B takes 60 s of its own account; a 1.5-minute budget holds no second one
    fake = FakeAB(Path("."), outcomes=[Outcome.INCONCLUSIVE] * 3)
    result, _, fake, _ = run(tmp_path, eight_commits(6), fake, step_budget_minutes=1.5)
    assert result.steps[0].attempts in (1, 2)


def test_a_cancelled_bisect_goes_on_from_its_state_without_measuring_a_step_again(tmp_path):
    repo, shas, installed, python = setup(tmp_path, eight_commits(6, broken={4}))
    opts = BisectOptions(repo=repo, good=shas[0], bad=shas[-1], out=tmp_path / "out",
                         python=python)
    first = FakeAB(installed, stop_after=2)
    with pytest.raises(KeyboardInterrupt):
        bisect(opts, settings(tmp_path), first)
    state = BisectState.model_validate_json((opts.out / STATE_FILE).read_text())
    done = [s.commit for s in state.steps]
    assert len(first.calls) == 2 and len(done) >= 2  # endpoints, the skip, one step
    second = FakeAB(installed)
    result = bisect(opts, settings(tmp_path), second)
    assert result.first_bad.sha == shas[6]
    assert [s.commit for s in result.steps][:len(done)] == done
    measured = [s.commit for s in result.steps if s.outcome is not None]
    assert len(measured) == len(set(measured)) == len(first.calls) + len(second.calls)
    third = FakeAB(installed)
    again = bisect(opts, settings(tmp_path), third)
    assert third.calls == [] and again.first_bad.sha == shas[6]


def test_another_bisect_in_the_same_folder_is_refused(tmp_path):
    result, shas, _, opts = run(tmp_path, eight_commits(6))
    other = BisectOptions(repo=opts.repo, good=shas[1], bad=shas[-1], out=opts.out,
                          python=opts.python)
    with pytest.raises(GateError, match="holds another bisect .good:"):
        bisect(other, settings(tmp_path), FakeAB(Path(".")))


def test_a_broken_good_build_is_an_error_not_a_verdict_on_the_commits(tmp_path):
    fake = FakeAB(Path("."), base_errors=["base run error: server died"])
    result, _, _, opts = run(tmp_path, eight_commits(6), fake)
    assert result.outcome == BisectOutcome.ERROR and result.exit_code == 4
    assert "the good build could not be measured" in result.headline
    assert json.loads((opts.out / "bisect.json").read_text())["outcome"] == "error"


def test_good_must_be_on_the_first_parent_history_of_bad(tmp_path):
    repo, shas, installed, python = setup(tmp_path, eight_commits(6))
    opts = BisectOptions(repo=repo, good=shas[5], bad=shas[2], out=tmp_path / "out",
                         python=python)
    with pytest.raises(GateError, match="no commit between good"):
        bisect(opts, settings(tmp_path), FakeAB(installed))


def test_without_a_calibration_the_bisect_finds_the_first_gross_slowdown_and_says_so(tmp_path):
    result, shas, _, _ = run(tmp_path, eight_commits(6), FakeAB(Path("."), screening=True))
    assert result.outcome == BisectOutcome.FOUND and result.first_bad.sha == shas[6]
    screened = [s for s in result.steps if s.screened]
    assert screened and all(s.verdict == StepVerdict.GOOD and s.outcome is None
                            for s in screened)
    assert screened[0].reason.startswith("screened, no gross slowdown")
    assert any("no calibration for the plan" in n for n in result.notes)
    assert "screened: no gross slowdown" in (tmp_path / "out" / "bisect.md").read_text()


def test_endpoints_screened_without_a_gross_slowdown_cannot_be_bisected(tmp_path):
    changes = [(f"commit {i}", {BACKEND: f"X = {i}\n"}) for i in range(1, 9)]
    result, _, fake, _ = run(tmp_path, changes, FakeAB(Path("."), screening=True))
    assert result.outcome == BisectOutcome.UNCALIBRATED and result.exit_code == 5
    assert len(fake.calls) == 1 and "not grossly slower" in result.headline


def test_an_ab_its_budget_stopped_is_resumed_not_started_again(tmp_path):
    fake = FakeAB(Path("."), outcomes=[Outcome.FAIL, Outcome.INCONCLUSIVE], unfinished=True)
    result, shas, fake, opts = run(tmp_path, eight_commits(6), fake)
    step = next(s for s in result.steps if s.commit == shas[4])
    assert step.attempts == 2 and fake.resumed == [opts.out / step.folder]
    assert step.folder.endswith("/ab1")  # one test, resumed in its own folder
    assert result.first_bad.sha == shas[6]


def test_a_screened_step_counts_the_rounds_its_block_measured(tmp_path):
    """A screen without a gross slowdown returns an undecided verdict (a value, not an
    exception) that says how many rounds its block measured, so the step's row does not say
    0 rounds, and the verdict is kept in the step's folder."""
    from types import SimpleNamespace

    from gate.flows.bisect_ab import ABOutcome, _call
    from gate.judge.verdict import Outcome, Verdict, load_verdict

    verdict = Verdict(outcome=Outcome.UNDECIDED, mode="ab", rounds=2,
                      headline="UNDECIDED: screened one block: no gross slowdown")
    run: ABOutcome = _call(lambda: SimpleNamespace(verdict=verdict, profile=None, state=None),
                          tmp_path)
    assert run.verdict is None and run.screened.startswith("screened one block")
    assert run.rounds == 2
    assert load_verdict(tmp_path / "verdict.json").outcome == Outcome.UNDECIDED


# -- a resumed state is data someone else may have written (security review H1) -----------
def cancelled_once(tmp_path: Path):
    repo, shas, installed, python = setup(tmp_path, eight_commits(6))
    opts = BisectOptions(repo=repo, good=shas[0], bad=shas[-1], out=tmp_path / "out",
                         python=python)
    with pytest.raises(KeyboardInterrupt):
        bisect(opts, settings(tmp_path), FakeAB(installed, stop_after=2))
    path = opts.out / STATE_FILE
    return opts, shas, installed, path, BisectState.model_validate_json(path.read_text())


def test_a_build_a_forged_state_lists_is_never_imported(tmp_path):
    """The review's second sink: bisect-state.json (from the artifact) names an "installed
    build" whose package is the attacker's; an overlay over it would import its
    vllm/__init__.py. A resumed bisect installs its builds again instead."""
    opts, shas, installed, path, state = cancelled_once(tmp_path)
    mark = tmp_path / "pwned"
    evil_root = tmp_path / "artifact"
    evil = install_package(evil_root, {**PACKAGE,
                                       "vllm/__init__.py": f"open({str(mark)!r}, 'w')\n"})
    evil_python = stand_in_python(evil_root, evil)
    state.builds += [InstalledBuild(commit=sha, python=evil_python, package_dir=str(evil))
                     for sha in shas[1:]]
    path.write_text(state.model_dump_json())
    result = bisect(opts, settings(tmp_path), FakeAB(installed))
    assert result.first_bad.sha == shas[6]
    assert not mark.exists()
    saved = BisectState.model_validate_json(path.read_text())
    assert all(b.package_dir != str(evil) for b in saved.builds)


@pytest.mark.parametrize("forge", ["a-step-outside-the-range", "a-commit-list-git-lacks",
                                   "steps-out-of-order"])
def test_a_state_git_does_not_back_is_refused(tmp_path, forge):
    """Forged steps or commits would make the bisect blame any commit in its report."""
    opts, shas, installed, path, state = cancelled_once(tmp_path)
    if forge == "a-step-outside-the-range":
        state.steps[-1].commit = "e" * 40
    elif forge == "a-commit-list-git-lacks":
        state.commits = state.commits[:-2]
    else:
        state.steps[0].role = "step"
    path.write_text(state.model_dump_json())
    before = path.read_text()
    with pytest.raises(GateError, match="git does not back is not resumed"):
        bisect(opts, settings(tmp_path), FakeAB(installed))
    assert path.read_text() == before


def test_subjects_of_a_resumed_state_come_from_git(tmp_path):
    opts, shas, installed, path, state = cancelled_once(tmp_path)
    state.commits[0].subject = "@mallory fixed everything"
    state.steps[0].subject = "@mallory"
    path.write_text(state.model_dump_json())
    result = bisect(opts, settings(tmp_path), FakeAB(installed))
    assert "@mallory" not in (opts.out / "bisect.md").read_text()
    assert result.steps[0].subject == "commit 8"
