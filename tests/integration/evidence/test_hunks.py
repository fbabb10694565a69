"""gate hunks against real git repositories built in tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import gate_in_process
from support.gitrepo import commit, git, init
from support.trees import write

from gate.core.errors import GateError
from gate.evidence.hunks import HunkSet, extract_hunks, load_hunks

UTILS_OLD = '''\
import numpy as np
import torch


def helper():
    return 1


HELPER_A = 1
HELPER_B = 2
HELPER_C = 3
HELPER_D = 4
HELPER_E = 5
HELPER_F = 6
HELPER_G = 7


def apply_grammar_bitmask(scheduler_output, input_batch, logits):
    grammar_bitmask = scheduler_output.grammar_bitmask
    sorted_bitmask = np.full(
        shape=(logits.shape[0], grammar_bitmask.shape[1]),
        fill_value=-1,
        dtype=grammar_bitmask.dtype,
    )
    sorted_bitmask[idx] = grammar_bitmask
    grammar_bitmask = torch.from_numpy(sorted_bitmask)
    xgr.apply_token_bitmask_inplace(logits, grammar_bitmask.to(logits.device))


PADDING_A = 1
PADDING_B = 2
PADDING_C = 3
PADDING_D = 4
PADDING_E = 5
PADDING_F = 6
PADDING_G = 7


def unrelated():
    x = 1
    y = 2
    return x + y
'''

UTILS_NEW = UTILS_OLD.replace(
    '''    sorted_bitmask = np.full(
        shape=(logits.shape[0], grammar_bitmask.shape[1]),
        fill_value=-1,
        dtype=grammar_bitmask.dtype,
    )
    sorted_bitmask[idx] = grammar_bitmask
    grammar_bitmask = torch.from_numpy(sorted_bitmask)
    xgr.apply_token_bitmask_inplace(logits, grammar_bitmask.to(logits.device))''',
    '''    sorted_bitmask = torch.full(
        (logits.shape[0], grammar_bitmask.shape[1]),
        -1,
        dtype=torch.int32,
        pin_memory=PIN_MEMORY,
    )
    sorted_bitmask.numpy()[idx] = grammar_bitmask
    grammar_bitmask = sorted_bitmask.to(logits.device, non_blocking=True)
    xgr.apply_token_bitmask_inplace(logits, grammar_bitmask)''',
).replace("    return x + y", "    return x + y + 1  # tidy")

UTILS = "vllm/v1/structured_output/utils.py"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = init(tmp_path / "vllm")
    commit(r, "base", {UTILS: UTILS_OLD, "vllm/v1/sample/sampler.py": "def sample():\n    return 0\n",
                       "README.md": "hello\n"})
    return r


def branch(repo: Path, name: str = "pr") -> None:
    git(repo, "checkout", "-q", "-b", name)


def test_seed_regression_ranked_first(repo: Path):
    branch(repo)
    write(repo, UTILS, UTILS_NEW)
    write(repo, "README.md", "hello pin_memory\n")  # unwatched, must not appear
    commit(repo, "pin the bitmask")
    hs = extract_hunks(repo, "main", "pr")
    assert [h.path for h in hs.hunks] == [UTILS, UTILS]
    top, other = hs.hunks
    assert "apply_grammar_bitmask" in top.section or "torch.full" in top.text
    assert {"pin_memory", "full_staging", "h2d_copy", "bitmask"} <= set(top.mechanisms)
    assert 18 <= top.score < 18.1  # 5 + 4 + 3 + 3, +2 hot function, +1 hot file
    assert other.mechanisms == [] and other.score == 0
    assert "# tidy" in other.text
    assert other.section.startswith("def unrelated") or "unrelated" in other.text
    assert hs.files_changed == 2 and hs.files_watched == 1
    assert top.change == "modified" and top.old_start > 0 and top.new_lines > 0


def test_unrelated_hunk_first_in_diff_order_still_ranked_second(repo: Path):
    branch(repo)
    # the unrelated change comes first in the file; the regression hunk still ranks first
    write(repo, UTILS, UTILS_NEW.replace("return 1", "return 2"))
    commit(repo, "two hunks")
    hs = extract_hunks(repo, "main", "HEAD")
    assert len(hs.hunks) == 3
    assert "pin_memory" in hs.hunks[0].mechanisms
    assert "+    return 2" in hs.hunks[1].text  # then diff order among untagged hunks
    assert "# tidy" in hs.hunks[2].text
    assert not hs.hunks[1].mechanisms and not hs.hunks[2].mechanisms


def test_merge_base_differs_from_base(repo: Path):
    branch(repo)
    write(repo, "vllm/v1/sample/sampler.py", "def sample():\n    return 1\n")
    commit(repo, "pr change")
    git(repo, "checkout", "-q", "main")
    write(repo, UTILS, UTILS_NEW)  # main moves on: not part of the PR
    main_tip = commit(repo, "main moved on")
    fork_point = git(repo, "rev-parse", "main~1")
    hs = extract_hunks(repo, "main", "pr")
    assert hs.merge_base == fork_point != main_tip
    assert [h.path for h in hs.hunks] == ["vllm/v1/sample/sampler.py"]


def test_rename_delete_binary_and_spaces(repo: Path):
    branch(repo)
    git(repo, "mv", UTILS, "vllm/v1/structured_output/utils2.py")
    write(repo, "vllm/v1/structured_output/utils2.py", UTILS_OLD + "\n# appended\n")
    git(repo, "rm", "-q", "vllm/v1/sample/sampler.py")
    write(repo, "vllm/v1/sample/table.bin", bytes(range(256)) * 4)
    write(repo, "vllm/v1/sample/with space.py", "x = '@someone'\n")
    write(repo, "vllm/v1/sample/ünï cödé.py", "y = 1\n")
    commit(repo, "rename, delete, binary, space")
    hs = extract_hunks(repo, "main", "pr")
    by_path = {h.path: h for h in hs.hunks}
    ren = by_path["vllm/v1/structured_output/utils2.py"]
    assert ren.change == "renamed" and ren.old_path == UTILS and "# appended" in ren.text
    deleted = by_path["vllm/v1/sample/sampler.py"]
    assert deleted.change == "deleted" and deleted.text.startswith("-def sample")
    assert by_path["vllm/v1/sample/table.bin"].change == "binary"
    assert by_path["vllm/v1/sample/table.bin"].text == ""
    spaced = by_path["vllm/v1/sample/with space.py"]
    assert spaced.change == "added" and "+x = '@someone'" in spaced.text
    assert by_path["vllm/v1/sample/ünï cödé.py"].text == "+y = 1"


def test_pure_rename_has_one_entry(repo: Path):
    branch(repo)
    git(repo, "mv", "vllm/v1/sample/sampler.py", "vllm/v1/sample/sampler2.py")
    commit(repo, "pure rename")
    hs = extract_hunks(repo, "main", "pr")
    assert len(hs.hunks) == 1
    assert hs.hunks[0].change == "renamed" and hs.hunks[0].old_path == "vllm/v1/sample/sampler.py"


def test_many_files_and_fences(repo: Path):
    branch(repo)
    for i in range(60):
        write(repo, f"vllm/v1/core/sched/m{i:02d}.py", f"v = {i}\n")
    for i in range(20):
        write(repo, f"docs/unwatched{i}.md", "x\n")
    nasty = "s = '''\n```\n</details><b>@someone</b> #123\n````\n'''\n"
    write(repo, "vllm/v1/spec_decode/nasty.py", nasty)
    commit(repo, "many")
    hs = extract_hunks(repo, "main", "pr")
    assert hs.files_changed == 81 and hs.files_watched == 61
    assert len(hs.hunks) == 61
    nasty_hunk = next(h for h in hs.hunks if h.path.endswith("nasty.py"))
    assert "+</details><b>@someone</b> #123" in nasty_hunk.text
    assert "+````" in nasty_hunk.text


def test_watch_globs_are_configurable(repo: Path):
    branch(repo)
    write(repo, UTILS, UTILS_NEW)
    write(repo, "README.md", "changed\n")
    commit(repo, "x")
    hs = extract_hunks(repo, "main", "pr", watch=["README.md"])
    assert [h.path for h in hs.hunks] == ["README.md"]
    assert hs.watch == ["README.md"]


def test_thread_and_xgrammar_mechanisms(repo: Path):
    write(repo, "requirements/common.txt", "xgrammar == 0.1.21\n")
    write(repo, "vllm/utils/torch_utils.py", "import torch\n")
    commit(repo, "reqs")
    branch(repo)
    write(repo, "requirements/common.txt", "xgrammar == 0.1.25\n")
    write(repo, "vllm/utils/torch_utils.py", "import torch\ntorch.set_num_threads(64)\n")
    commit(repo, "bump")
    hs = extract_hunks(repo, "main", "pr")
    tags = {h.path: h.mechanisms for h in hs.hunks}
    assert tags["requirements/common.txt"] == ["xgrammar_pin"]
    assert tags["vllm/utils/torch_utils.py"] == ["threads"]
    assert hs.hunks[0].path == "vllm/utils/torch_utils.py"  # threads (4) over xgrammar (3)


def test_missing_ref_is_gate_error(repo: Path):
    with pytest.raises(GateError, match="does not exist"):
        extract_hunks(repo, "main", "no-such-branch")
    with pytest.raises(GateError, match="invalid git ref"):
        extract_hunks(repo, "--output=/tmp/x", "main")


def test_not_a_repo_is_gate_error(tmp_path: Path):
    with pytest.raises(GateError, match="not a git repository"):
        extract_hunks(tmp_path, "main", "HEAD")
    with pytest.raises(GateError, match="not a folder"):
        extract_hunks(tmp_path / "missing", "main", "HEAD")


def test_unrelated_histories_is_gate_error(repo: Path):
    git(repo, "checkout", "-q", "--orphan", "other")
    write(repo, "x.txt", "x\n")
    commit(repo, "orphan")
    with pytest.raises(GateError, match="no merge-base"):
        extract_hunks(repo, "main", "other")


def test_cli_writes_hunks_json(repo: Path, tmp_path: Path):
    branch(repo)
    write(repo, UTILS, UTILS_NEW)
    commit(repo, "x")
    out = tmp_path / "out" / "hunks.json"
    proc = gate_in_process("hunks", "--repo", repo, "--base", "main", "--head", "pr", "--out", out)
    assert proc.returncode == 0
    hs = load_hunks(out)
    assert isinstance(hs, HunkSet) and hs.hunks[0].mechanisms
    assert "touch known regression mechanisms" in proc.stderr


def test_cli_prints_hunks_json_and_watches_extra_globs(repo: Path):
    branch(repo)
    write(repo, "README.md", "changed\n")
    commit(repo, "x")
    proc = gate_in_process("hunks", "--repo", repo, "--base", "main", "--head", "pr",
                           "--also-watch", "*.md")
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    assert [h["path"] for h in data["hunks"]] == ["README.md"]


def test_gate_cli_missing_ref_exits_2_without_traceback(repo: Path):
    proc = gate_in_process("hunks", "--repo", repo, "--base", "main", "--head", "nope")
    assert proc.returncode == 2
    assert "git ref 'nope' does not exist" in proc.stderr and "Traceback" not in proc.stderr
