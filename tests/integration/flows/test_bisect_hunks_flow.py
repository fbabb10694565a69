"""`gate bisect --hunks`: delta debugging over one change's hunks, each configuration a real
`git apply` of some hunks onto the parent's files in a real overlay; the A/B is the double of
support.bisect_repo (a build whose SLOW_MS > 0 fails)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.bisect_repo import (
    UTILS,
    FakeAB,
    five_hunk_change,
    install_package,
    make_repo,
    stand_in_python,
)

from gate.core.errors import GateError
from gate.core.progress import Progress
from gate.evidence.bisect_record import HunksOutcome, HunksResult, HunksState
from gate.flows import ab
from gate.flows.bisect import BisectOptions, bisect
from gate.flows.bisect_ab import ABSettings
from gate.flows.bisect_hunks import HunksOptions, bisect_hunks
from gate.flows.bisect_state import HUNKS_STATE_FILE
from gate.flows.hunk_search import REPORT_FILE, RESULT_FILE
from gate.plan.spec import apply_overrides, load_plan


def settings(tmp_path: Path) -> ABSettings:  # a per-round plan: no server of its own
    plan = apply_overrides(load_plan("cpu-smoke"), ab={"servers": "per_round"})
    return ABSettings(plan=plan, thresholds=plan.thresholds, noise_dirs=None,
                      profiling=ab.Profiling("never"), cache_dir=tmp_path / "cache",
                      progress=Progress(quiet=True))


@pytest.fixture
def change(tmp_path):
    parent_files, change_files = five_hunk_change()
    installed = install_package(tmp_path)
    repo, shas = make_repo(tmp_path, [("parent: longer utils", parent_files),
                                      ("five hunks, one slow", change_files)])
    opts = HunksOptions(repo=repo, head=shas[2], out=tmp_path / "out",
                        python=stand_in_python(tmp_path, installed))
    return opts, installed, shas


def slow_index(state_or_result) -> int:
    return next(i for i, h in enumerate(state_or_result.hunks)
                if h.path == UTILS and "SLOW_MS = 5" in h.text)


def test_ddmin_names_the_one_slow_hunk_of_five(change, tmp_path):
    opts, installed, shas = change
    fake = FakeAB(installed)
    result = bisect_hunks(opts, settings(tmp_path), fake)
    assert len(result.hunks) == 5
    assert result.outcome == HunksOutcome.FOUND and result.exit_code == 1
    assert result.minimal == [slow_index(result)]
    assert result.parent.sha == shas[1] and result.head.sha == shas[2]
    # the whole change first, then ddmin's halves: few tests for one culprit of five
    assert result.tests[0].hunks == [0, 1, 2, 3, 4] and result.tests[0].reproduces
    assert len(fake.calls) == len(result.tests) <= 5
    for t in result.tests:
        assert t.reproduces == (slow_index(result) in t.hunks), t
    saved = json.loads((opts.out / RESULT_FILE).read_text())
    assert saved["minimal"] == result.minimal
    md = (opts.out / REPORT_FILE).read_text()
    assert "SLOW_MS = 5" in md and "### Configurations tested" in md


def test_the_hunk_the_profile_blames_is_tried_alone_first(change, tmp_path):
    opts, installed, _ = change
    fake = FakeAB(installed, blame="apply_grammar_bitmask")
    result = bisect_hunks(opts, settings(tmp_path), fake)
    assert result.minimal == [slow_index(result)]
    assert [t.hunks for t in result.tests] == [[0, 1, 2, 3, 4], [slow_index(result)]]
    state = HunksState.model_validate_json((opts.out / HUNKS_STATE_FILE).read_text())
    assert state.suspect == slow_index(result) and state.order[0] == slow_index(result)


def test_only_the_whole_change_is_profiled(change, tmp_path):
    """Its profile diff orders the hunks; a subset's profile would be read by nothing."""
    opts, installed, _ = change
    fake = FakeAB(installed)
    chosen = settings(tmp_path)
    chosen.profiling = ab.Profiling("auto")
    result = bisect_hunks(opts, chosen, fake)
    assert len(result.tests) > 1
    assert fake.profiling == ["auto"] + ["never"] * (len(result.tests) - 1)


def test_a_configuration_is_the_parent_with_only_the_chosen_hunks(change, tmp_path):
    opts, installed, _ = change
    result = bisect_hunks(opts, settings(tmp_path), FakeAB(installed))
    lone = next(t for t in result.tests if t.hunks == [slow_index(result)])
    files = opts.out / lone.folder.split("/ab")[0] / "files"
    utils = (files / UTILS).read_text()
    assert "SLOW_MS = 5" in utils and "x + 30" not in utils  # the other utils hunk left out
    overlay = opts.out / lone.folder.split("/ab")[0] / "build" / "overlay"
    assert (overlay / UTILS).read_text() == utils
    assert not (overlay / "vllm/v1/structured_output/extra.py").exists()


def test_a_change_that_does_not_reproduce_stops_after_one_test(tmp_path):
    installed = install_package(tmp_path)
    repo, shas = make_repo(tmp_path, [("harmless", {"vllm/v1/structured_output/extra.py":
                                                    "EXTRA = 2\n"})])
    opts = HunksOptions(repo=repo, head=shas[1], out=tmp_path / "out",
                        python=stand_in_python(tmp_path, installed))
    fake = FakeAB(installed)
    result = bisect_hunks(opts, settings(tmp_path), fake)
    assert result.outcome == HunksOutcome.NOT_REPRODUCED and result.exit_code == 3
    assert len(fake.calls) == 1 and result.minimal == []


def test_a_cancelled_run_replays_its_stored_tests_and_measures_only_new_ones(change, tmp_path):
    opts, installed, _ = change
    first = FakeAB(installed, stop_after=2)
    with pytest.raises(KeyboardInterrupt):
        bisect_hunks(opts, settings(tmp_path), first)
    second = FakeAB(installed)
    result = bisect_hunks(opts, settings(tmp_path), second)
    configs = [tuple(t.hunks) for t in result.tests]
    assert len(configs) == len(set(configs)) == len(first.calls) + len(second.calls)
    assert result.minimal == [slow_index(result)]
    third = FakeAB(installed)
    assert bisect_hunks(opts, settings(tmp_path), third).minimal == result.minimal
    assert third.calls == []


def test_a_change_without_python_hunks_is_refused(tmp_path):
    installed = install_package(tmp_path)
    repo, shas = make_repo(tmp_path, [("docs", {"docs/x.md": "x\n"})])
    opts = HunksOptions(repo=repo, head=shas[1], out=tmp_path / "out",
                        python=stand_in_python(tmp_path, installed))
    with pytest.raises(GateError, match="changes no Python file of the vllm package"):
        bisect_hunks(opts, settings(tmp_path), FakeAB(installed))


# -- after a bisect: the first bad commit's hunks against the good build ------------------
def chain_commits() -> list[tuple[str, dict]]:
    """Eight commits; the sixth is the five-hunk change with one slow hunk."""
    parent_files, change_files = five_hunk_change()
    changes = [("commit 1: longer utils", parent_files)]
    changes += [(f"commit {i}", {"vllm/v1/structured_output/notes.py": f"N = {i}\n"})
                for i in range(2, 6)]
    changes.append(("commit 6: five hunks, one slow", change_files))
    changes += [(f"commit {i}", {"vllm/v1/structured_output/notes.py": f"N = {i}\n"})
                for i in (7, 8)]
    return changes


def chained(tmp_path):
    installed = install_package(tmp_path)
    repo, shas = make_repo(tmp_path, chain_commits())
    opts = BisectOptions(repo=repo, good=shas[0], bad=shas[-1], out=tmp_path / "out",
                         python=stand_in_python(tmp_path, installed), then_hunks=True)
    return opts, installed, shas


def test_after_a_bisect_the_culprits_step_is_the_whole_change_and_the_blamed_hunk_goes_first(
        tmp_path):
    opts, installed, shas = chained(tmp_path)
    fake = FakeAB(installed, blame="apply_grammar_bitmask")
    result = bisect(opts, settings(tmp_path), fake)
    assert result.first_bad.sha == shas[6]
    hunks = HunksResult.model_validate_json((opts.out / RESULT_FILE).read_text())
    assert hunks.reference.startswith("the good build")
    # the whole change is the culprit's own step (no A/B of its own), then the blamed hunk
    assert hunks.tests[0].build.startswith("the bisect's step") and hunks.tests[0].seconds == 0
    assert [t.hunks for t in hunks.tests] == [[0, 1, 2, 3, 4], [slow_index(hunks)]]
    ab_steps = [s for s in result.steps if s.outcome is not None]
    assert len(fake.calls) == len(ab_steps) + 1
    (smallest,) = result.smallest_hunks
    assert "SLOW_MS = 5" in smallest.text and result.smallest_hunks_headline.startswith("FOUND")
    assert "The smallest set of its hunks" in (opts.out / "bisect.md").read_text()


def test_after_a_bisect_without_evidence_ddmin_runs_against_the_good_build(tmp_path):
    opts, installed, _ = chained(tmp_path)
    result = bisect(opts, settings(tmp_path), FakeAB(installed))
    hunks = HunksResult.model_validate_json((opts.out / RESULT_FILE).read_text())
    assert hunks.minimal == [slow_index(hunks)] and len(hunks.tests) > 2
    assert result.smallest_hunks[0].path == UTILS


def test_a_cancelled_delta_debugging_after_a_bisect_goes_on_without_starting_over(tmp_path):
    opts, installed, _ = chained(tmp_path)
    whole = FakeAB(installed)
    done = bisect(opts, settings(tmp_path), whole)
    hunk_tests = len(HunksState.model_validate_json(
        (opts.out / HUNKS_STATE_FILE).read_text()).tests) - 1  # the first is the bisect's step
    steps = len(whole.calls) - hunk_tests
    assert hunk_tests >= 2
    shutil.rmtree(opts.out)
    cut = FakeAB(installed, stop_after=steps + 1)  # cancelled after one hunk test
    with pytest.raises(KeyboardInterrupt):
        bisect(opts, settings(tmp_path), cut)
    again = FakeAB(installed)
    result = bisect(opts, settings(tmp_path), again)
    assert len(cut.calls) + len(again.calls) == len(whole.calls)
    assert result.smallest_hunks == done.smallest_hunks
    state = HunksState.model_validate_json((opts.out / HUNKS_STATE_FILE).read_text())
    configs = [tuple(t.hunks) for t in state.tests]
    assert len(configs) == len(set(configs))
    quiet = FakeAB(installed)
    bisect(opts, settings(tmp_path), quiet)
    assert quiet.calls == []
