"""gate.flows.diff_artifacts: one profile diff written out as every file `gate profile diff` and
`gate ab` leave (the diff, its table, the folded stacks and flame graph, the comment's section,
and with the PR's hunks their ranking), and read back as it was written."""

from __future__ import annotations

import json

import pytest
from support.gitrepo import commit, git, init
from support.profiles import SLOW, make_profile, steady

from gate.evidence.hunks import extract_hunks
from gate.flows.diff_artifacts import (
    SECTION_FILE,
    TABLE_FILE,
    ProfilePair,
    load_written,
    write_diff,
)
from gate.profile.diff_file import PROFILE_DIFF_FILE, DiffSettings
from gate.profile.sampling import SPEEDSCOPE_FILE

UTILS = '''\
def main():
    step()


def step():
    prepare()
    apply_grammar_bitmask()


def prepare():
    return 1


def apply_grammar_bitmask():
    rows = [0] * 64
    return rows
'''

EVERY_FILE = {"diff.folded", "diff-flamegraph.svg", SECTION_FILE, TABLE_FILE, PROFILE_DIFF_FILE}


@pytest.fixture
def slower_bitmask(tmp_path):
    """(base, head) profiles where the head spends 3x the base's time in apply_grammar_bitmask,
    and a PR repository whose one hunk changes that function."""
    repo = init(tmp_path / "src")
    commit(repo, "base", {"lib/utils.py": UTILS, "app.py": "main()\n"})
    git(repo, "branch", "base")
    commit(repo, "head", {"lib/utils.py": UTILS.replace("[0] * 64", "[0] * 64 * 4")})
    hunkset = extract_hunks(repo, "base", "HEAD", ["lib/**"])
    return make_profile("base", steady(slow=100)), make_profile("head", steady(slow=300)), \
        hunkset, repo


def test_every_artifact_is_written_and_recorded_in_the_diff(tmp_path, slower_bitmask):
    base, head, _, _ = slower_bitmask
    out = tmp_path / "diff"
    written = write_diff(ProfilePair(base, head), out, DiffSettings())
    assert {p.name for p in out.iterdir()} == EVERY_FILE
    assert written.evidence is None and "evidence" not in written.diff.artifacts
    assert written.diff.artifacts == {
        "diff_folded": str(out / "diff.folded"), "flamegraph_svg": str(out / "diff-flamegraph.svg"),
        "section": str(out / SECTION_FILE)}
    assert (out / TABLE_FILE).read_text() == written.table + "\n"
    assert "apply_grammar_bitmask" in written.table
    assert (out / "diff-flamegraph.svg").read_text().startswith("<svg")
    assert "head vs base: differential flame graph" in (out / "diff-flamegraph.svg").read_text()
    section = (out / SECTION_FILE).read_text()
    assert "apply_grammar_bitmask" in section
    folded = (out / "diff.folded").read_text().splitlines()
    bitmask = [line for line in folded if "apply_grammar_bitmask" in line]
    assert bitmask and all(int(line.split()[-1]) > int(line.split()[-2]) for line in bitmask)


def test_what_was_written_reads_back_equal(tmp_path, slower_bitmask):
    base, head, hunkset, repo = slower_bitmask
    written = write_diff(ProfilePair(base, head), tmp_path / "diff", DiffSettings(), hunkset=hunkset, repo=repo)
    diff, evidence = load_written(tmp_path / "diff")
    assert diff == written.diff and evidence == written.evidence
    assert json.loads((tmp_path / "diff" / PROFILE_DIFF_FILE).read_text())["artifacts"] == \
        written.diff.artifacts


def test_with_the_prs_hunks_the_measured_function_ranks_its_hunk(tmp_path, slower_bitmask):
    base, head, hunkset, repo = slower_bitmask
    out = tmp_path / "diff"
    written = write_diff(ProfilePair(base, head), out, DiffSettings(), hunkset=hunkset, repo=repo)
    assert written.evidence is not None
    assert written.diff.artifacts["evidence"] == str(out / "evidence.json")
    first = written.evidence.hunks[0]
    assert first.rank == 1 and first.tier == "self"
    assert first.functions[0].name == SLOW.split(":")[1]
    assert "apply_grammar_bitmask" in first.evidence
    assert "apply_grammar_bitmask" in (out / SECTION_FILE).read_text()


def test_speedscope_files_beside_the_profiles_are_linked_when_present(tmp_path, slower_bitmask):
    base, head, _, _ = slower_bitmask
    base_dir, head_dir = tmp_path / "base", tmp_path / "head"
    base_dir.mkdir()
    head_dir.mkdir()
    (head_dir / SPEEDSCOPE_FILE).write_text("{}")
    written = write_diff(ProfilePair(base, head, base_dir, head_dir), tmp_path / "diff",
                         DiffSettings())
    assert written.diff.artifacts["head_speedscope"] == str(head_dir / SPEEDSCOPE_FILE)
    assert "base_speedscope" not in written.diff.artifacts


def test_the_table_shows_at_most_top_functions(tmp_path, slower_bitmask):
    base, head, _, _ = slower_bitmask
    short = write_diff(ProfilePair(base, head), tmp_path / "short", DiffSettings(), top=1).table
    longer = write_diff(ProfilePair(base, head), tmp_path / "long", DiffSettings(), top=15).table
    assert len(short.splitlines()) < len(longer.splitlines())
